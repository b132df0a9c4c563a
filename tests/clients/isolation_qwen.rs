//! Qwen Code 0.24.4 behind the reviewer's door (issue 32, `LaunchContext::door`), on the
//! real client (`KCAP_QWEN_BIN`): its isolation by construction is shown by
//! `conformance_acp` and `differential_qwen`; this module holds what needs a model turn.
//! Offline: the model API and the kcap server are stand-ins on 127.0.0.1, the key a dummy.

use crate::common;

use common::door::{acp_launch, acp_launch_prepared};
use common::peers::peer;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        behind_the_door_the_key_stays_outside_and_only_the_door_is_reached,
        instruction_files_reach_no_model_request,
    ]
}

/// Qwen Code writes its key into the per-launch settings file (a launch-directory file).
/// Behind the door, through `Client::plan`: the settings file holds the per-launch token,
/// the first model request reaches the stand-in model API through the door carrying the
/// daemon's key in `authorization: Bearer` (set by the door; no header carries the token),
/// no server's environment nor launch-directory file holds the key, a server reaches the
/// stand-in kcap server through the door and its direct connection to the model API's host
/// port fails. Without the door the settings file holds the key and the direct connection
/// opens, so the test bites.
fn behind_the_door_the_key_stays_outside_and_only_the_door_is_reached() {
    const KEY: &str = "sk-daemon-key-door-qwen-0123";
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    if let Some(missing) = kcap_mcp_registry::launch::door::missing() {
        common::peers::skip(format!("this kernel lacks {missing}"));
        return;
    }
    let credentials = |api: &str| {
        vec![
            EnvVar::new("OPENAI_API_KEY", KEY),
            EnvVar::new("OPENAI_BASE_URL", format!("{api}/v1")),
        ]
    };
    let tools = ["submit_review_result", "send_flow_message"];
    let launch = |door| {
        acp_launch(
            Client::Qwen,
            &bin,
            &tools,
            "gpt-4o",
            &credentials,
            KEY,
            door,
        )
    };
    let open = launch(false);
    open.assert_open(KEY, "authorization", "Bearer ");
    assert!(
        open.leaks.iter().any(|p| p.ends_with("settings.json")),
        "without the door the settings file holds the key: {:?}",
        open.leaks
    );
    launch(true).assert_behind_the_door(KEY, "authorization", "Bearer ");
}

/// Where [`instruction_files_reach_no_model_request`] writes an instruction file (relative to
/// the launch's folder, whose `wt/` is the worktree), and its marker.
const INSTRUCTION_MARKERS: [(&str, &str); 7] = [
    ("wt/QWEN.md", "KCAP_MARK_QWEN_ROOT"),
    ("wt/AGENTS.md", "KCAP_MARK_AGENTS_ROOT"),
    ("wt/GEMINI.md", "KCAP_MARK_GEMINI_ROOT"),
    ("wt/sub/QWEN.md", "KCAP_MARK_QWEN_SUB"),
    ("wt/sub/AGENTS.md", "KCAP_MARK_AGENTS_SUB"),
    ("QWEN.md", "KCAP_MARK_QWEN_PARENT"),
    ("AGENTS.md", "KCAP_MARK_AGENTS_PARENT"),
];

/// The markers of [`INSTRUCTION_MARKERS`] that reached the stand-in model API in one launch of
/// Qwen Code's plan, changed by `change` first.
fn instruction_markers_sent(
    bin: &std::path::Path,
    change: &dyn Fn(&mut LaunchPlan),
) -> Vec<&'static str> {
    const KEY: &str = "sk-kcap-instructions-qwen";
    let credentials = |api: &str| {
        vec![
            EnvVar::new("OPENAI_API_KEY", KEY),
            EnvVar::new("OPENAI_BASE_URL", format!("{api}/v1")),
        ]
    };
    let run = acp_launch_prepared(
        Client::Qwen,
        bin,
        &["submit_review_result", "send_flow_message"],
        "gpt-4o",
        &credentials,
        KEY,
        false,
        &|dir, plan| {
            common::model_api::write_instruction_files(dir, &INSTRUCTION_MARKERS);
            change(plan);
        },
    );
    assert!(
        run.requests.iter().any(|r| !r.body.is_empty()),
        "no model request: {}",
        run.stderr
    );
    common::model_api::markers_sent(&run.requests, &INSTRUCTION_MARKERS)
}

/// The worktree's instruction files (a pull request can add or edit them): `QWEN.md`,
/// `AGENTS.md` and `GEMINI.md` in the worktree, a subfolder and the parent folder, each with
/// its own marker. Judged on every request to the stand-in model API: which markers it holds.
/// None with the plan (it removes the worktree's `QWEN.md` and `AGENTS.md`,
/// `qwen::WORKTREE_CONFIG`); the control, the same plan with both kept, sends those two and no
/// other (measured on 0.24.4: `GEMINI.md` is not a context file name, the subfolder's are not
/// read at start, the parent's lie above the worktree, which has no git root here).
fn instruction_files_reach_no_model_request() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    assert_eq!(
        instruction_markers_sent(&bin, &|_| {}),
        Vec::<&str>::new(),
        "instruction files reached the model"
    );
    let control = instruction_markers_sent(&bin, &|plan| {
        plan.worktree_remove
            .retain(|p| p != "QWEN.md" && p != "AGENTS.md");
    });
    assert_eq!(
        control,
        ["KCAP_MARK_QWEN_ROOT", "KCAP_MARK_AGENTS_ROOT"],
        "the control"
    );
}
