//! `check --against` on big registration files (`drift::check_against`, the whole library
//! path the CLI runs, file read included): a realistic ~3.8 MB `~/.claude.json` (300
//! projects, each with 45 history items of ~210 bytes, every other one with a local-scope
//! `kcap-review`), and `.mcp.json` files whose `mcpServers` hold 10,000, 20,000 and 40,000
//! entries (every one an extra server, so each is a finding). The result is checked before
//! anything is timed.

use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kcap_mcp_registry::ops::check::{AgainstOptions, check_against};
use serde_json::{Map, Value, json};

fn claude_json(projects: usize) -> String {
    let servers = json!({"kcap-review": {"command": "kcap", "args": ["mcp", "review"]}});
    let mut all = Map::new();
    for i in 0..projects {
        let history: Vec<Value> = (0..45)
            .map(|j| json!({"display": format!("{}{j}", "x".repeat(200)), "pastedContents": {}}))
            .collect();
        let local = if i % 2 == 0 {
            servers.clone()
        } else {
            json!({})
        };
        all.insert(
            format!("/home/me/src/project-{i}"),
            json!({"allowedTools": [], "history": history, "mcpServers": local,
                   "hasTrustDialogAccepted": true}),
        );
    }
    serde_json::to_string_pretty(&json!({"numStartups": 5, "mcpServers": servers, "projects": all}))
        .unwrap()
}

fn mcp_json(entries: usize) -> String {
    let servers: Map<String, Value> = (0..entries)
        .map(|i| (format!("s{i}"), json!({"command": "x", "args": ["a"]})))
        .collect();
    serde_json::to_string(&json!({"mcpServers": servers})).unwrap()
}

fn bench_against(c: &mut Criterion) {
    let entries = kcap_mcp_registry::ops::list::compiled_entries();
    let dir = tempfile::tempdir().unwrap();
    let opts = AgainstOptions::default();
    let run = |path: &Path| check_against(&entries, "kcap", path, &opts).unwrap();
    let mut group = c.benchmark_group("check_against");
    group.sample_size(10);

    let path = dir.path().join(".claude.json");
    let text = claude_json(300);
    assert!(text.len() > 3_000_000, "{}", text.len());
    std::fs::write(&path, &text).unwrap();
    // The user scope, then each of the 300 projects.
    let checked = run(&path);
    assert_eq!(checked.len(), 301);
    group.bench_function("claude_json_300_projects", |b| {
        b.iter(|| black_box(run(black_box(&path))))
    });

    for n in [10_000, 20_000, 40_000] {
        let path = dir.path().join(format!("{n}.mcp.json"));
        std::fs::write(&path, mcp_json(n)).unwrap();
        let checked = run(&path);
        let extra = checked[0]
            .drift
            .iter()
            .filter(|d| {
                matches!(
                    d.kind,
                    kcap_mcp_registry::ops::check::DriftKind::Extra { .. }
                )
            })
            .count();
        assert_eq!(extra, n);
        group.bench_with_input(BenchmarkId::new("mcp_servers", n), &path, |b, path| {
            b.iter(|| black_box(run(black_box(path))))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_against);
criterion_main!(benches);
