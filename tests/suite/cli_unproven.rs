//! A client version this crate's tests do not prove (issue 34): the strict policy refuses it,
//! naming the version and the fix, unless `verify` recorded a pass for that very binary and
//! version on this machine (`ops::verify::record`); a proven version passes; a record of
//! another binary (another SHA-256), or one others may write, does not count. Through
//! `Client::plan` and through `launch --strict` with a stand-in client that answers
//! `--version`.

use crate::common;

use std::path::{Path, PathBuf};

use common::stand_in::{set_dir_mode, sh_script};
use common::{Run, bin, finish};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::version::ClientVersion;
use kcap_mcp_registry::ops::verify::record::{self, Binary};
use kcap_mcp_registry::{LaunchCommand, LaunchContext, LaunchError, Policy, RenderError};

fn ctx() -> LaunchContext {
    let cmd: LaunchCommand = serde_json::from_str(r#"{"agent_id":"a1"}"#).unwrap();
    let mut ctx = LaunchContext::from_command(cmd, "http://127.0.0.1:5100", "/usr/bin/kcap");
    ctx.launch_dir = Some("/run/kcap/l1".into());
    ctx
}

fn plan(policy: Policy, version: Option<ClientVersion>) -> Result<Vec<String>, LaunchError> {
    let mut inputs = PlanInputs::new(policy);
    inputs.client_version = version;
    Client::Codex.plan(&ctx(), &inputs).map(|p| p.warnings)
}

const REFUSAL: &str = "Codex CLI 0.172.0 is not a version this crate's tests prove (0.169.0, \
                       0.171.0) and `verify` has not passed for it on this machine; run \
                       `kcap-mcp-registry verify codex --client-bin <PATH>` with this binary \
                       (a pass is recorded for it), or install a proven version";

#[test]
fn the_plan_refuses_an_unproven_version_under_the_strict_policy_only() {
    let unproven = || Some(ClientVersion::new("codex-cli 0.172.0"));
    let err = plan(Policy::Strict, unproven()).unwrap_err();
    assert!(
        matches!(
            &err,
            LaunchError::Render(RenderError::UnprovenVersion { client: Client::Codex, version, proven })
                if version == "0.172.0" && *proven == ["0.169.0", "0.171.0"]
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), REFUSAL);
    // Lenient: launched, with the same words as a warning.
    assert_eq!(
        plan(Policy::Lenient, unproven()).unwrap(),
        [format!("agent \"a1\": {REFUSAL}")]
    );
    // Verified here, proven, or not given: no refusal, no warning.
    let verified = ClientVersion::new("codex-cli 0.172.0").verified_here();
    assert_eq!(
        plan(Policy::Strict, Some(verified)).unwrap(),
        Vec::<String>::new()
    );
    let proven = ClientVersion::new("codex-cli 0.171.0");
    assert_eq!(
        plan(Policy::Strict, Some(proven)).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(plan(Policy::Strict, None).unwrap(), Vec::<String>::new());
    // The number is compared exactly: a line that merely mentions a proven version does not
    // prove another.
    let mention = ClientVersion::new("codex-cli 0.172.0 (after 0.171.0)");
    assert!(plan(Policy::Strict, Some(mention)).is_err());
}

/// A stand-in Claude Code answering `--version` with `version`, and otherwise saying `note`.
fn claude(dir: &Path, version: &str, note: &str) -> PathBuf {
    sh_script(
        dir,
        "claude",
        &format!(
            "[ \"$1\" = --version ] && {{ echo \"{version} (Claude Code)\"; exit 0; }}\necho {note}"
        ),
    )
}

/// `launch claude --strict --dry-run` with `client`, its record under `state`.
fn launch(dir: &Path, client: &Path, state: &Path) -> Run {
    let tree = dir.join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    finish(
        bin()
            .env("XDG_STATE_HOME", state)
            .args([
                "launch",
                "claude",
                "--agent-id",
                "a1",
                "--strict",
                "--dry-run",
            ])
            .args([
                "--server-url",
                "http://127.0.0.1:9/kcap",
                "--kcap-bin",
                "/usr/bin/kcap",
            ])
            .args(["--sandbox", "off", "--launch-dir"])
            .arg(dir.join("l1"))
            .arg("--worktree")
            .arg(&tree)
            .arg("--client-bin")
            .arg(client),
    )
}

fn record_dir(state: &Path) -> PathBuf {
    state.join("kcap-mcp-registry/verified")
}

#[test]
fn a_strict_launch_takes_an_unproven_version_only_after_verify_passed_for_that_binary() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let client = claude(dir.path(), "2.1.999", "one");
    let refused = launch(dir.path(), &client, &state);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert_eq!(
        refused.stderr,
        "error: Claude Code 2.1.999 is not a version this crate's tests prove (2.1.197, \
         2.1.332) and `verify` has not passed for it on this machine; run \
         `kcap-mcp-registry verify claude --client-bin <PATH>` with this binary (a pass is \
         recorded for it), or install a proven version\n"
    );
    // A pass recorded for this binary at this version, as `verify` records it.
    let version = ClientVersion::new("2.1.999 (Claude Code)");
    let binary = Binary::identify(&client).unwrap();
    let file = record::record(&record_dir(&state), Client::Claude, &binary, &version).unwrap();
    assert_eq!(file, record_dir(&state).join("claude.json"));
    let ok = launch(dir.path(), &client, &state);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(
        ok.stdout.contains("\"client\": \"claude\""),
        "{}",
        ok.stdout
    );
    // Another binary at the same path and version (its SHA-256 differs): not counted.
    let client = claude(dir.path(), "2.1.999", "two");
    assert_ne!(Binary::identify(&client).unwrap().sha256, binary.sha256);
    let again = launch(dir.path(), &client, &state);
    assert_eq!((again.code, again.stderr), refused_of(&refused));
    // Nor for another version of the recorded binary's bytes.
    let other = ClientVersion::new("2.1.998 (Claude Code)");
    assert_eq!(
        record::lookup(&record_dir(&state), Client::Claude, &binary, &other).unwrap(),
        None
    );
}

fn refused_of(run: &Run) -> (i32, String) {
    (run.code, run.stderr.clone())
}

#[test]
fn a_proven_version_launches_without_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let client = claude(dir.path(), "2.1.332", "one");
    let run = launch(dir.path(), &client, &dir.path().join("state"));
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    assert!(
        !dir.path().join("state").exists(),
        "nothing recorded or read"
    );
}

