//! Every credential from the command line: `--credential-file NAME=PATH` reaches the plan
//! reduced by the client's room (Codex's `auth.json` to its key), a file that cannot be read
//! is named with the OS's reason, every refusal names what the client does accept (files
//! included), and each client's `--help` lists its credentials from its room's spec.
#![cfg(feature = "cli")]

use crate::common;

use common::{Run, bin, finish, run};
use kcap_mcp_registry::Client;
use tempfile::TempDir;

/// `render codex` of a gated launch (no server) into `/run/kcap/l1`, then `args`.
fn render_codex(args: &[&str]) -> Run {
    let mut all = vec![
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--launch-dir",
        "/run/kcap/l1",
    ];
    all.extend(args);
    run(&all)
}

const GATED: &str = "warning: agent \"a1\": no kcap server URL or no kcap binary (--server-url, \
                     --kcap-bin; `LaunchRequest::server`), so every MCP server (the result \
                     channel and any allowlist) is gated off\n";

#[test]
fn a_codex_auth_json_reaches_the_plan_holding_only_its_key() {
    let tmp = TempDir::new().unwrap();
    let auth = tmp.path().join("auth.json");
    std::fs::write(
        &auth,
        r#"{"OPENAI_API_KEY":"sk-dummy-0123","tokens":{"id_token":"x"},"last_refresh":"t"}"#,
    )
    .unwrap();
    let arg = format!("auth.json={}", auth.display());
    let r = render_codex(&["--credential-file", &arg, "--format", "plan"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, GATED), "{r:?}");
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let auth: Vec<&serde_json::Value> = (plan["files"].as_array().unwrap().iter())
        .filter(|f| f["path"] == "home/.codex/auth.json")
        .collect();
    assert_eq!(
        auth,
        [&serde_json::json!({
            "path": "home/.codex/auth.json",
            "contents": r#"{"OPENAI_API_KEY":"sk-dummy-0123"}"#,
            "mode": 0o600
        })]
    );
    // The key is in that file only: not in the client's environment, nor anywhere else.
    assert_eq!(r.stdout.matches("sk-dummy-0123").count(), 1, "{}", r.stdout);
    assert!(!r.stdout.contains("id_token") && !r.stdout.contains("last_refresh"));
}

