#!/usr/bin/env python3
"""Summarizes the raw results of scripts/bench.sh as the Markdown tables of BENCHMARKS.md.

Usage: scripts/bench_summary.py RESULTS_DIR

Reads, under RESULTS_DIR:
  criterion-<label>/**/new/{benchmark,sample}.json   criterion runs (label: bundled, preflight,
                                                      n10, ...)
  hyperfine-*.json                                    hyperfine --export-json files
  rss-*.txt                                           peak RSS in KiB, one run per line

Per criterion benchmark: the median, min and max of the per-iteration time of its samples.
Per hyperfine command: the median, min and max wall time of its runs.
"""

import json
import statistics
import sys
from pathlib import Path


def fmt_time(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError


def criterion(dir_):
    """full_id -> (median, min, max) per-iteration seconds."""
    out = {}
    for bench in sorted(dir_.rglob("new/benchmark.json")):
        meta = json.loads(bench.read_text())
        sample = json.loads((bench.parent / "sample.json").read_text())
        per_iter = [t / i * 1e-9 for t, i in zip(sample["times"], sample["iters"])]
        out[meta["full_id"]] = (
            statistics.median(per_iter),
            min(per_iter),
            max(per_iter),
        )
    return out


def cell(stats):
    med, lo, hi = stats
    return f"{fmt_time(med)} ({fmt_time(lo)} – {fmt_time(hi)})"


def ratio(baseline, ours):
    return f"{baseline[0] / ours[0]:.2f}×"


def lookup_table(runs):
    print("| registry | input | `lookup` | HashMap + `to_lowercase` | ratio | linear scan | ratio |")
    print("|---|---|---|---|---|---|---|")
    for label, res in runs:
        for case in ("hit_exact", "hit_mixed_padded", "miss_valid_length", "miss_too_long"):
            ours = res.get(f"lookup/{case}/lookup")
            if ours is None:
                continue
            m = res[f"lookup/{case}/hashmap_to_lowercase"]
            s = res[f"lookup/{case}/linear_scan"]
            print(
                f"| {label} | {case} | {cell(ours)} | {cell(m)} | {ratio(m, ours)} "
                f"| {cell(s)} | {ratio(s, ours)} |"
            )
    print()


def render_table(res):
    print("| benchmark | ours | baseline | baseline ÷ ours |")
    print("|---|---|---|---|")
    for n in (3, 7, 100):
        ours = res.get(f"resolve_allowlist/resolve_allowlist/{n}")
        base = res.get(f"resolve_allowlist/naive_baseline/{n}")
        if ours and base:
            print(
                f"| `resolve_allowlist`, {n} entries | {cell(ours)} | {cell(base)} (naive) "
                f"| {ratio(base, ours)} |"
            )
    ours = res.get("claude_mcp_config/full_registry")
    base = res.get("claude_mcp_config/serde_json_value_baseline")
    if ours and base:
        print(
            f"| `claude_mcp_config`, full registry | {cell(ours)} | {cell(base)} "
            f"(`serde_json::Value`) | {ratio(base, ours)} |"
        )
    for name, what in (
        ("codex_mcp_overrides/full_registry", "`codex_mcp_overrides`, full registry"),
        ("reviewer_argv/claude", "`claude_reviewer_args` (whole argv)"),
        ("reviewer_argv/codex", "`codex_reviewer_args` (whole argv)"),
    ):
        if name in res:
            print(f"| {what} | {cell(res[name])} | – | – |")
    print()


def hyperfine(path):
    """command name -> (median, min, max) seconds."""
    data = json.loads(path.read_text())
    out = {}
    for r in data["results"]:
        times = r["times"]
        out[r["command"]] = (statistics.median(times), min(times), max(times))
    return out


def rss(path):
    values = [int(v) for v in path.read_text().split()]
    return max(values) if values else None


def scaling_tables(results, sizes):
    print("| N files | `kcap-mcp-registry check` | taplo | ratio | check-jsonschema | ratio |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        path = results / f"hyperfine-check-{n}.json"
        if not path.exists():
            continue
        h = hyperfine(path)
        ours, taplo, cjs = h.get("ours"), h.get("taplo"), h.get("check-jsonschema")
        row = f"| {n} + 1 | {cell(ours)} |"
        for peer in (taplo, cjs):
            row += f" {cell(peer)} | {ratio(peer, ours)} |" if peer else " – | – |"
        print(row)
    print()
    print("| N files | peak RSS: ours | taplo | check-jsonschema |")
    print("|---|---|---|---|")
    for n in sizes:
        cells = []
        for tool in ("ours", "taplo", "check-jsonschema"):
            path = results / f"rss-check-{tool}-{n}.txt"
            v = rss(path) if path.exists() else None
            cells.append(f"{v / 1024:.1f} MiB" if v else "–")
        print(f"| {n} + 1 | " + " | ".join(cells) + " |")
    print()
    print("| N files | build script run | incremental `cargo build` after editing one file |")
    print("|---|---|---|")
    for n in sizes:
        bs = results / f"hyperfine-build-script-{n}.json"
        inc = results / f"hyperfine-incremental-{n}.json"
        cells = []
        for p in (bs, inc):
            cells.append(cell(next(iter(hyperfine(p).values()))) if p.exists() else "–")
        print(f"| {n} + 1 | " + " | ".join(cells) + " |")
    print()


PREFLIGHT_TARGET = 0.300  # seconds per launch (issue 26, item 4)

# client (as `Client::name`), its name in the table, and what the previous design ran before
# its launch beyond `Client::plan`: hyperfine command names, or a criterion benchmark.
PREFLIGHT_CLIENTS = (
    ("claude", "Claude Code", ("criterion", "previous/claude_file_preflight",
                               "file preflight (`claude_plan_preflighted`)")),
    ("codex", "Codex CLI", ("hyperfine", "codex mcp list --json")),
    ("gemini", "Gemini CLI", None),
    ("opencode", "OpenCode", None),
    ("copilot", "Copilot CLI", ("hyperfine", "copilot mcp list --json")),
    ("cursor", "Cursor", None),
    ("kiro", "Kiro", None),
    ("antigravity", "Antigravity", None),
)


def preflight_table(results):
    """The "Launch preflight" table: per client, what the previous design ran (measured in
    the same run), `Client::plan` now, and the 300 ms target."""
    crit_dir = results / "criterion-preflight"
    if not crit_dir.exists():
        return
    crit = criterion(crit_dir)
    listing_path = results / "hyperfine-listing.json"
    listing = hyperfine(listing_path) if listing_path.exists() else {}
    print("| client | previous: what it ran before a launch | previous, measured now "
          "| now: `Client::plan` (preflight + plan) | ≤ 300 ms |")
    print("|---|---|---|---|---|")
    for name, shown, previous in PREFLIGHT_CLIENTS:
        now = crit.get(f"preflight/{name}")
        if now is None:
            continue
        what, measured = "nothing beyond the plan", "–"
        if previous and previous[0] == "criterion" and previous[1] in crit:
            what, measured = previous[2], cell(crit[previous[1]])
        elif previous and previous[0] == "hyperfine":
            rows = [(k, v) for k, v in listing.items() if k.startswith(previous[1])]
            if rows:
                what = f"`{previous[1]}`"
                measured = "; ".join(
                    f"{cell(v)} {k.removeprefix(previous[1]).strip()}" for k, v in rows
                )
        met = "met" if now[0] <= PREFLIGHT_TARGET else "**missed**"
        print(f"| {shown} | {what} | {measured} | {cell(now)} | {met} |")
    print()


def main():
    results = Path(sys.argv[1])
    sizes = [
        int(p.name.removeprefix("criterion-n"))
        for p in results.glob("criterion-n*")
        if p.name.removeprefix("criterion-n").isdigit()
    ]
    sizes.sort()
    bundled = criterion(results / "criterion-bundled") if (results / "criterion-bundled").exists() else {}
    print("### lookup\n")
    runs = [("bundled (7)", bundled)] + [
        (f"synthetic {n} + 1", criterion(results / f"criterion-n{n}")) for n in sizes
    ]
    lookup_table(runs)
    print("### resolution and rendering (bundled registry)\n")
    render_table(bundled)
    print("### scaling\n")
    scaling_tables(results, sizes)
    if (results / "criterion-preflight").exists():
        print("### launch preflight\n")
        preflight_table(results)


if __name__ == "__main__":
    main()
