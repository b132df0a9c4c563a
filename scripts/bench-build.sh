#!/usr/bin/env bash
# The build and test timings of issue 36, for two checkouts side by side in one hyperfine run
# each (BENCHMARKS.md, "Building and testing"):
#   - a cold `cargo test --no-run` (after `cargo clean`: what a fresh clone and CI build);
#   - the relink after a one-line edit of src/ (`touch src/lib.rs`, then `cargo test --no-run`);
#   - `cargo test` without the real clients (no KCAP_* variable set), built beforehand;
#   - the checker (`kcap-registry-check`, release) on 10,000 and 100,000 generated files, and
#     its peak memory on a directory holding a 1 GiB file (GNU time).
# Usage: scripts/bench-build.sh BEFORE AFTER [RESULTS]: two checkouts, each with its own
# target/ (e.g. `git worktree add ../before <commit>`). Needs hyperfine and GNU time.
set -euo pipefail
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
results=${3:-$PWD/target/bench/results}
mkdir -p "$results"
for v in $(env | sed -n 's/^\(KCAP_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
uptime > "$results/build-load.txt"
list="$before,$after"

hyperfine --runs 1 --parameter-list dir "$list" --export-json "$results/hyperfine-cold.json" \
    --prepare 'cd {dir} && cargo clean -q' \
    --command-name 'cold cargo test --no-run ({dir})' 'cd {dir} && cargo test -q --no-run'

hyperfine --runs 5 --parameter-list dir "$list" --export-json "$results/hyperfine-relink.json" \
    --prepare 'touch {dir}/src/lib.rs' \
    --command-name 'relink after an edit of src/ ({dir})' 'cd {dir} && cargo test -q --no-run'

(cd "$before" && cargo test -q --no-run) && (cd "$after" && cargo test -q --no-run)
hyperfine --runs 1 --parameter-list dir "$list" --export-json "$results/hyperfine-test.json" \
    --command-name 'cargo test, no real clients ({dir})' 'cd {dir} && cargo test -q >/dev/null 2>&1'

for dir in "$before" "$after"; do
    (cd "$dir" && cargo build -q --release -p kcap-registry-check)
done
gen="$results/registries"
rm -rf "$gen" && mkdir -p "$gen"
for n in 10000 100000; do
    (cd "$after" && cargo run -q --example gen_registry -- "$n" "$gen/n$n")
done
hyperfine -N --warmup 1 --runs 3 --export-json "$results/hyperfine-check-scale.json" \
    --parameter-list dir "$before,$after" --parameter-list n 10000,100000 \
    --command-name 'check {n} files ({dir})' "{dir}/target/release/kcap-registry-check $gen/n{n}"

big="$gen/big"
mkdir -p "$big" && cp "$after/registry/kcap-flow-result.toml" "$big/"
truncate -s 1G "$big/kcap-big.toml"
for dir in "$before" "$after"; do
    /usr/bin/time -f "$dir: %M KiB peak, %e s, exit %x" \
        "$dir/target/release/kcap-registry-check" "$big" 2>&1 >/dev/null | tail -1 \
        | tee -a "$results/check-1g-rss.txt" || true
done
rm -rf "$gen"
