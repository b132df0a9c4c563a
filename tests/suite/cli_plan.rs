//! `render <client> --format plan`: the CLI prints the library's plan, and `--launch-id` is
//! checked.
#![cfg(feature = "cli")]

use crate::common;

use common::run;
use kcap_mcp_registry::clients::plan::LaunchPlan;

const COMMON: [&str; 12] = [
    "--launch-dir",
    "/run/kcap/launch-1",
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

/// What `render cursor` prints on stderr whenever it renders.
const UNVERIFIED_WARNING: &str = "warning: agent \"agent-7\": the cursor launch's isolation is \
    not verified: whether Cursor starts the MCP servers of the user's ~/.cursor/mcp.json (which \
    registration fills, kcap-flows included) beside the injected ones was never established \
    (facts [K] only; Cursor is not installable here)\n";

/// What `render <client>` prints on stderr whenever it renders a facts-only client's plan
/// (its isolation unverified, the opt-in given): the room's reason.
fn unverified_warning(client: &str) -> String {
    use kcap_mcp_registry::clients::{antigravity, cursor, kiro};
    let reason = match client {
        "cursor" => cursor::ISOLATION_REASON,
        "kiro" => kiro::ISOLATION_REASON,
        "antigravity" => antigravity::ISOLATION_REASON,
        _ => return String::new(),
    };
    format!(
        "warning: agent \"agent-7\": the {client} launch's isolation is not verified: {reason}\n"
    )
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(format!("tests/fixtures/plans/{name}.json")).unwrap()
}

#[test]
fn render_prints_the_golden_plans() {
    let extra: [(&str, &[&str]); 7] = [
        ("claude", &[]),
        ("codex", &[]),
        ("gemini", &["--launch-id", "0123456789ABCDEF"]),
        ("opencode", &[]),
        ("cursor", &["--allow-unverified-isolation"]),
        (
            "kiro",
            &[
                "--launch-id",
                "0123456789abcdef",
                "--allow-unverified-isolation",
            ],
        ),
        (
            "antigravity",
            &[
                "--result-capability-url",
                "http://127.0.0.1:41234/c4p4b1l1ty",
                "--allow-unverified-isolation",
            ],
        ),
    ];
    for (client, extra) in extra {
        let mut args = vec!["render", client];
        args.extend(COMMON);
        args.extend(extra);
        // The strict policy refuses a model or effort the client has no setting for, so each
        // client gets those it carries (the golden plans are the same without the others).
        args.extend(match client {
            "claude" | "codex" => &["--model", "sonnet", "--effort", "high"][..],
            "gemini" | "opencode" | "copilot" => &["--model", "sonnet"],
            _ => &[],
        });
        args.extend(["--strict", "--prompt", "Review PR 42", "--format", "plan"]);
        let r = run(&args);
        if client == "cursor" {
            // Cursor runs every built-in tool unasked (`--force`) and cannot hide one: the
            // strict policy refuses it (`clients::tools`).
            assert_eq!(r.code, 1, "{}", r.stderr);
            assert!(
                r.stderr.contains(
                    "error: the strict policy refuses the cursor launch: cursor runs its \
                     built-in tools * unasked"
                ),
                "{}",
                r.stderr
            );
            continue;
        }
        let stderr = unverified_warning(client);
        assert_eq!(
            (r.code, r.stderr.as_str()),
            (0, stderr.as_str()),
            "{client}"
        );
        // OpenCode's server password is fresh per launch (32 hex digits); the golden plan
        // holds a fixed one (`common::plan`).
        let mut plan: LaunchPlan = serde_json::from_str(&r.stdout).unwrap();
        if client == "opencode" {
            let password = plan
                .env
                .iter_mut()
                .find(|v| v.name == "OPENCODE_SERVER_PASSWORD")
                .expect("a server password");
            assert!(
                password.value.len() == 32 && password.value.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}",
                password.value
            );
            password.value = "07".repeat(16);
        }
        let shown = if client == "opencode" {
            plan.to_json()
        } else {
            r.stdout.clone()
        };
        assert_eq!(shown, golden(&format!("{client}-strict")), "{client}");
        assert_eq!(plan.client.name(), client);
    }
}

