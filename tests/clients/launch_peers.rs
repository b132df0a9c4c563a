//! The executor (`kcap_mcp_registry::launch`) against the real clients: plans carried out
//! by the library, not by a test driver.
//!
//! - Gemini CLI 0.61.0 (`KCAP_GEMINI_BIN`): recorders stand in for the kcap binary; the
//!   worktree holds a `.gemini/settings.json` declaring servers of its own (one named like
//!   an injected server, one named otherwise), which the plan's `worktree_remove` takes
//!   away. The recorders' logs must show exactly the injected servers, each with exactly its
//!   argv and `KCAP_*` environment; after [`Reviewer::stop`] no process of the client's
//!   group is left and the launch directory is removed.
//! - Codex CLI 0.169.0 (`KCAP_CODEX_BIN`) in a worktree with a `.codex/` folder (MCP
//!   servers, or hooks) of a git checkout: it either runs (asks the model), exits, or is stopped with
//!   [`ExecError::Dialog`] naming the dialog, within the bound; it never sits silent at a
//!   screen nobody answers. (Measured on 0.169.0: the plan removes `.codex`, and Codex then
//!   stops at "Trust this folder?", which the plan does not answer yet.)
//!
//! Offline: dummy keys, the model APIs at a dead local port or (Codex) a stand-in on
//! 127.0.0.1 that refuses every turn; no Gemini prompt is sent.

use crate::common;
use kcap_mcp_registry::Client;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::peers::peer;
use common::records::{Known, read_records, recorder_source};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::plan::EnvVar;
use kcap_mcp_registry::clients::root::CredentialFile;
use kcap_mcp_registry::launch::{self, ExecError, Options, Reviewer, TerminalEvent};
use kcap_mcp_registry::{LaunchContext, Policy};
use serde_json::json;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        gemini_plan_carried_out_by_the_executor_starts_exactly_the_injected_servers,
        codex_in_a_worktree_with_a_codex_folder_runs_or_stops_at_a_named_dialog,
    ]
}

fn gemini_plan_carried_out_by_the_executor_starts_exactly_the_injected_servers() {
    let Some(gemini) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = |rel: &str| tmp.path().join(rel);
    for dir in ["records", "bin", "worktree"] {
        std::fs::create_dir_all(path(dir)).unwrap();
    }
    let recorder = path("bin/kcap");
    write_executable(&recorder, recorder_source(&path("records")));
    let mut ctx = LaunchContext {
        server_url: Some("http://127.0.0.1:9/kcap".into()),
        kcap_bin: Some(recorder.display().to_string()),
        agent_id: "agent-7".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        worktree: Some(path("worktree").display().to_string()),
        launch_dir: Some(path("launch").display().to_string()),
        ..LaunchContext::default()
    };
    ctx.credentials.env = vec![
        EnvVar::new("GEMINI_API_KEY", "dummy"),
        EnvVar::new("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9"),
    ];
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    let plan = crate::common::plan::resolved(
        Client::Gemini,
        &ctx,
        &resolution,
        kcap_mcp_registry::Policy::Lenient,
    )
    .unwrap();
    assert!(plan.worktree_remove.contains(&".gemini".to_string()));

    // The reviewed repository's own servers: one named like the injected server.
    let hostile =
        |arg: &str| json!({"command": recorder.display().to_string(), "args": ["hostile", arg]});
    let settings = json!({"mcpServers": {
        "kcap-review-0123456789abcdef": hostile("same-name"),
        "repo-server": hostile("other"),
    }});
    std::fs::create_dir_all(path("worktree/.gemini")).unwrap();
    std::fs::write(
        path("worktree/.gemini/settings.json"),
        serde_json::to_vec(&settings).unwrap(),
    )
    .unwrap();

    let wanted: BTreeSet<Known> = plan
        .session_new
        .as_ref()
        .unwrap()
        .mcp_servers
        .iter()
        .map(|s| {
            let argv = std::iter::once(s.command.clone())
                .chain(s.args.iter().cloned())
                .collect();
            let env = s
                .env
                .iter()
                .filter(|v| v.name.starts_with("KCAP_"))
                .map(|v| (v.name.clone(), v.value.clone()))
                .collect();
            (argv, env)
        })
        .collect();

    let options = common::carry::reach(
        Options::default().with_handshake_timeout(Duration::from_secs(60)),
        &[&gemini, &path("bin")],
        &[&path("records")],
    );
    let reviewer =
        launch::launch(&plan, &gemini, &options).unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!path("worktree/.gemini").exists(), "worktree_remove");
    let pid = reviewer.pid();
    let Reviewer::Acp(session) = &reviewer else {
        panic!("Gemini runs over ACP")
    };
    assert!(!session.session_id().is_empty());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed: BTreeSet<Known> = read_records(&path("records"))
            .iter()
            .filter(|r| r.listed_tools)
            .map(common::records::Record::known)
            .collect();
        if wanted.is_subset(&listed) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every injected server listed its tools: {listed:?}; stderr:\n{}",
            session.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Let a server started late show up.
    std::thread::sleep(Duration::from_secs(2));
    reviewer.stop().unwrap();

    let started: BTreeSet<Known> = read_records(&path("records"))
        .iter()
        .map(common::records::Record::known)
        .collect();
    assert_eq!(started, wanted, "exactly the injected servers started");
    assert!(!path("launch").exists(), "the launch directory is removed");
    let left = group(pid);
    assert!(
        left.is_empty(),
        "processes of the client's group left: {left:?}"
    );
}

