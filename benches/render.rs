//! Allowlist resolution and reviewer rendering on the bundled registry.
//!
//! - `resolve_allowlist/{3,7,100}` against `naive_baseline`, the resolution a daemon would
//!   write without this crate: `trim().to_lowercase()` into a `HashMap<String, _>`, and a
//!   `Vec` of servers with a linear duplicate check (allocates per entry).
//! - `claude_mcp_config/full_registry` against `serde_json_value_baseline`, the same config
//!   built as a `serde_json::Value` with `json!` and serialized (same content, key order of a
//!   `BTreeMap`).
//! - `codex_mcp_overrides/full_registry`; there is no ready-made alternative to compare with.
//! - `reviewer_plan/{claude,codex}`: the whole launch plan through the public call,
//!   `Client::plan` (resolution and the plan's checks included; a fixed launch id).
//!
//! "Full registry" is an allowlist naming every allowlistable server that cannot start flows,
//! so the config holds every server a reviewer can ever get, plus the result channel. Every
//! input's result is checked before anything is timed.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::claude_mcp_config;
use kcap_mcp_registry::clients::codex::codex_mcp_overrides;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::plan::LaunchId;
use kcap_mcp_registry::{
    EnvSource, LaunchContext, McpServer, Policy, resolve_allowlist, result_channel, servers,
};
use serde_json::{Value, json};

/// An allowlist of `n` entries as a flow config would hold it: the servers a reviewer may
/// use, in mixed case and padded, then a flow-starting one (stripped), duplicates, the
/// result channel (a no-op), an unknown name and a `null`, cycling.
fn allowlist(n: usize) -> Vec<Option<String>> {
    let usable: Vec<&str> = usable().map(|s| s.id).collect();
    let flows = servers()
        .iter()
        .find(|s| s.starts_flows)
        .map_or("kcap-flows", |s| s.id);
    let mut pool: Vec<Option<String>> = Vec::new();
    for (i, id) in usable.iter().enumerate() {
        pool.push(Some(match i % 3 {
            0 => (*id).to_string(),
            1 => format!(" {} ", id.to_ascii_uppercase()),
            _ => format!("{}\t", capitalize(id)),
        }));
    }
    pool.push(Some(flows.to_string()));
    pool.push(Some(usable[0].to_ascii_uppercase()));
    pool.push(Some(result_channel().id.to_string()));
    pool.push(Some("kcap-unknown".to_string()));
    pool.push(None);
    pool.into_iter().cycle().take(n).collect()
}

fn capitalize(id: &str) -> String {
    let mut c = id.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// Every server an allowlist can materialize.
fn usable() -> impl Iterator<Item = &'static McpServer> {
    servers()
        .iter()
        .filter(|s| s.allowlistable && !s.starts_flows)
}

fn context() -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/usr/local/bin/kcap".into()),
        agent_id: "rev-7f3c2a91".into(),
        mcp_allowlist: Some(usable().map(|s| Some(s.id.to_string())).collect()),
        model: Some("claude-sonnet-4-5".into()),
        effort: Some("high".into()),
        prompt: Some("Review the pull request. ".repeat(40)),
        worktree: Some("/home/dev/.kcap/worktrees/pr-1234".into()),
        launch_dir: Some("/run/kcap/launch-1".into()),
        ..LaunchContext::default()
    }
}

/// The resolution a daemon would write without this crate.
fn naive_resolve(
    map: &HashMap<String, &'static McpServer>,
    entries: &[Option<String>],
) -> Vec<&'static McpServer> {
    let mut out: Vec<&'static McpServer> = Vec::new();
    for entry in entries.iter().flatten() {
        let Some(&server) = map.get(&entry.trim().to_lowercase()) else {
            continue;
        };
        if server.starts_flows || !server.allowlistable || out.iter().any(|s| s.id == server.id) {
            continue;
        }
        out.push(server);
    }
    out
}

