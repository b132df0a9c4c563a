#!/usr/bin/env bash
# The launch preflight of BENCHMARKS.md ("Launch preflight"), in one run: criterion times
# `Client::plan` for every client (benches/preflight.rs: the administrator-file checks and the
# plan, all a launch needs now), then hyperfine times the MCP listing the previous design ran
# before every Codex and Copilot CLI launch (`codex mcp list --json`, `copilot mcp list
# --json`), through the npm launcher and the native binary, in a throwaway HOME and worktree,
# offline (no model service; Copilot CLI with COPILOT_OFFLINE and the API at a dead port).
#
#   source /tmp/peers.env     # KCAP_CODEX_BIN, KCAP_COPILOT_BIN, KCAP_COPILOT_CACHE
#   scripts/bench-preflight.sh [RESULTS_DIR]
#
# bash scripts/install-peers.sh prints those variables. The native binaries are found next to
# the launchers (override with KCAP_CODEX_NATIVE_BIN, KCAP_COPILOT_NATIVE_BIN). A listing
# whose client is missing is left out, with a note on stderr. Writes
# RESULTS_DIR/criterion-preflight/ and RESULTS_DIR/hyperfine-listing.json (RESULTS_DIR
# defaults to target/bench/results); scripts/bench_summary.py RESULTS_DIR prints the table.
# Needs hyperfine (scripts/bench.sh installs it; `apt-get install hyperfine`).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd -P)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
results="${1:-$root/target/bench/results}"
runs="${BENCH_RUNS:-20}"
mkdir -p "$results"
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "preflight: load before $(load)" >>"$results/load.txt"
rm -rf "$CARGO_TARGET_DIR/criterion"
cargo bench --bench preflight
rm -rf "$results/criterion-preflight"
cp -r "$CARGO_TARGET_DIR/criterion" "$results/criterion-preflight"

# The native binaries the npm launchers start.
codex_native="${KCAP_CODEX_NATIVE_BIN:-}"
if [ -z "$codex_native" ] && [ -n "${KCAP_CODEX_BIN:-}" ]; then
    pkg="$(dirname "$(dirname "$(readlink -f "$KCAP_CODEX_BIN")")")"
    codex_native="$(compgen -G "$(dirname "$pkg")/codex-linux-*/vendor/*/bin/codex" | head -n1 || true)"
fi
copilot_native="${KCAP_COPILOT_NATIVE_BIN:-}"
if [ -z "$copilot_native" ] && [ -n "${KCAP_COPILOT_BIN:-}" ]; then
    copilot_native="$(compgen -G "$(dirname "$KCAP_COPILOT_BIN")/copilot-linux-*" | head -n1 || true)"
fi

commands=()
add() { # name, binary
    if [ -n "$2" ] && [ -x "$2" ]; then
        commands+=(-n "$1" "'$2' mcp list --json")
    else
        echo "note: $1 left out (binary not found: '${2:-unset}')" >&2
    fi
}
add "codex mcp list --json (npm launcher)" "${KCAP_CODEX_BIN:-}"
add "codex mcp list --json (native)" "$codex_native"
if [ -n "${KCAP_COPILOT_CACHE:-}" ]; then
    add "copilot mcp list --json (npm launcher)" "${KCAP_COPILOT_BIN:-}"
    add "copilot mcp list --json (native)" "$copilot_native"
else
    echo "note: Copilot CLI left out (KCAP_COPILOT_CACHE not set)" >&2
fi
rm -f "$results/hyperfine-listing.json"
if ((${#commands[@]})); then
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    mkdir -p "$scratch/home/.codex" "$scratch/worktree"
    git -C "$scratch/worktree" init -q
    echo "listings: load before $(load)" >>"$results/load.txt"
    # Each client's listing with a throwaway HOME (and CODEX_HOME), in the worktree, as the
    # previous design ran it before a launch; no shell (-N).
    (cd "$scratch/worktree" && env -i PATH="$PATH" HOME="$scratch/home" \
        CODEX_HOME="$scratch/home/.codex" XDG_CACHE_HOME="${KCAP_COPILOT_CACHE:-$scratch/cache}" \
        COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false \
        COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:9/v1 OPENAI_BASE_URL=http://127.0.0.1:9/v1 \
        hyperfine -N --warmup 3 --runs "$runs" --export-json "$results/hyperfine-listing.json" \
        "${commands[@]}")
fi
echo "preflight: load after $(load)" >>"$results/load.txt"
