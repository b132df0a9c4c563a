//! The whole per-launch preflight and plan of every client, as a daemon runs it:
//! `cargo bench --bench preflight`.
//!
//! - `preflight/<client>`: [`Client::plan`] with [`PlanInputs`] (lenient policy,
//!   `system_root` `/`, a launch id drawn from the OS for the clients that alias names,
//!   Cursor's unverified isolation accepted): the allowlist resolved, the client's
//!   administrator files looked for under `/` (and, for Gemini CLI, a `.env` in each parent
//!   of the worktree), the plan rendered. The allowlist names every allowlistable server that
//!   cannot start flows; the worktree and launch directory are real directories of a temp
//!   dir; Antigravity's result delivery is brokered (it refuses direct delivery).
//! - `previous/claude_file_preflight`: what the previous design ran before a Claude Code
//!   launch: `claude::preflight::claude_preflight` reading the Claude Code configuration of a
//!   throwaway home (a `~/.claude.json` of 50 projects, each with a server, a
//!   `settings.json`) and of the worktree for the settings that would veto a server.
//!
//! The listings the previous design ran for Codex and Copilot CLI (`<client> mcp list
//! --json`) are processes, timed beside this by `scripts/bench-preflight.sh` with hyperfine
//! in the same run (BENCHMARKS.md, "Launch preflight"). Every result is checked before
//! anything is timed.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::preflight::{
    ClaudeConfigSources, MANAGED_DIR, claude_preflight,
};
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::dispatch::UnverifiedIsolation;
use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery, servers};

fn context(dir: &Path, client: Client) -> LaunchContext {
    let allowlist = servers()
        .iter()
        .filter(|s| s.allowlistable && !s.starts_flows)
        .map(|s| Some(s.id.to_string()))
        .collect();
    let result_delivery = if client == Client::Antigravity {
        ResultDelivery::from_capability_url(Some(
            "http://127.0.0.1:5100/cap/9f86d081884c7d65".into(),
        ))
    } else {
        ResultDelivery::Direct
    };
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/usr/local/bin/kcap".into()),
        agent_id: "rev-7f3c2a91".into(),
        mcp_allowlist: Some(allowlist),
        prompt: Some("Review the pull request. ".repeat(40)),
        worktree: Some(dir.join("worktree").display().to_string()),
        launch_dir: Some(dir.join("launch").display().to_string()),
        result_delivery,
        ..LaunchContext::default()
    }
}

/// A Claude Code home with a `~/.claude.json` of 50 projects (one of them the worktree),
/// each with a local server, and a user `settings.json`.
fn claude_home(home: &Path, worktree: &Path) {
    let mut projects = serde_json::Map::new();
    for i in 0..50 {
        let path = if i == 0 {
            worktree.display().to_string()
        } else {
            format!("/home/dev/src/project-{i}")
        };
        projects.insert(
            path,
            serde_json::json!({
                "mcpServers": {format!("local-{i}"): {"command": "npx", "args": ["-y", "@example/mcp"]}},
                "enabledMcpjsonServers": [],
                "disabledMcpjsonServers": [],
                "hasTrustDialogAccepted": true,
            }),
        );
    }
    let global = serde_json::json!({
        "mcpServers": {"github": {"command": "npx", "args": ["-y", "@example/github-mcp"]}},
        "projects": projects,
    });
    std::fs::write(home.join(".claude.json"), global.to_string()).expect("write");
    std::fs::create_dir_all(home.join(".claude")).expect("mkdir");
    std::fs::write(
        home.join(".claude/settings.json"),
        r#"{"permissions":{"allow":["Bash(git status)"]},"env":{"FOO":"1"}}"#,
    )
    .expect("write");
}

fn bench_preflight(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path().canonicalize().expect("canonical");
    for d in ["worktree", "launch", "home"] {
        std::fs::create_dir_all(dir.join(d)).expect("mkdir");
    }
    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.unverified_isolation = UnverifiedIsolation::Allow;
    assert_eq!(inputs.system_root, Path::new("/"));
    let allowlisted = servers()
        .iter()
        .filter(|s| s.allowlistable && !s.starts_flows)
        .count();
    let contexts: Vec<(Client, LaunchContext)> = Client::ALL
        .into_iter()
        .map(|client| (client, context(&dir, client)))
        .collect();
    for (client, ctx) in &contexts {
        let launch = client
            .plan(ctx, &inputs)
            .unwrap_or_else(|e| panic!("{client}: {e}"));
        assert_eq!(launch.plan.client, *client);
        assert_eq!(launch.plan.servers.len(), 1 + allowlisted, "{client}");
    }

    let mut group = c.benchmark_group("preflight");
    for (client, ctx) in &contexts {
        group.bench_with_input(BenchmarkId::from_parameter(client.name()), ctx, |b, ctx| {
            b.iter(|| client.plan(black_box(ctx), black_box(&inputs)))
        });
    }
    group.finish();

    let worktree = dir.join("worktree");
    claude_home(&dir.join("home"), &worktree);
    let sources = ClaudeConfigSources {
        home: Some(dir.join("home")),
        config_dir: None,
        custom_oauth: false,
        managed_dir: MANAGED_DIR.into(),
        worktree: worktree.clone(),
        vars: [("HOME".to_string(), dir.join("home").display().to_string())].into(),
    };
    let ctx = context(&dir, Client::Claude);
    let resolution = ctx.resolve(Policy::Lenient).expect("resolves");
    let vetoes = claude_preflight(&ctx, &resolution, &sources).expect("reads");
    assert_eq!(vetoes.len(), 0);
    let mut group = c.benchmark_group("previous");
    group.bench_function("claude_file_preflight", |b| {
        b.iter(|| claude_preflight(black_box(&ctx), black_box(&resolution), black_box(&sources)))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // Modest: the machine is a shared 2-core VM (BENCHMARKS.md); 9 benchmarks × 3 s.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench_preflight
}
criterion_main!(benches);
