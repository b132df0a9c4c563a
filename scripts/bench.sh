#!/usr/bin/env bash
# Reruns every benchmark of BENCHMARKS.md and prints its tables.
#
#   scripts/bench.sh                      # N = 10, 1,000 and 10,000 (about 12 minutes)
#   BENCH_SIZES="10 1000" scripts/bench.sh
#
# Raw results go to target/bench/results/ (git-ignored): criterion's sample files
# (criterion-bundled/, criterion-preflight/, criterion-n<N>/), hyperfine JSON exports
# (hyperfine-*.json, hyperfine-listing.json from scripts/bench-preflight.sh), peak RSS
# per run (rss-*.txt), the machine (machine.txt) and summary.md, the tables of BENCHMARKS.md.
#
# Installs what it needs when missing: hyperfine and GNU time with apt-get; taplo and
# check-jsonschema (the `check` peers, pinned) with pip into .peers/bench-venv (git-ignored).
# The machine is shared and small: run this with nothing else building; it warns when the
# load average says otherwise.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd -P)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
unset KCAP_MCP_REGISTRY_DIR
sizes="${BENCH_SIZES:-10 1000 10000}"
runs="${BENCH_RUNS:-10}"
out="$root/target/bench"
results="$out/results"
venv="$root/.peers/bench-venv"
TAPLO_VERSION=0.9.3
CHECK_JSONSCHEMA_VERSION=0.39.0

say() { printf '\n== %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

say "tools"
missing=()
command -v hyperfine >/dev/null || missing+=(hyperfine)
[ -x /usr/bin/time ] || missing+=(time)
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$("$venv/bin/taplo" --version 2>/dev/null)" != "taplo $TAPLO_VERSION" ] ||
    ! "$venv/bin/check-jsonschema" --version 2>/dev/null | grep -q "version $CHECK_JSONSCHEMA_VERSION$"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "taplo==$TAPLO_VERSION" "check-jsonschema==$CHECK_JSONSCHEMA_VERSION"
fi
taplo="$venv/bin/taplo"
cjs="$venv/bin/check-jsonschema"

rm -rf "$results"
mkdir -p "$results"
{
    echo "cores: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "memory: $(free -g | awk '/^Mem:/{print $2}') GiB"
    echo "rustc: $(rustc --version)"
    echo "hyperfine: $(hyperfine --version)"
    echo "taplo: $("$taplo" --version)"
    echo "check-jsonschema: $("$cjs" --version)"
    echo "load average at start: $(load)"
} | tee "$results/machine.txt"
if awk '{exit !($1 > 1.5)}' /proc/loadavg; then
    echo "warning: load average $(load): something else is running; figures will be noisy" >&2
fi

# Criterion keeps its results under $CARGO_TARGET_DIR/criterion; each run starts clean and
# is copied to $results/criterion-$1.
criterion_run() {
    local label="$1"
    shift
    rm -rf "$CARGO_TARGET_DIR/criterion"
    echo "$label: load before $(load)" >>"$results/load.txt"
    cargo bench "$@"
    cp -r "$CARGO_TARGET_DIR/criterion" "$results/criterion-$label"
}

say "criterion on the bundled registry: lookup, resolution, rendering"
criterion_run bundled --bench lookup --bench render --bench plan --bench diff

say "launch preflight: Client::plan for every client, beside the client listings it replaced"
# The listings need the real clients: source the variables scripts/install-peers.sh prints
# (KCAP_CODEX_BIN, KCAP_COPILOT_BIN, KCAP_COPILOT_CACHE) before this script, or they are left
# out.
bash scripts/bench-preflight.sh "$results"

say "the CLI and the JSON Schema it exports"
cargo build -q --release
cli="$CARGO_TARGET_DIR/release/kcap-mcp-registry"
schema="$out/registry.schema.json"
"$cli" export json-schema >"$schema"

for n in $sizes; do
    dir="$out/registry-$n"
    say "N = $n: generate $dir"
    rm -rf "$dir"
    cargo run -q --example gen_registry -- "$n" "$dir"

    say "N = $n: check wall time (ours, taplo, check-jsonschema)"
    "$cli" check "$dir"
    "$taplo" check --schema "file://$schema" "$dir/*.toml" 2>/dev/null
    "$cjs" --schemafile "$schema" "$dir"/*.toml
    # No shell (-N): at N = 10 every command takes a few milliseconds, mostly process
    # start-up, which a shell would blur. hyperfine discards the tools' output; taplo expands
    # its quoted glob itself. check-jsonschema needs the file list, too long for one
    # argument at N = 10,000, so a script expands it (bash start-up, ~1 ms, is counted).
    printf '#!/usr/bin/env bash\nexec %q --schemafile %q %q/*.toml\n' "$cjs" "$schema" "$dir" \
        >"$out/check-jsonschema-$n.sh"
    hyperfine -N --warmup 2 --runs "$runs" --export-json "$results/hyperfine-check-$n.json" \
        -n ours "'$cli' check '$dir'" \
        -n taplo "'$taplo' check --schema 'file://$schema' '$dir/*.toml'" \
        -n check-jsonschema "bash '$out/check-jsonschema-$n.sh'"

    say "N = $n: peak memory of check (3 runs each)"
    for _ in 1 2 3; do
        /usr/bin/time -f %M -a -o "$results/rss-check-ours-$n.txt" "$cli" check "$dir" >/dev/null
        /usr/bin/time -f %M -a -o "$results/rss-check-taplo-$n.txt" \
            "$taplo" check --schema "file://$schema" "$dir/*.toml" 2>/dev/null
        /usr/bin/time -f %M -a -o "$results/rss-check-check-jsonschema-$n.txt" \
            "$cjs" --schemafile "$schema" "$dir"/*.toml >/dev/null
    done

    say "N = $n: the build script's own run time"
    export KCAP_MCP_REGISTRY_DIR="$dir"
    script="$(cargo build --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["custom-build"]
            and m["target"]["src_path"].endswith("/build.rs") and "kcap" in m["package_id"]):
        print(m["filenames"][0])')"
    scratch="$(mktemp -d)"
    hyperfine -N --warmup 1 --runs "$runs" --export-json "$results/hyperfine-build-script-$n.json" \
        -n build.rs "env CARGO_MANIFEST_DIR='$root' OUT_DIR='$scratch' '$script'"
    rm -rf "$scratch"

    say "N = $n: incremental cargo build after editing one registry file"
    file="$dir/syn-5-search.toml"
    # Flips one letter of the description, so the content (not only the mtime) changes.
    edit="sed -i 's/reviewers/Reviewers/;t;s/Reviewers/reviewers/' '$file'"
    cargo build -q
    hyperfine --runs 5 --prepare "$edit" --export-json "$results/hyperfine-incremental-$n.json" \
        -n "cargo build" "cargo build -q"

    say "N = $n: lookup compiled against this registry"
    criterion_run "n$n" --bench lookup
    unset KCAP_MCP_REGISTRY_DIR
done

say "summary (also in $results/summary.md)"
echo "load average at end: $(load)" >>"$results/machine.txt"
python3 scripts/bench_summary.py "$results" | tee "$results/summary.md"
