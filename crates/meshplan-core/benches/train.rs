//! Benchmark of one `train` evaluation (being built).

fn main() {
    divan::main();
}