#[test]
fn a_credential_file_the_room_cannot_reduce_is_refused_naming_it() {
    let tmp = TempDir::new().unwrap();
    let auth = tmp.path().join("auth.json");
    std::fs::write(&auth, r#"{"tokens":{"id_token":"x"}}"#).unwrap();
    let r = render_codex(&[
        "--credential-file",
        &format!("auth.json={}", auth.display()),
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.ends_with(
            "error: cannot render the codex launch: credential file `auth.json` holds a ChatGPT \
             sign-in (`tokens`) and no `OPENAI_API_KEY`; a reviewer takes an API key only: a \
             ChatGPT sign-in makes Codex fetch the workspace's cloud configuration, MCP servers \
             and hooks included; hand over the file as codex stored it\n"
        ),
        "{r:?}"
    );
}

/// Codex's key is a file: a refused `--credential OPENAI_API_KEY` says so, and a refused
/// file names the variables too.
#[test]
fn every_credential_refusal_names_what_the_client_accepts_files_included() {
    let r = finish(bin().env("OPENAI_API_KEY", "sk-dummy").args([
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--launch-dir",
        "/run/kcap/l1",
        "--credential",
        "OPENAI_API_KEY",
    ]));
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stderr,
        "error: cannot render the codex launch: `OPENAI_API_KEY` is not a credential or \
         provider variable codex accepts, or is given twice; codex accepts the variable \
         OPENAI_BASE_URL (`LaunchRequest::credential_env`; --credential NAME) and the file \
         auth.json, only its `OPENAI_API_KEY` kept (`LaunchRequest::credential_file`; \
         --credential-file NAME=PATH), each at most once\n"
    );

    let r = run(&[
        "render",
        "claude",
        "--agent-id",
        "a1",
        "--launch-dir",
        "/run/kcap/l1",
        "--credential-file",
        "auth.json=Cargo.toml",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.ends_with(
            "error: cannot render the claude launch: `auth.json` is not a credential file claude \
             accepts, or is given twice; claude accepts the variables ANTHROPIC_API_KEY, \
             ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_BASE_URL, IS_SANDBOX \
             (`LaunchRequest::credential_env`; --credential NAME) and the file \
             .credentials.json, only its claude.ai OAuth access token (`claudeAiOauth`, not the \
             refresh token) kept (`LaunchRequest::credential_file`; --credential-file NAME=PATH), \
             each at most once\n"
        ),
        "{r:?}"
    );
}

#[test]
fn a_credential_file_that_cannot_be_read_is_named_with_the_reason() {
    let tmp = TempDir::new().unwrap();
    let missing = tmp.path().join("missing.json");
    let r = render_codex(&[
        "--credential-file",
        &format!("auth.json={}", missing.display()),
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "error: --credential-file auth.json: cannot read {}: No such file or directory (os \
             error 2)\n",
            missing.display()
        )
    );

    // Bounded: a device that never ends, or a huge file, is not read whole.
    let r = render_codex(&["--credential-file", "auth.json=/dev/zero"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr,
        "error: --credential-file auth.json: /dev/zero is larger than 64 KiB, more than any \
         client's credential file; give the file the client itself stored\n"
    );

    let r = render_codex(&["--credential-file", "auth.json"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.starts_with(
            "error: invalid value 'auth.json' for '--credential-file <NAME=PATH>': expected \
             NAME=PATH"
        ),
        "{r:?}"
    );
}

/// Each client's `render <client> --help` and `launch <client> --help` list exactly the
/// variables and files of its room's spec.
#[test]
fn each_clients_help_lists_its_credentials() {
    let help = common::stdout_of(&["launch", "codex", "--help"]);
    assert!(
        help.contains(
            "\n\nCredentials Codex CLI accepts, each at most once (any other is refused):\n  \
             --credential OPENAI_BASE_URL\n  --credential-file auth.json=PATH  keeps only its \
             `OPENAI_API_KEY`\n\n"
        ),
        "{help}"
    );
    for client in Client::ALL {
        let spec = client.spec();
        for cmd in ["render", "launch"] {
            let help = common::stdout_of(&[cmd, spec.name, "--help"]);
            let listed: Vec<&str> = help
                .lines()
                .filter_map(|l| l.strip_prefix("  --credential"))
                .collect();
            let expected: Vec<String> = (spec.credentials.env.iter())
                .map(|v| format!(" {v}"))
                .chain(
                    (spec.credentials.files.iter())
                        .map(|f| format!("-file {}=PATH  keeps only {}", f.name, f.kept)),
                )
                .collect();
            assert_eq!(listed, expected, "{cmd} {} --help", spec.name);
            if expected.is_empty() {
                assert!(help.contains(&format!(
                    "\n\nCredentials: {} takes none (--credential and --credential-file are \
                     refused).\n",
                    spec.display_name
                )));
            }
        }
    }
}

/// `launch --dry-run` prints the plan to read, not to carry out: no credential's value, nor
/// any run of 16 of its characters. Claude Code's key as a variable (open network; its
/// `.claude.json` holds the key's last 20 characters), the same key behind the door (the
/// door's header; the client holds the token) and Codex CLI's `auth.json` each show as
/// `(not shown)`, while the base URL (not a secret: the room's door says so) shows as it is;
/// `render --format plan` of the same launch holds each value. The bite, run once each: the
/// dry run printing `plan.to_json()` showed the key in all three cases; with the variables,
/// files and door headers hidden but no run looked for elsewhere, the key's last 20
/// characters showed in Claude Code's `.claude.json`.
#[test]
fn a_dry_run_shows_no_credentials_value() {
    const KEY: &str = "sk-ant-dummy-dry-run-4242";
    const FILE_KEY: &str = "sk-dummy-dry-run-auth-77";
    let tmp = TempDir::new().unwrap();
    let auth = tmp.path().join("auth.json");
    std::fs::write(&auth, format!(r#"{{"OPENAI_API_KEY":"{FILE_KEY}"}}"#)).unwrap();
    let launch_dir = tmp.path().join("l1");
    let launch_dir = launch_dir.to_str().unwrap();
    let auth = format!("auth.json={}", auth.display());
    let cases: [(&str, &[&str], &str); 3] = [
        (
            "claude",
            &[
                "--credential",
                "ANTHROPIC_API_KEY",
                "--credential",
                "ANTHROPIC_BASE_URL",
            ],
            KEY,
        ),
        (
            "claude",
            &[
                "--door",
                "--credential",
                "ANTHROPIC_API_KEY",
                "--credential",
                "ANTHROPIC_BASE_URL",
            ],
            KEY,
        ),
        ("codex", &["--credential-file", &auth], FILE_KEY),
    ];
    for (client, credentials, secret) in cases {
        let with = |cmd: &str, last: &[&str]| {
            let mut args = vec![cmd, client, "--agent-id", "a1", "--launch-dir", launch_dir];
            args.extend(credentials);
            args.extend(last);
            finish(
                bin()
                    .env("ANTHROPIC_API_KEY", KEY)
                    .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000")
                    .args(args),
            )
        };
        let plan = with("render", &["--format", "plan"]);
        assert_eq!(plan.code, 0, "{plan:?}");
        assert!(
            plan.stdout.contains(secret),
            "{client} {credentials:?}: {plan:?}"
        );
        let dry = with("launch", &["--client-bin", "/bin/true", "--dry-run"]);
        assert_eq!(dry.code, 0, "{dry:?}");
        // Nor any run of 16 of its characters: Claude Code's `.claude.json` holds a key's
        // last 20.
        for run in secret.as_bytes().windows(16) {
            let run = std::str::from_utf8(run).unwrap();
            assert!(
                !dry.stdout.contains(run) && !dry.stderr.contains(run),
                "{client} {credentials:?}: {run} in {dry:?}"
            );
        }
        assert!(dry.stdout.contains("\"(not shown)\""), "{dry:?}");
        assert!(
            dry.stdout.contains("\n1. check the plan (version "),
            "{dry:?}"
        );
        if client == "claude" {
            let base_url = if credentials.contains(&"--door") {
                "\"value\": \"http://127.0.0.1:41001\""
            } else {
                "\"value\": \"http://127.0.0.1:4000\""
            };
            assert!(dry.stdout.contains(base_url), "{dry:?}");
        }
    }
    // A key that is also a word of the plan's own (the client's name) is hidden there too,
    // and the dry run still prints: the plan is shown as JSON, not read back as a plan.
    let dry = finish(
        bin()
            .env("ANTHROPIC_API_KEY", "opencode")
            .args([
                "launch",
                "opencode",
                "--agent-id",
                "a1",
                "--launch-dir",
                launch_dir,
            ])
            .args(["--worktree", tmp.path().to_str().unwrap()])
            .args([
                "--credential",
                "ANTHROPIC_API_KEY",
                "--client-bin",
                "/bin/true",
            ])
            .arg("--dry-run"),
    );
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout.contains("\"client\": \"(not shown)\""),
        "{dry:?}"
    );
}

/// `launch --dry-run` hides the per-launch secrets a room sets as it hides credentials:
/// OpenCode's server password (what keeps another local user off its own HTTP server, the
/// fresh user of stop 53 read it in the dry run) shows as `(not shown)`, while
/// `render --format plan` holds its 32 hex digits. The bite, run once: without
/// `ClientSpec::launch_secrets` the dry run showed the password.
#[test]
fn a_dry_run_shows_no_launch_secret() {
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("l1");
    let run = |cmd: &str, last: &[&str]| {
        finish(
            bin()
                .args([cmd, "opencode", "--agent-id", "a1", "--launch-dir"])
                .arg(&launch_dir)
                .arg("--worktree")
                .arg(tmp.path())
                .args(last),
        )
    };
    let password = |out: &str| -> String {
        let start = out.find('{').expect("a JSON plan");
        let end = out.rfind("\n}").expect("a JSON plan") + 2;
        let plan: serde_json::Value = serde_json::from_str(&out[start..end]).unwrap();
        let env = plan["env"].as_array().unwrap();
        let var = env
            .iter()
            .find(|v| v["name"] == "OPENCODE_SERVER_PASSWORD")
            .unwrap_or_else(|| panic!("no password in {out}"));
        var["value"].as_str().unwrap().to_owned()
    };
    let plan = run("render", &["--format", "plan"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    let secret = password(&plan.stdout);
    assert!(
        secret.len() == 32 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
        "{secret}"
    );
    let dry = run("launch", &["--client-bin", "/bin/true", "--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert_eq!(password(&dry.stdout), "(not shown)", "{dry:?}");
}
