#!/bin/sh
# Build the seed corpus of every fuzz target from examples/ and data/ (and
# the core's test fixtures) into fuzz/corpus/TARGET/. Run from anywhere.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
c="$root/fuzz/corpus"
seed() { # TARGET FILE...
    t=$1; shift
    mkdir -p "$c/$t"
    for f in "$@"; do
        [ -f "$f" ] && cp "$f" "$c/$t/$(echo "$f" | sed "s|$root/||; s|/|_|g")"
    done
}
fx="$root/crates/meshplan-core/tests/fixtures"
seed scenario $(find "$root/examples" -name '*.toml')
seed evaluate_scenario $(find "$root/examples" -name '*.toml')
seed model_file "$root"/data/models/*.toml
seed chip_file "$root"/data/hardware/*.toml
seed profile "$root"/data/profiles/*.toml
seed hf_config "$fx"/hf/*.json
seed claims "$root"/examples/book/*.toml "$root"/examples/claims/*.toml "$root"/examples/playbook/*.toml
seed published_json "$fx"/validation/*.json
mkdir -p "$c/csv_rows"
for f in "$fx"/validation/*.csv; do
    head -n 40 "$f" > "$c/csv_rows/$(basename "$f")"
done
mkdir -p "$c/units"
i=0
for s in 4M 1.5e9 32Ki 128k "3 GB" "1.2 TB/s" "459 TFLOP/s" 1e40 -1 0 bf16 int8 16x16x16 2*16x16x16 500ms 18446744073709551616; do
    printf '%s' "$s" > "$c/units/seed-$i"; i=$((i + 1))
done
echo "seed corpus in $c"
