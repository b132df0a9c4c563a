//! `diff` of two registries of 10,000 and 20,000 entries, each with two env vars and three
//! tools: every 10th entry's description changed, every 100th entry's first tool made
//! `unattended_safe`, every 50th removed and as many added. The result is checked before
//! anything is timed.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kcap_mcp_registry::EnvSource;
use kcap_mcp_registry::ops::diff::diff;
use kcap_mcp_registry::schema::{RegistryEntry, ToolEntry};

fn entry(i: usize) -> RegistryEntry {
    RegistryEntry {
        id: format!("kcap-gen-{i:06}"),
        description: format!("Generated server {i}."),
        args: vec!["mcp".into(), format!("gen-{i}")],
        starts_flows: false,
        allowlistable: true,
        inject: None,
        registered: true,
        read_only: false,
        needs_project_cwd: i % 2 == 0,
        driver_stamp: false,
        alias: None,
        env: vec![
            ("KCAP_URL".into(), EnvSource::ServerUrl),
            ("KCAP_MODE".into(), EnvSource::ServerUrl),
        ],
        tools: (0..3)
            .map(|t| ToolEntry {
                name: format!("tool_{t}"),
                unattended_safe: false,
            })
            .collect(),
    }
}

/// (old, new) registries of `n` entries each, sorted by id.
fn registries(n: usize) -> (Vec<RegistryEntry>, Vec<RegistryEntry>) {
    let old: Vec<RegistryEntry> = (0..n).map(entry).collect();
    let mut new: Vec<RegistryEntry> = (0..n)
        .filter(|i| i % 50 != 0)
        .map(|i| {
            let mut e = entry(i);
            if i % 10 == 1 {
                e.description.push_str(" Changed.");
            }
            if i % 100 == 1 {
                e.tools[0].unattended_safe = true;
            }
            e
        })
        .collect();
    new.extend((n..n + n / 50).map(entry));
    (old, new)
}

fn bench_diff(c: &mut Criterion) {
    let mut group = c.benchmark_group("diff");
    group.sample_size(20);
    for n in [10_000, 20_000] {
        let (old, new) = registries(n);
        let d = diff(&old, &new);
        assert_eq!(d.removed.len(), n / 50);
        assert_eq!(d.added.len(), n / 50);
        assert_eq!(d.security().count(), n / 100);
        assert_eq!(d.changes.len(), n / 10 + n / 100);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| diff(black_box(&old), black_box(&new)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_diff);
criterion_main!(benches);
