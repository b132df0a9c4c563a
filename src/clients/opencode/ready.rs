//! OpenCode's first turn over ACP: a server that failed stops the launch before the prompt.
//!
//! Measured on 1.18.33 (2026-12-05; a stand-in server per case, a stand-in model API recording
//! the requests, the plan driven through `launch::launch_with_parent_env`): `session/new`
//! answers once every server connected or failed (a server answering after 5 s held the
//! answer 5.1 s), so a slow server is in the first turn. But one that exits at once gets
//! `session/new` answered as usual, and the first turn goes out without its tools; nothing
//! comes over ACP or standard error.
//!
//! What tells it: OpenCode writes `key=value` lines to `$XDG_DATA_HOME/opencode/log/`
//! (`opencode.log`), at its default level `timestamp=<ISO time> level=WARN run=<id>
//! message="server unavailable" key=<name> type=local status=failed` when a server failed
//! (`MCP.create`'s `logWarning`); nothing when one connected. The line is stamped 17 to 22 ms
//! before the `session/new` answer (three runs), but OpenCode writes its log in batches: the
//! file, read every 20 ms, held it 383 ms after the answer. So the executor reads that
//! directory after `session/new` for [`SETTLE_MS`] for a failed line ([`ServersReady`] with
//! no `ready` text).

use crate::clients::plan::{LaunchPlan, ServersReady};

/// OpenCode's log directory, relative to the launch directory (`opencode/log/` of the
/// per-launch `XDG_DATA_HOME`), with the `/` that makes it a directory to the executor.
pub const LOG_DIR: &str = "home/.local/share/opencode/log/";

/// What comes before a line's message: its `timestamp=`, `level=` and `run=` fields, then
/// ` message=` (the message quoted when it holds a space).
pub const LOG_MESSAGE_SEPARATOR: &str = " message=";

/// How long the executor reads the log for a failed line after `session/new` answered,
/// in milliseconds: about four times the 0.4 s the line took to reach the file when
/// measured, for a loaded machine. Every OpenCode launch with servers waits this long.
pub const SETTLE_MS: u64 = 1500;

/// Sets [`LaunchPlan::servers_ready`]: no `ready` text (OpenCode writes none), each
/// server's `"server unavailable" key=<name> ` failed, read for [`SETTLE_MS`]. Nothing
/// without servers.
pub(super) fn wait_for_servers(plan: &mut LaunchPlan) {
    if plan.servers.is_empty() {
        return;
    }
    let failed = plan
        .servers
        .iter()
        .map(|s| format!("\"server unavailable\" key={} ", s.wire_name))
        .collect();
    plan.servers_ready = Some(ServersReady {
        log: LOG_DIR.to_owned(),
        ready: Vec::new(),
        failed,
        message_after: 1,
        message_separator: LOG_MESSAGE_SEPARATOR.to_owned(),
        settle_ms: SETTLE_MS,
    });
}
