#!/usr/bin/env python3
"""Summarizes the raw results of scripts/bench.sh as the Markdown tables of BENCHMARKS.md.

Usage: scripts/bench_summary.py RESULTS_DIR

Reads, under RESULTS_DIR:
  criterion-<label>/**/new/{benchmark,sample}.json   criterion runs (label: bundled, n10, ...)
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


if __name__ == "__main__":
    main()
