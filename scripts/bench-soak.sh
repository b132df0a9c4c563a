#!/usr/bin/env bash
# The executor's soak run (issue 33; BENCHMARKS.md, "The executor's soak run"): one process
# (examples/soak.rs, release) carries out SEQUENTIAL launches in a row, then ROUNDS rounds of
# AT_ONCE launches started together, against a compiled stand-in ACP client
# (scripts/soak-client.c), and reports launches/s, p50/p99 and what is left behind.
#
#   scripts/bench-soak.sh [REV]      (SEQUENTIAL=10000 AT_ONCE=200 ROUNDS=5 by default)
#
# With REV, the example is built from that commit's tree as well (git archive, the same
# target directory) and both run, REV first. Needs cc. VARIANTS: space-separated NAME=VALUE
# settings, one run of both builds each (`-`: as is), e.g.
#   VARIANTS="- SOAK_THREADS=spawn GLIBC_TUNABLES=glibc.malloc.tcache_count=0"
# (examples/soak.rs: SOAK_THREADS=spawn spawns the launch threads afresh each round instead
# of a pool made once; the tunable turns off glibc's per-thread cache of freed chunks;
# SOAK_SANDBOX=off and SOAK_CGROUP=off launch without the sandbox or the reviewer's cgroup).
# The rounds at once also print their CPU per launch (the executor and its clients), the
# figure to compare on a loaded machine. The launch directories go under this script's
# temporary directory (TMPDIR: on a tmpfs, no file system's inode cost is measured).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
seq=${SEQUENTIAL:-10000} at_once=${AT_ONCE:-200} rounds=${ROUNDS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/client" "$root/scripts/soak-client.c"
target=${CARGO_TARGET_DIR:-$root/target}

build() { # SRC OUT
  (cd "$1" && CARGO_TARGET_DIR=$target cargo build -q --release --example soak \
    --bin kcap-mcp-registry)
  cp "$target/release/examples/soak" "$2"
  cp "$target/release/kcap-mcp-registry" "$2-cli"
}

labels=()
if [ -n "${1:-}" ]; then
  mkdir -p "$tmp/src-$1"
  git -C "$root" archive "$1" | tar -x -C "$tmp/src-$1"
  cp "$root/examples/soak.rs" "$tmp/src-$1/examples/soak.rs"
  grep -q 'name = "soak"' "$tmp/src-$1/Cargo.toml" ||
    printf '\n[[example]]\nname = "soak"\nrequired-features = ["launch"]\n' >> "$tmp/src-$1/Cargo.toml"
  build "$tmp/src-$1" "$tmp/soak-$1"
  labels+=("$1")
fi
build "$root" "$tmp/soak-this"
labels+=(this)

read -r -a variants <<< "${VARIANTS:--}"
for variant in "${variants[@]}"; do
  for label in "${labels[@]}"; do
    rm -rf "$tmp/run-$label"
    mkdir -p "$tmp/run-$label"
    "$tmp/soak-$label-cli" render gemini --agent-id a1 --launch-dir "$tmp/run-$label/launch-@N@" \
      --worktree "$tmp/run-$label/worktree-@N@" --format plan > "$tmp/plan-$label.json" 2> /dev/null
    echo "== $label ${variant/#-/(as is)}; load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$variant" = - ]; then set --; else set -- "$variant"; fi
    env "$@" "$tmp/soak-$label" "$tmp/plan-$label.json" "$tmp/client" "$seq" "$at_once" "$rounds" ||
      true
  done
done
