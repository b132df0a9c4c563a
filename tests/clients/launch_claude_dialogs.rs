//! Claude Code's first-run screens against the executor (`kcap_mcp_registry::launch`), on
//! Claude Code 2.1.197 (`KCAP_CLAUDE_BIN`) and 2.1.332 (`KCAP_CLAUDE_NEXT_BIN`).
//!
//! The Claude plan writes a per-launch `.claude.json` and passes `--settings` so the
//! interactive client asks nothing (`src/clients/claude/state.rs`). Each case here takes one
//! piece of that away and carries the plan out: the reviewer must be stopped with
//! [`ExecError::Dialog`] naming the screen it sits at, or end by itself, well within the
//! bound; it never hangs. Measured (2026-12-01):
//!
//! | taken away | 2.1.197 | 2.1.328 |
//! |---|---|---|
//! | `projects[<worktree>].hasTrustDialogAccepted` | folder trust dialog | folder trust dialog |
//! | `customApiKeyResponses.approved` | custom API key question | custom API key question |
//! | `hasCompletedOnboarding` | theme choice | theme choice |
//! | `--settings {"skipDangerousModePermissionPrompt":true}` and `bypassPermissionsModeAccepted` | bypass-permissions confirmation | bypass-permissions confirmation |
//! | the whole file | exits 1 at the connectivity check | exits 1 at the connectivity check |
//!
//! Offline: a dummy key, the model API and a proxy at a dead local port (the connectivity
//! check of `api.anthropic.com` goes to the proxy and is refused). A missing client is
//! reported as ignored (or fails under `KCAP_REQUIRE_PEERS=1`).

use crate::common;
use kcap_mcp_registry::Client;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::peers::peer;
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::claude::state::STATE_FILE;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::launch::{self, ExecError, Options, Reviewer, TerminalEvent};
use serde_json::Value;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        a_reviewer_at_a_first_run_screen_is_stopped_naming_it,
        the_plan_as_rendered_passes_every_screen,
    ]
}

/// How long the executor lets a terminal client sit at a dialog.
const QUIET: Duration = Duration::from_secs(3);
/// The bound of one run that should stop at a screen: start-up plus [`QUIET`] and more.
const BOUND: Duration = Duration::from_secs(30);
/// How long the control runs: long enough to pass every screen and send the prompt.
const CONTROL: Duration = Duration::from_secs(12);

/// The Claude Code binaries with their versions; a missing one marks the test skipped.
fn binaries() -> Vec<(PathBuf, &'static str)> {
    [
        ("KCAP_CLAUDE_BIN", "2.1.197"),
        ("KCAP_CLAUDE_NEXT_BIN", "2.1.332"),
    ]
    .into_iter()
    .filter_map(|(var, version)| Some((peer(var)?, version)))
    .collect()
}

