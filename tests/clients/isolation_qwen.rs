//! Qwen Code 0.24.4 behind the reviewer's door (issue 32, `LaunchContext::door`), on the
//! real client (`KCAP_QWEN_BIN`): its isolation by construction is shown by
//! `conformance_acp` and `differential_qwen`; this module holds what needs a model turn.
//! Offline: the model API and the kcap server are stand-ins on 127.0.0.1, the key a dummy.

use crate::common;

use common::door::acp_launch;
use common::peers::peer;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::EnvVar;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![behind_the_door_the_key_stays_outside_and_only_the_door_is_reached]
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
