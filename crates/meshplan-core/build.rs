//! Embeds the catalog files under `data/` into the library at build time, so
//! the binary needs no data directory. One `(file name, contents)` pair per
//! file, sorted by name so that the build is reproducible.

use std::{env, fs, path::Path};

fn list(dir: &Path) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                v.push((
                    name,
                    p.canonicalize().unwrap().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    v.sort();
    v
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let mut out = String::new();
    for (var, sub) in [("MODEL_FILES", "models"), ("HARDWARE_FILES", "hardware")] {
        let dir = root.join(sub);
        println!("cargo:rerun-if-changed={}", dir.display());
        out.push_str(&format!("pub(crate) static {var}: &[(&str, &str)] = &[\n"));
        for (name, path) in list(&dir) {
            println!("cargo:rerun-if-changed={path}");
            out.push_str(&format!("    ({name:?}, include_str!({path:?})),\n"));
        }
        out.push_str("];\n");
    }
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("catalog_files.rs");
    fs::write(dest, out).unwrap();
}
