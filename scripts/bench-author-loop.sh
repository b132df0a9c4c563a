#!/usr/bin/env bash
# The registry author's loop (issue 25), measured side by side with a previous revision in
# one run: the README's main command after an edit of one registry file (edit -> verdict),
# and the same command on an empty target dir (the cold main job), each revision with the
# main command its own README gives. Also `cargo build --timings` of each cold build.
#
#   scripts/bench-author-loop.sh [BASE_REV]     # default d0aa039, the main before the checker
#
# Needs hyperfine (apt-get install hyperfine). Results: target/bench/author-loop/ (hyperfine
# JSON, the timing reports). Run it on a quiet machine: it warns when the load says otherwise.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd -P)"
base="${1:-d0aa039}"
runs="${BENCH_RUNS:-5}"
cold_runs="${BENCH_COLD_RUNS:-3}"
out="$root/target/bench/author-loop"
rm -rf "$out"
mkdir -p "$out"
# The two checkouts live outside this repository: under it, cargo would take them for
# members of its workspace.
work="${TMPDIR:-/tmp}/kcap-author-loop"
rm -rf "$work"
mkdir -p "$work"
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install hyperfine" >&2; exit 2; }
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"

# Two clean checkouts, each with its own target dir: the previous revision and this one.
for which in before after; do
    if [ "$which" = before ]; then rev="$base"; else rev=HEAD; fi
    git clone -q --no-checkout "$root" "$work/$which"
    git -C "$work/$which" checkout -q "$(git -C "$root" rev-parse "$rev")"
done
trap 'rm -rf "$work"' EXIT

# The main command as each revision's README writes it: its first line of code.
main_command() { grep -m1 '^cargo ' "$1/README.md" | sed 's/ *#.*//'; }
before_cmd="$(main_command "$work/before")"
after_cmd="$(main_command "$work/after")"
echo "before ($base): $before_cmd" | tee -a "$out/load.txt"
echo "after  ($(git -C "$root" rev-parse --short HEAD)): $after_cmd" | tee -a "$out/load.txt"

# An edit as an author makes one: a description changes, alternating so every run edits.
edit="sed -i 's/^description = \"\\(.*\\)\\.\"$/description = \"\\1!\"/;t;s/^description = \"\\(.*\\)!\"$/description = \"\\1.\"/' registry/kcap-review.toml"
for which in before after; do
    (cd "$work/$which" && eval "$([ $which = before ] && echo "$before_cmd" || echo "$after_cmd")" >/dev/null 2>&1)
done
hyperfine --runs "$runs" --export-json "$out/edit-verdict.json" \
    -n "before: $before_cmd" --prepare "cd $work/before && $edit" "cd $work/before && $before_cmd" \
    -n "after: $after_cmd" --prepare "cd $work/after && $edit" "cd $work/after && $after_cmd"

hyperfine --runs "$cold_runs" --export-json "$out/cold.json" \
    -n "before: $before_cmd" --prepare "rm -rf $work/before/target" "cd $work/before && $before_cmd" \
    -n "after: $after_cmd" --prepare "rm -rf $work/after/target" "cd $work/after && $after_cmd"

# Where a cold build's time goes, per revision (cargo's own timing report).
for which in before after; do
    cmd="$([ $which = before ] && echo "$before_cmd" || echo "$after_cmd")"
    rm -rf "$work/$which/target"
    (cd "$work/$which" && eval "${cmd/cargo run/cargo build --timings}" >/dev/null 2>&1)
    cp "$(ls -t "$work/$which"/target/cargo-timings/cargo-timing-*.html | head -n 1)" "$out/timings-$which.html"
    python3 - "$out/timings-$which.html" "$which" <<'PY'
import json, re, sys
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);", open(sys.argv[1]).read(), re.S).group(1))
units.sort(key=lambda u: -u["duration"])
print(f"{sys.argv[2]}: {len(units)} units, {sum(u['duration'] for u in units):.1f} s summed; slowest: "
      + ", ".join(f"{u['name']} {u['duration']:.1f} s" for u in units[:6]))
PY
done | tee "$out/timings.txt"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
