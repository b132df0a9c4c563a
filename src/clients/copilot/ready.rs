//! Copilot CLI's first turn over ACP: the prompt waits until its log says each injected
//! server started, and a server that failed stops the launch.
//!
//! Measured on 1.0.102 (2026-12-05; a stand-in server per case, a stand-in model API recording
//! the requests, the plan driven through `launch::launch_with_parent_env`): `session/new`
//! answers before the servers start (a server's connection came 130 ms after it), and the
//! first turn waits for them (`MCP turn load wait completed`), so a server answering after
//! 5 s is in the first turn. But a server that exits at once is dropped: the first request
//! offered only the other server's tool, and nothing came over ACP or standard error.
//!
//! What tells it: Copilot writes `<ISO time> [<LEVEL>] [<target>] <message>` lines to
//! `$COPILOT_HOME/logs/process-<start ms>-<pid>.log`, a file per process, at its default
//! level: `[INFO] [rust:rmcp::service] Service initialized as client {…}` once a server
//! answered `initialize` (the line names the server's own `serverInfo`, not our name, so
//! the plan lists the text once a server and the executor counts the lines), and `[WARNING]
//! [rust:copilot_runtime::mcp::native_connector] MCP server connection failed
//! {"server_name":"<name>",…}` when one exited. So the executor reads that directory after
//! `session/new` ([`ServersReady`], a `log` ending in `/`).

use crate::clients::plan::{LaunchPlan, ServersReady};

/// Where a line's message starts in that log: after the second `] ` of `<time> [<LEVEL>]
/// [<target>] <message>`.
pub const LOG_MESSAGE_AFTER: usize = 2;

/// The line a server's start writes, whichever server it is.
pub const SERVER_READY: &str = "Service initialized as client";

/// Sets [`LaunchPlan::servers_ready`] on [`super::COPILOT_HOME_DIR`]`/logs/`: [`SERVER_READY`]
/// once a server; each server's `MCP server connection failed {"server_name":"<name>"` failed,
/// at the start of a line's message ([`LOG_MESSAGE_AFTER`]). Nothing without servers.
pub(super) fn wait_for_servers(plan: &mut LaunchPlan) {
    if plan.servers.is_empty() {
        return;
    }
    let ready = plan
        .servers
        .iter()
        .map(|_| SERVER_READY.to_owned())
        .collect();
    let failed = plan
        .servers
        .iter()
        .map(|s| {
            format!(
                "MCP server connection failed {{\"server_name\":{}",
                serde_json::Value::String(s.wire_name.clone())
            )
        })
        .collect();
    plan.servers_ready = Some(ServersReady {
        log: format!("{}/logs/", super::COPILOT_HOME_DIR),
        ready,
        failed,
        message_after: LOG_MESSAGE_AFTER,
        message_separator: "] ".to_owned(),
        settle_ms: 0,
    });
}
