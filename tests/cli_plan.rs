//! `render <client> --format plan`: the CLI prints the library's plan, and `--launch-id` is
//! checked.
#![cfg(feature = "cli")]

mod common;

use common::run;
use kcap_mcp_registry::clients::plan::LaunchPlan;

const COMMON: [&str; 10] = [
    "--server-url",
    "http://127.0.0.1:5100",
    "--kcap-bin",
    "/opt/kcap/bin/kcap",
    "--agent-id",
    "agent-7",
    "--worktree",
    "/work/tree",
    "--allowlist",
    "kcap-review,kcap-sessions",
];

fn golden(name: &str) -> String {
    std::fs::read_to_string(format!("tests/fixtures/plans/{name}.json")).unwrap()
}

#[test]
fn render_prints_the_golden_plans() {
    let extra: [(&str, &[&str]); 4] = [
        ("claude", &["--no-preflight"]),
        ("codex", &["--no-inherited-servers"]),
        ("gemini", &["--launch-id", "0123456789ABCDEF"]),
        ("opencode", &["--launch-dir", "/run/kcap/launch-1"]),
    ];
    for (client, extra) in extra {
        let mut args = vec!["render", client];
        args.extend(COMMON);
        args.extend(extra);
        args.extend([
            "--strict",
            "--model",
            "sonnet",
            "--effort",
            "high",
            "--prompt",
            "Review PR 42",
            "--format",
            "plan",
        ]);
        let r = run(&args);
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{client}");
        assert_eq!(r.stdout, golden(&format!("{client}-strict")), "{client}");
        let plan: LaunchPlan = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(plan.client, client);
    }
}

#[test]
fn a_random_launch_id_differs_per_run() {
    let mut args = vec!["render", "gemini"];
    args.extend(COMMON);
    args.extend(["--format", "json"]);
    let (a, b) = (run(&args), run(&args));
    assert_eq!((a.code, b.code), (0, 0));
    assert_ne!(a.stdout, b.stdout);
    let argv: Vec<String> = serde_json::from_str(&a.stdout).unwrap();
    let names = &argv[argv
        .iter()
        .position(|a| a == "--allowed-mcp-server-names")
        .unwrap()
        + 1];
    let suffix = names
        .strip_prefix("kcap-flow-result-")
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert_eq!(suffix.len(), 16);
}

#[test]
fn a_bad_launch_id_is_a_usage_error() {
    let mut args = vec!["render", "gemini"];
    args.extend(COMMON);
    args.extend(["--launch-id", "xyz"]);
    let r = run(&args);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            2,
            "",
            "error: --launch-id: launch id \"xyz\" is not 16 hex digits; give e.g. \
             0123456789abcdef\n"
        )
    );
}
