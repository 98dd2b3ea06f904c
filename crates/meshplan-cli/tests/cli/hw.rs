//! `meshplan hw list|show`: the book's chip figures and the critical
//! intensities derived from them by hand, and hostile chip files.

use crate::harness::{assert_contains, assert_no_panic, f, json, root, run, u, Scratch};

#[test]
fn list_and_show() {
    let (code, out, err) = run(&["hw", "list"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["tpu-v5e", "tpu-v5p@book", "h100", "mi300x"]);
    let v = json(&["hw", "list", "--json"]);
    assert!(v["chips"].as_array().unwrap().len() >= 10, "{v}");
    // an alias resolves to the catalog name
    let v = json(&["hw", "show", "H100-SXM", "--json"]);
    assert_eq!(v["name"], "h100");
}

#[test]
fn show_tpu_v5e_book() {
    let (code, out, err) = run(&["hw", "show", "tpu-v5e@book"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, &["C/W_hbm", "240 FLOPs/B", "16 GB", "GiB"]);
    let v = json(&["hw", "show", "tpu-v5e@book", "--json"]);
    // Book ch1: 1.97e14 / 8.2e11 ≈ 240.
    assert!((f(&v, "critical_intensity_hbm") - 1.97e14 / 8.2e11).abs() < 1e-6);
    assert_eq!(f(&v, "hbm_capacity_bytes"), 16e9);
    assert_eq!(f(&v, "hbm_bandwidth_bytes_per_s"), 8.2e11);
    assert_eq!(f(&v, "peak_flops_per_s.bf16"), 1.97e14);
    assert_eq!(f(&v, "ici_link_one_way_bytes_per_s"), 4.5e10);
    assert_eq!(f(&v, "ici_axis_bidirectional_bytes_per_s"), 9e10);
    assert_eq!(v["profile"], "book");
    // The vendor profile differs (16 GiB).
    let vendor = json(&["hw", "show", "tpu-v5e", "--json"]);
    assert_eq!(f(&vendor, "hbm_capacity_bytes"), 17_179_869_184.0);
}

#[test]
fn show_book_critical_intensities() {
    let v = json(&["hw", "show", "tpu-v5p@book", "--json"]);
    // Book ch5: 4.59e14 / 1.8e11 = 2550.
    assert!(
        (f(&v, "critical_intensity_ici") - 2550.0).abs() < 1.0,
        "{v}"
    );
    let v = json(&["hw", "show", "h100@book", "--json"]);
    // Book ch12: 990e12/450e9 = 2200 (NVLink); 990e12/400e9 = 2475 (node IB).
    assert!(
        (f(&v, "critical_intensity_nvlink") - 2200.0).abs() < 1.0,
        "{v}"
    );
    assert!(
        (f(&v, "critical_intensity_scale_out") - 2475.0).abs() < 1.0,
        "{v}"
    );
    let (code, out, _) = run(&["hw", "show", "h100@book", "--explain"]);
    assert_eq!(code, 0);
    assert!(out.contains("C / W_nvlink"), "{out}");
}

#[test]
fn show_tpu_v5e_book_every_number_hand_derived() {
    // Book figures: C = 1.97e14, C_int8 = 3.94e14, W_hbm = 8.2e11,
    // ICI 4.5e10 one way (W_ici = 9e10), DCN 3.125e9, PCIe 1.6e10.
    //   C/W_hbm  = 240.24 → 240;   C_int8/W_hbm = 480.49 → 480
    //   C/W_ici  = 2188.9 → 2,189; C/W_dcn = 63,040;  C/W_pcie = 12,312.5 → 12,313
    //   max slice 16x16 = 256 chips; HBM 16e9 B = 14.9 GiB
    let (code, out, err) = run(&["hw", "show", "tpu-v5e@book"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "480 FLOPs/B",
            "2,189 FLOPs/B",
            "63,040 FLOPs/B",
            "12,313 FLOPs/B",
            "16x16 (256 chips)",
            "256 chips",
            "16 GB (14.9 GiB)",
            "3.125 GB/s",
            "90 GB/s",
            "$1.20 per chip-hour",
        ],
    );
    let v = json(&["hw", "show", "tpu-v5e@book", "--json"]);
    assert!((f(&v, "critical_intensity_hbm_int8") - 3.94e14 / 8.2e11).abs() < 1e-9);
    assert!((f(&v, "critical_intensity_ici") - 1.97e14 / 9e10).abs() < 1e-9);
    assert_eq!(f(&v, "critical_intensity_scale_out"), 63_040.0);
    assert_eq!(f(&v, "critical_intensity_pcie"), 12_312.5);
    assert_eq!(u(&v, "ici_max_slice_chips"), 256);
    assert_eq!(u(&v, "max_chips"), 256);
}

/// A chip file with one hostile value is refused, naming the field, and the
/// same file in a user catalog is refused too; never a panic.
#[test]
fn show_rejects_hostile_chip_files() {
    let base = std::fs::read_to_string(root().join("data/hardware/tpu-v5e.toml")).unwrap();
    let s = Scratch::new("hostile-chip");
    for (tag, from, to, field) in [
        // 2^32 · 2^32 · 4 chips overflow u64 (a debug build used to panic).
        (
            "slice",
            "max_slice = \"16x16\"",
            "max_slice = \"4294967296x4294967296x4\"",
            "ici",
        ),
        (
            "ici0",
            "link_bandwidth_one_way = \"50 GB/s\"",
            "link_bandwidth_one_way = \"0 B/s\"",
            "ici.link_bandwidth_one_way",
        ),
        (
            "hbmtiny",
            "hbm_bandwidth = \"819 GB/s\"",
            "hbm_bandwidth = \"1e-320 B/s\"",
            "memory.hbm_bandwidth",
        ),
        (
            "c0",
            "bf16 = \"197 TFLOP/s\"",
            "bf16 = \"0 FLOP/s\"",
            "compute.bf16",
        ),
        (
            "price",
            "usd_per_chip_hour = 1.2",
            "usd_per_chip_hour = nan",
            "price.usd_per_chip_hour",
        ),
        (
            "negprice",
            "usd_per_chip_hour = 1.2",
            "usd_per_chip_hour = -1.0",
            "price.usd_per_chip_hour",
        ),
    ] {
        assert!(base.contains(from), "{from}");
        let body = base.replace(from, to);
        let file = s.write(&format!("{tag}.toml"), &body);
        let args = ["hw", "show", file.as_str()];
        let (code, _, err) = run(&args);
        assert_ne!(code, 0, "{tag}: accepted");
        assert_no_panic(&args, &err);
        assert!(err.contains(field), "{tag}: {err}");
        s.write(&format!("cat-{tag}/hardware/x.toml"), &body);
        let cat = s.dir().join(format!("cat-{tag}"));
        let args = ["--catalog", cat.to_str().unwrap(), "hw", "list"];
        let (code, _, err) = run(&args);
        assert_ne!(code, 0, "{tag}: catalog accepted");
        assert_no_panic(&args, &err);
    }
}

/// Issue 24: `hw show` answers ch12's network questions from one cluster
/// file — node NVLink 8 · 450 GB/s = 3.6 TB/s, NVSwitches 4 · 64 · 25 GB/s
/// = 6.4 TB/s, 560 switches — and `--model-parallel 64` gives Quiz 5 Q2's
/// DP bandwidth 8 · 400 GB/s = 3.2 TB/s (990e12 / 3.2e12 = 309 tokens per
/// GPU); a 0, negative or TPU group is a clear error.
#[test]
fn show_network_inventory_and_model_parallel() {
    let v = json(&["hw", "show", "h100@book", "--json"]);
    assert_eq!(
        f(&v, "network.node_nvlink_bandwidth_bytes_per_s"),
        8.0 * 450e9
    );
    assert_eq!(
        f(&v, "network.node_nvswitch_bandwidth_bytes_per_s"),
        4.0 * 64.0 * 25e9
    );
    assert_eq!(f(&v, "network.switches_total"), 560.0);
    assert_eq!(f(&v, "network.dp_bandwidth_bytes_per_s"), 400e9);
    let m = json(&[
        "hw",
        "show",
        "h100@book",
        "--model-parallel",
        "64",
        "--json",
    ]);
    assert_eq!(f(&m, "network.dp_bandwidth_bytes_per_s"), 8.0 * 400e9);
    assert!((f(&m, "network.dp_critical_batch_per_gpu") - 990e12 / 3.2e12).abs() < 1e-9);
    let (code, out, err) = run(&[
        "hw",
        "show",
        "h100@book",
        "--model-parallel",
        "64",
        "--explain",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "DP bandwidth, model-parallel groups of 64 GPUs",
            "min(W_gpu · min(M, D_node), W_node · max(M, D_node) / D_node) = 3.2 TB/s",
            "N_cuda · f_base",
            "FLOPs per cycle per matrix unit",
        ],
    );
    for (arg, chip, want) in [
        ("0", "h100", "at least 1"),
        ("-3", "h100", "-3"),
        ("8", "tpu-v5e", "TPU"),
    ] {
        let args = ["hw", "show", chip, "--model-parallel", arg];
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{arg}: {err}");
        assert_contains(&err, &[want]);
        assert_no_panic(&args, &err);
    }
}

/// Issue 23: a TPU v5e's MXU does 2 · 128² = 32,768 FLOPs per cycle (not
/// C / (4 · 1.5 GHz) = 32,833), and no network level joins fewer than two
/// children ("any" where the catalog gives no size).
#[test]
fn show_mxu_and_levels_words() {
    let (code, out, err) = run(&["hw", "show", "tpu-v5e"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        &[
            "FLOPs per cycle per matrix unit       32768",
            "DCN (between slices)         any",
        ],
    );
    let (_, out, _) = run(&["hw", "show", "tpu-v4p"]);
    assert!(!out.contains("DCN (between slices)"), "{out}");
}