/// `claude_mcp_config` built as a `serde_json::Value`.
fn json_value_config(ctx: &LaunchContext, resolved: &[&'static McpServer]) -> String {
    let command = ctx.kcap_bin.as_deref().unwrap_or_default();
    let url = ctx.server_url.as_deref().unwrap_or_default();
    let mut servers = serde_json::Map::new();
    for s in std::iter::once(result_channel()).chain(resolved.iter().copied()) {
        let env: BTreeMap<&str, &str> = s
            .env
            .iter()
            .filter_map(|&(name, source)| {
                let value = match source {
                    EnvSource::ServerUrl => url,
                    EnvSource::AgentId => ctx.agent_id.as_str(),
                    EnvSource::Constant(value) => value,
                    // Direct delivery, own snapshot: neither is set.
                    EnvSource::ResultCapabilityUrl | EnvSource::ReviewContextUrl => return None,
                };
                Some((name, value))
            })
            .collect();
        servers.insert(
            s.id.to_string(),
            json!({ "command": command, "args": s.args, "env": env }),
        );
    }
    json!({ "mcpServers": servers }).to_string()
}

fn bench_resolve(c: &mut Criterion) {
    let map: HashMap<String, &'static McpServer> =
        servers().iter().map(|s| (s.id.to_string(), s)).collect();
    let mut group = c.benchmark_group("resolve_allowlist");
    for n in [3, 7, 100] {
        let list = allowlist(n);
        let ours: Vec<&str> = resolve_allowlist(&list, Policy::Lenient)
            .expect("lenient never rejects")
            .servers()
            .map(|s| s.id)
            .collect();
        let naive: Vec<&str> = naive_resolve(&map, &list).iter().map(|s| s.id).collect();
        assert_eq!(ours, naive, "allowlist {list:?}");
        assert!(!ours.is_empty());
        group.bench_with_input(BenchmarkId::new("resolve_allowlist", n), &list, |b, l| {
            b.iter(|| resolve_allowlist(black_box(l), Policy::Lenient))
        });
        group.bench_with_input(BenchmarkId::new("naive_baseline", n), &list, |b, l| {
            b.iter(|| naive_resolve(&map, black_box(l)))
        });
    }
    group.finish();
}

fn bench_render(c: &mut Criterion) {
    let ctx = context();
    let resolution = ctx.resolve(Policy::Lenient).expect("lenient never rejects");
    let resolved: Vec<&'static McpServer> = resolution.servers().collect();
    assert_eq!(resolved.len(), usable().count(), "every usable server");

    let ours = claude_mcp_config(&ctx, &resolution).expect("renders");
    let theirs = json_value_config(&ctx, &resolved);
    assert_eq!(
        serde_json::from_str::<Value>(&ours).unwrap(),
        serde_json::from_str::<Value>(&theirs).unwrap()
    );
    println!(
        "claude_mcp_config: {} servers, {} bytes",
        resolved.len() + 1,
        ours.len()
    );
    let mut group = c.benchmark_group("claude_mcp_config");
    group.bench_function("full_registry", |b| {
        b.iter(|| claude_mcp_config(black_box(&ctx), black_box(&resolution)))
    });
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| json_value_config(black_box(&ctx), black_box(&resolved)))
    });
    group.finish();

    let overrides = codex_mcp_overrides(&ctx, &resolution).expect("renders");
    let per_server = 4 * (resolved.len() + 1);
    assert!(overrides.len() > per_server, "{overrides:?}");
    let mut group = c.benchmark_group("codex_mcp_overrides");
    group.bench_function("full_registry", |b| {
        b.iter(|| codex_mcp_overrides(black_box(&ctx), black_box(&resolution)))
    });
    group.finish();

    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.launch_id = Some(LaunchId::from_hex("0123456789abcdef").expect("16 hex digits"));
    let plan = |client: Client, ctx: &LaunchContext| client.plan(ctx, &inputs).expect("plans").plan;
    let claude = plan(Client::Claude, &ctx);
    let config = claude.files.iter().find(|f| f.path == "mcp-config.json");
    assert_eq!(
        config.map(|f| &f.contents),
        Some(&ours),
        "the plan carries the config"
    );
    let codex = plan(Client::Codex, &ctx);
    let prompt = ctx.prompt.as_deref().expect("a prompt");
    assert!(
        codex.argv.last().is_some_and(|p| p.starts_with(prompt)),
        "{codex:?}"
    );
    let mut group = c.benchmark_group("reviewer_plan");
    group.bench_function("claude", |b| {
        b.iter(|| plan(Client::Claude, black_box(&ctx)))
    });
    group.bench_function("codex", |b| b.iter(|| plan(Client::Codex, black_box(&ctx))));
    group.finish();
}

criterion_group! {
    name = benches;
    // 13 benchmarks × (1 s warm-up + 2 s measurement), under a minute in all.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = bench_resolve, bench_render
}
criterion_main!(benches);
