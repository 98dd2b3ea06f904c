//! Benchmark of one `infer` evaluation (being built).

fn main() {
    divan::main();
}
