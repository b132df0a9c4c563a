#!/usr/bin/env bash
# What a Codex reviewer launch pays for its inventory (BENCHMARKS.md, "Codex inventory"):
# `codex mcp list --json` alone (the old inventory), `codex app-server` config/read alone, and
# both at once as `codex_inventory` runs them, each through examples/codex_inventory.rs
# against the pinned Codex in a throwaway CODEX_HOME holding one server.
#
#   KCAP_CODEX_BIN=$PWD/.peers/node_modules/.bin/codex scripts/bench-inventory.sh [RUNS]
#
# Uses hyperfine when installed (JSON in target/bench/results/hyperfine-inventory.json),
# else a plain loop that prints the mean per run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd -P)"
cd "$root"
codex="${KCAP_CODEX_BIN:?set KCAP_CODEX_BIN to the pinned codex}"
runs="${1:-20}"
cargo build -q --release --example codex_inventory
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
printf '[mcp_servers.a]\ncommand = "x"\n' > "$home/config.toml"
export HOME="$home" CODEX_HOME="$home"
bin="$root/target/release/examples/codex_inventory"
modes=(mcp-list config-read merged)
if command -v hyperfine >/dev/null; then
  mkdir -p target/bench/results
  hyperfine -N --warmup 2 --runs "$runs" --export-json target/bench/results/hyperfine-inventory.json \
    "${modes[@]/#/$bin $codex }"
else
  for m in "${modes[@]}"; do
    "$bin" "$codex" "$m" >/dev/null 2>&1  # warm-up
    s=$(date +%s%N)
    for _ in $(seq "$runs"); do "$bin" "$codex" "$m" >/dev/null 2>&1; done
    e=$(date +%s%N)
    echo "$m: $(( (e - s) / runs / 1000000 )) ms per run (mean of $runs)"
  done
fi
