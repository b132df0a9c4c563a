//! Qwen Code's first turn over ACP: the prompt waits until its debug log says each injected
//! server started, and a server that failed stops the launch.
//!
//! Measured on 0.24.4 (2026-12-05; a stand-in server per case, a stand-in model API recording
//! the requests, the plan driven through `launch::launch_with_parent_env`): with
//! `QWEN_CODE_LEGACY_MCP_BLOCKING=1` `session/new` answers once the servers' discovery is
//! over, so a server answering after 5 s is in the first turn. But a server that exits at
//! once gets `session/new` answered as usual, and the first prompt goes out without its
//! tools; the only word of it over the pipes is a line on standard error (`Warning: MCP
//! server(s) failed to start: <name>. …`), which came about 20 ms before the answer.
//!
//! What tells it exactly: with `QWEN_DEBUG_LOG_FILE=1` its debug logger
//! (`packages/core/src/utils/debugLogger.ts`, `chunks/chunk-C2YAG4QV.js`) appends
//! `<ISO time> [<LEVEL>] [<TAG>] <message>` lines to `$QWEN_HOME/debug/<session id>.txt`, one
//! file per session (two in a launch: the process's own and the ACP session's) beside a
//! `latest` link. The MCP pool writes `[McpPool] Spawned pool entry <name>::<entry id>` once a
//! server answered `initialize`, and `[McpPool] Failed to spawn pool entry for '<name>'` and
//! `[MCP] Pool acquire failed for <name>: <reason>` when it exited. So the plan turns that log
//! on and has the executor read every file of that directory after `session/new`
//! ([`ServersReady`], a `log` ending in `/`).

use crate::clients::plan::{EnvVar, LaunchPlan, ServersReady};

/// The directory of the launch directory Qwen Code writes its debug logs to (`debug/` of
/// its `QWEN_HOME`, the per-launch home's `.qwen`), with the `/` that makes it a directory
/// to the executor.
pub const DEBUG_LOG_DIR: &str = "home/.qwen/debug/";

/// The variable that turns the debug log on.
pub const DEBUG_LOG_VAR: &str = "QWEN_DEBUG_LOG_FILE";

/// Where a line's message starts in that log: after the first `] ` of `<time> [<LEVEL>]
/// [<TAG>] <message>` (`buildLogLine`), so each text begins with its tag. A text counts only
/// where it starts a line's message: one quoted in another line (a server's standard error
/// the client logs, an error's stack trace) says nothing.
pub const LOG_MESSAGE_AFTER: usize = 1;

/// Turns the debug log on and sets [`LaunchPlan::servers_ready`]: each server's `[McpPool]
/// Spawned pool entry <name>::` ready; its `[McpPool] Failed to spawn pool entry for
/// '<name>'` or `[MCP] Pool acquire failed for <name>:` failed, each at the start of a line's
/// message ([`LOG_MESSAGE_AFTER`]). Nothing without servers.
pub(super) fn wait_for_servers(plan: &mut LaunchPlan) {
    if plan.servers.is_empty() {
        return;
    }
    plan.env.push(EnvVar::new(DEBUG_LOG_VAR, "1"));
    let ready = plan
        .servers
        .iter()
        .map(|s| format!("[McpPool] Spawned pool entry {}::", s.wire_name))
        .collect();
    let failed = plan
        .servers
        .iter()
        .flat_map(|s| {
            [
                format!("[McpPool] Failed to spawn pool entry for '{}'", s.wire_name),
                format!("[MCP] Pool acquire failed for {}:", s.wire_name),
            ]
        })
        .collect();
    plan.servers_ready = Some(ServersReady {
        log: DEBUG_LOG_DIR.to_owned(),
        ready,
        failed,
        message_after: LOG_MESSAGE_AFTER,
        message_separator: "] ".to_owned(),
        settle_ms: 0,
    });
}