#[test]
fn a_random_launch_id_differs_per_run() {
    for (client, flag, prefix) in [
        ("gemini", "--allowed-mcp-server-names", "kcap-flow-result-"),
        (
            "kiro",
            "--trust-tools",
            "fs_read,thinking,@kcap-flow-result-",
        ),
    ] {
        let mut args = vec!["render", client];
        args.extend(COMMON);
        args.extend(["--format", "json"]);
        if client == "kiro" {
            args.push("--allow-unverified-isolation");
        }
        let (a, b) = (run(&args), run(&args));
        assert_eq!((a.code, b.code), (0, 0), "{client}");
        assert_ne!(a.stdout, b.stdout, "{client}");
        let argv: Vec<String> = serde_json::from_str(&a.stdout).unwrap();
        let names = &argv[argv.iter().position(|a| a == flag).unwrap() + 1];
        let suffix = names
            .strip_prefix(prefix)
            .unwrap()
            .split([',', '/'])
            .next()
            .unwrap();
        assert_eq!(suffix.len(), 16, "{client}");
        assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()), "{client}");
    }
}

#[test]
fn a_model_or_effort_the_client_cannot_carry_is_refused_or_warned() {
    let mut args = vec!["render", "opencode", "--model", "m1", "--effort", "high"];
    args.extend(COMMON);
    let r = run(&[&args[..], &["--strict"]].concat());
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            1,
            "",
            "error: the opencode launch has no setting for the reviewer's `effort`, so it would \
             be dropped; leave it out for opencode, or use the lenient policy to launch without \
             it\n"
        )
    );
    let r = run(&[&args[..], &["--format", "json"]].concat());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "warning: agent \"agent-7\": the opencode launch has no setting for the reviewer's \
         `effort`; launched without it\n"
    );
}

#[test]
fn cursor_needs_the_opt_in_under_either_policy_and_then_warns() {
    for policy in [&["--strict"][..], &[]] {
        let mut args = vec!["render", "cursor"];
        args.extend(COMMON);
        args.extend(policy);
        let r = run(&args);
        assert_eq!(
            (r.code, r.stdout.as_str(), r.stderr.as_str()),
            (
                1,
                "",
                "error: cannot render the cursor launch: its isolation from the MCP servers the \
                 user or the reviewed repository configured is not verified, so one of them (a \
                 flow-starting one included) could start beside kcap's; opt in explicitly \
                 (`LaunchRequest::allow_unverified_isolation`, or \
                 `PlanInputs::unverified_isolation = UnverifiedIsolation::Allow`; \
                 --allow-unverified-isolation)\n"
            ),
            "{policy:?}"
        );
    }
    let mut args = vec!["render", "cursor", "--allow-unverified-isolation"];
    args.extend(COMMON);
    args.extend(["--format", "json"]);
    let r = run(&args);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            0,
            "[\"acp\",\"--force\",\"--approve-mcps\",\"--trust\"]\n",
            UNVERIFIED_WARNING
        )
    );
}

/// `render copilot` takes no inventory (the per-launch `COPILOT_HOME` configures nothing
/// but our servers): it prints the golden plan, and the inventory flags are gone.
#[test]
fn render_copilot_needs_no_inventory() {
    let mut args = vec!["render", "copilot"];
    args.extend(COMMON);
    let with = |extra: &[&str]| {
        let mut a = args.clone();
        a.extend(extra);
        a.extend(["--strict", "--model", "sonnet", "--format", "plan"]);
        run(&a)
    };
    let r = with(&[]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout, golden("copilot-strict"));
    assert!(!r.stdout.contains("--disable-mcp-server"));
    for gone in [
        "--no-inherited-servers",
        "--inventory=-",
        "--copilot-bin=copilot",
    ] {
        let r = with(&[gone]);
        assert_eq!(r.code, 2, "{gone}: {}", r.stderr);
    }
}

#[test]
fn antigravity_without_a_capability_url_is_refused() {
    let mut args = vec!["render", "antigravity", "--allow-unverified-isolation"];
    args.extend(COMMON);
    let r = run(&args);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            1,
            "",
            "error: cannot render the antigravity launch: it runs with a HOME of its own, so the \
             result channel needs brokered delivery; give the launch its capability URL \
             (`result_capability_url` in the launch command; --result-capability-url URL)\n"
        )
    );
}

#[test]
fn a_bad_launch_id_is_a_usage_error() {
    for client in ["gemini", "kiro"] {
        let mut args = vec!["render", client];
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
            ),
            "{client}"
        );
    }
}