#[test]
fn a_record_others_may_write_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let client = claude(dir.path(), "2.1.999", "one");
    let version = ClientVersion::new("2.1.999 (Claude Code)");
    let binary = Binary::identify(&client).unwrap();
    record::record(&record_dir(&state), Client::Claude, &binary, &version).unwrap();
    set_dir_mode(&record_dir(&state), 0o777);
    let run = launch(dir.path(), &client, &state);
    assert_eq!(run.code, 1, "{run:?}");
    let (warning, error) = run.stderr.split_once('\n').unwrap();
    assert_eq!(
        warning,
        format!(
            "warning: verify's record is not used: verify's record {} is writable by its group \
             or others (mode 777), so another user could forge a pass; make it yours and not \
             writable by its group or others, or remove it",
            record_dir(&state).display()
        )
    );
    assert!(
        error.starts_with("error: Claude Code 2.1.999 is not a version"),
        "{error}"
    );
    // Writing a pass into it is refused too.
    let err = record::record(&record_dir(&state), Client::Claude, &binary, &version).unwrap_err();
    assert!(
        err.to_string()
            .contains("is writable by its group or others"),
        "{err}"
    );
}

#[test]
fn render_takes_the_version_as_a_flag() {
    let run = common::run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--server-url",
        "http://127.0.0.1:9/kcap",
        "--kcap-bin",
        "/usr/bin/kcap",
        "--launch-dir",
        "/run/kcap/l1",
        "--strict",
        "--client-version",
        "codex-cli 0.172.0",
    ]);
    assert_eq!((run.code, run.stderr), (1, format!("error: {REFUSAL}\n")));
    let run = common::run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--server-url",
        "http://127.0.0.1:9/kcap",
        "--kcap-bin",
        "/usr/bin/kcap",
        "--launch-dir",
        "/run/kcap/l1",
        "--strict",
        "--client-version",
        "codex-cli 0.171.0",
    ]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
}