/// The rooted plan for a launch in `dir`: a git worktree, a dummy key, the API and a proxy
/// at a dead local port, a prompt, the result channel only (its command a stand-in server
/// that lists its tools, `dir/kcap/kcap`: the prompt is typed once it has).
fn plan(dir: &Path) -> LaunchPlan {
    let worktree = dir.join("worktree");
    std::fs::create_dir_all(worktree.join(".git")).unwrap();
    std::fs::create_dir_all(dir.join("kcap")).unwrap();
    let kcap = dir.join("kcap/kcap");
    common::stand_in::write_executable(
        &kcap,
        common::records::listing_server_source(Duration::ZERO),
    );
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let mut ctx = LaunchContext {
        server_url: Some("http://127.0.0.1:9/kcap".into()),
        kcap_bin: Some(s(&kcap)),
        agent_id: "agent-dialogs".into(),
        worktree: Some(s(&worktree)),
        launch_dir: Some(s(&dir.join("launch"))),
        prompt: Some("Reply with OK.".into()),
        ..LaunchContext::default()
    };
    ctx.credentials.env = vec![
        EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
        EnvVar::new("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        EnvVar::new("IS_SANDBOX", "1"),
    ];
    let mut plan = crate::common::plan::lenient(Client::Claude, &ctx);
    plan.env.extend([
        EnvVar::new("HTTPS_PROXY", "http://127.0.0.1:9"),
        EnvVar::new("HTTP_PROXY", "http://127.0.0.1:9"),
    ]);
    plan
}

/// Edits the state file's JSON in `plan` (removing it when `edit` returns `None`).
fn edit_state(plan: &mut LaunchPlan, edit: impl FnOnce(Value) -> Option<Value>) {
    let at = plan
        .files
        .iter()
        .position(|f| f.path == STATE_FILE)
        .unwrap();
    match edit(serde_json::from_str(&plan.files[at].contents).unwrap()) {
        Some(v) => plan.files[at].contents = v.to_string(),
        None => {
            plan.files.remove(at);
        }
    }
}

/// How a run ended.
#[derive(Debug)]
enum End {
    /// Stopped at this dialog.
    Dialog(String),
    /// Exited by itself, with this status code, showing this screen text.
    Exited(Option<i32>, String),
    /// Still running at the bound, no dialog seen: it got past every screen.
    Running(String),
}

/// Carries `plan` out with `bin` and reads the terminal until the reviewer is stopped at a
/// dialog, exits, or `bound` passes; asserts it took no longer than that.
fn run(bin: &Path, plan: &LaunchPlan, bound: Duration) -> End {
    let options = Options::default()
        .with_dialog_quiet(QUIET)
        .with_die_with_parent(true);
    // The stand-in server ([`plan`]) beside the launch directory.
    let kcap = Path::new(&plan.launch_dir).with_file_name("kcap");
    let options = common::carry::reach(options, &[&kcap], &[]);
    let path = common::peers::inherited_path();
    let parent = |name: &str| (name == "PATH").then(|| OsString::from(&path));
    let started = Instant::now();
    let reviewer = launch::launch_with_parent_env(plan, bin, &options, &parent).unwrap();
    let Reviewer::Terminal(mut session) = reviewer else {
        panic!("the Claude plan runs in a terminal")
    };
    let end = loop {
        let left = bound.saturating_sub(started.elapsed());
        if left.is_zero() {
            break End::Running(session.screen_text().to_owned());
        }
        match session.next_event(left.min(Duration::from_millis(500))) {
            Err(ExecError::Dialog { dialog, after, .. }) => {
                assert_eq!(after, QUIET);
                break End::Dialog(dialog);
            }
            // Exited at a screen before its prompt was typed.
            Err(ExecError::Exited {
                step: launch::Step::TypePrompt,
                status,
                ..
            }) => {
                break End::Exited(
                    status.and_then(|s| s.code()),
                    session.screen_text().to_owned(),
                );
            }
            Err(e) => panic!("{e}"),
            Ok(Some(TerminalEvent::Exited(status))) => {
                break End::Exited(
                    status.and_then(|s| s.code()),
                    session.screen_text().to_owned(),
                );
            }
            Ok(_) => {}
        }
    };
    assert!(
        started.elapsed() < bound + Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let _ = session.stop();
    end
}

fn a_reviewer_at_a_first_run_screen_is_stopped_naming_it() {
    type Edit = fn(&mut LaunchPlan);
    let cases: [(&str, Edit, &str); 4] = [
        (
            "no trust entry",
            |p| {
                edit_state(p, |mut v| {
                    v.as_object_mut().unwrap().remove("projects");
                    Some(v)
                });
            },
            "Claude Code's folder trust dialog",
        ),
        (
            "the key not approved",
            |p| {
                edit_state(p, |mut v| {
                    v.as_object_mut().unwrap().remove("customApiKeyResponses");
                    Some(v)
                });
            },
            "Claude Code's custom API key question",
        ),
        (
            "onboarding not done",
            |p| {
                edit_state(p, |mut v| {
                    v.as_object_mut().unwrap().remove("hasCompletedOnboarding");
                    Some(v)
                });
            },
            "Claude Code's theme choice (onboarding)",
        ),
        (
            "bypass-permissions not accepted",
            |p| {
                edit_state(p, |mut v| {
                    v.as_object_mut()
                        .unwrap()
                        .remove("bypassPermissionsModeAccepted");
                    Some(v)
                });
                let at = p.argv.iter().position(|a| a == "--settings").unwrap();
                p.argv.drain(at..at + 2);
            },
            "Claude Code's bypass-permissions confirmation",
        ),
    ];
    for (bin, version) in binaries() {
        for (what, edit, dialog) in cases {
            let dir = tempfile::tempdir().unwrap();
            let mut plan = plan(dir.path());
            edit(&mut plan);
            match run(&bin, &plan, BOUND) {
                End::Dialog(name) => assert_eq!(name, dialog, "{version}, {what}"),
                other => panic!("{version}, {what}: {other:?}"),
            }
        }
        // Without the file, the onboarding's connectivity check fails (the proxy is dead)
        // and the client exits.
        let dir = tempfile::tempdir().unwrap();
        let mut plan = plan(dir.path());
        edit_state(&mut plan, |_| None);
        match run(&bin, &plan, BOUND) {
            End::Exited(Some(1), screen) => assert!(
                screen.contains("unabletoconnecttoanthropicservices"),
                "{version}: {screen}"
            ),
            other => panic!("{version}, no state file: {other:?}"),
        }
    }
}

/// The control: the plan as rendered runs past every screen (no dialog, no exit, until the
/// bound).
fn the_plan_as_rendered_passes_every_screen() {
    for (bin, version) in binaries() {
        let dir = tempfile::tempdir().unwrap();
        let plan = plan(dir.path());
        match run(&bin, &plan, CONTROL) {
            End::Running(screen) => assert!(screen.contains("replywithok"), "{version}: {screen}"),
            other => panic!("{version}: {other:?}"),
        }
    }
}