use kcap_mcp_registry::text::error_chain as chain;

/// How long Codex may write nothing without showing a known dialog before the test calls it
/// a hang.
const SILENT: Duration = Duration::from_secs(15);

fn codex_in_a_worktree_with_a_codex_folder_runs_or_stops_at_a_named_dialog() {
    let Some(codex) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let folders = [
        (
            "config.toml",
            "[mcp_servers.repo]\ncommand = \"/bin/true\"\n",
        ),
        (
            "hooks.json",
            r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"/bin/true"}]}]}}"#,
        ),
    ];
    for (name, contents) in folders {
        let tmp = tempfile::tempdir().unwrap();
        let worktree = tmp.path().join("worktree");
        std::fs::create_dir_all(worktree.join(".codex")).unwrap();
        // A reviewer's worktree is a git checkout (Codex asks about trust in one).
        let git = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&worktree)
            .status()
            .unwrap();
        assert!(git.success());
        std::fs::write(worktree.join(".codex").join(name), contents).unwrap();
        let mut ctx = LaunchContext {
            agent_id: "agent-7".into(),
            prompt: Some("Review the change".into()),
            worktree: Some(worktree.display().to_string()),
            launch_dir: Some(tmp.path().join("launch").display().to_string()),
            ..LaunchContext::default()
        };
        // The key as a credential file: with the key only in its environment Codex 0.169.0
        // stops at its sign-in screen (which the executor names too). The model API is a
        // stand-in that refuses every turn: Codex's first request there shows it runs.
        let api = common::model_api::ModelApi::start();
        ctx.credentials.env = vec![EnvVar::new("OPENAI_BASE_URL", format!("{}/v1", api.url))];
        ctx.credentials.files = vec![CredentialFile {
            name: "auth.json".into(),
            contents: r#"{"OPENAI_API_KEY":"dummy"}"#.into(),
        }];
        let resolution = ctx.resolve(Policy::Lenient).unwrap();
        let plan = crate::common::plan::resolved(
            Client::Codex,
            &ctx,
            &resolution,
            kcap_mcp_registry::Policy::Lenient,
        )
        .unwrap();
        let options = Options::default().with_dialog_quiet(Duration::from_secs(3));
        let started = Instant::now();
        let mut reviewer =
            launch::launch(&plan, &codex, &options).unwrap_or_else(|e| panic!("{}", chain(&e)));
        assert!(!worktree.join(".codex").exists(), "worktree_remove");
        let pid = reviewer.pid();
        let Reviewer::Terminal(session) = &mut reviewer else {
            panic!("Codex runs in a terminal")
        };
        let mut last_output = Instant::now();
        let outcome = loop {
            // Past its dialogs, asking the model: it runs (the first conclusive sign; before,
            // the test waited for the 20 s below every time).
            if !api.requests().is_empty() {
                break "runs (asked the model)".to_owned();
            }
            if started.elapsed() > Duration::from_secs(20) {
                break "runs (still writing after 20 s)".to_owned();
            }
            match session.next_event(Duration::from_millis(200)) {
                Ok(Some(TerminalEvent::Output(_))) => last_output = Instant::now(),
                Ok(Some(TerminalEvent::Exited(status))) => break format!("exited {status:?}"),
                Ok(_) => assert!(
                    last_output.elapsed() < SILENT,
                    ".codex/{name}: Codex wrote nothing for {} s and shows no known dialog; \
                     screen: {}",
                    SILENT.as_secs(),
                    session.screen_text()
                ),
                Err(ExecError::Dialog { dialog, .. }) => break format!("stopped at {dialog}"),
                Err(e) => panic!(".codex/{name}: {}", chain(&e)),
            }
        };
        eprintln!(".codex/{name}: {outcome} after {:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(35), "{outcome}");
        reviewer.stop().unwrap();
        assert!(!tmp.path().join("launch").exists());
        let left = group(pid);
        assert!(left.is_empty(), "processes of Codex's group left: {left:?}");
    }
}

/// Live processes of process group `pgid`.
fn group(pgid: u32) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            let f: Vec<&str> = stat
                .rsplit_once(')')
                .unwrap()
                .1
                .split_whitespace()
                .collect();
            f[0] != "Z" && f[2] == pgid.to_string()
        })
        .collect()
}
