//! Gemini CLI's first turn over ACP: the prompt waits until its log says each injected
//! server connected, and a server that failed stops the launch.
//!
//! Measured on 0.61.0 (2026-12-05; a stand-in server per case, a stand-in model API recording
//! the requests, the plan of `render gemini --format plan` driven over ACP by a script; with
//! this gate, `launch gemini` on the real client stops in 5 s with the server's line): `session/new` answers once the
//! servers' discovery is over (`GeminiAgent`'s `newSession` awaits `config.initialize()`,
//! `bundle/gemini-3HFX2LNT.js`), so a server answering after 5 s is in the first turn. But a
//! server that exits at once gets `session/new` answered as usual (in 0.2 s), with nothing on
//! ACP or standard error, and the first prompt goes out without its tools. A server that
//! never answers `initialize` holds `session/new` for its MCP timeout (no answer in 150 s).
//!
//! What it does tell: with `GEMINI_DEBUG_LOG_FILE=<path>` its `DebugLogger`
//! (`bundle/chunk-JDPZ4CE3.js`) appends every debug line there. The MCP client writes
//! `Registering notification handlers for server '<name>'` once a server answered
//! `initialize`, `[MCP error] Error during discovery for MCP server '<name>'` (an exit: `MCP
//! error -32000: Connection closed`) or `[MCP error] Error connecting to MCP server
//! '<name>'` when it failed (`McpClientManager.emitDiagnostic` logs `[MCP ${severity}]
//! ${message}`, which ACP mode shows nowhere else), and
//! `[STARTUP] StartupProfiler.flush() called` after `config.initialize()`, before
//! `session/new` answers. So the plan turns that log on and has the executor read it after
//! `session/new` ([`ServersReady`]).

use crate::clients::plan::{EnvVar, LaunchPlan, ServersReady};

/// The file of the launch directory Gemini CLI writes its debug log to.
pub const DEBUG_LOG_FILE: &str = "gemini-debug.log";

/// The variable that turns the debug log on (its path).
pub const DEBUG_LOG_VAR: &str = "GEMINI_DEBUG_LOG_FILE";

/// The line that says the session's setup, the servers' discovery in it, is over.
pub const SESSION_READY: &str = "[STARTUP] StartupProfiler.flush() called";

/// Where a line's message starts in that log: after the second `] ` of `[<time>]
/// [<LEVEL>] <message>` (`DebugLogger.writeToFile`: `[${timestamp}] [${level}] ${message}`,
/// the message `util.format` of its arguments). A message can span lines (an error's stack
/// trace follows `Error during discovery …`, and with `--debug` an MCP server's standard
/// error is logged as `[DEBUG] [MCP STDERR (<name>)]: <text>`): a text counts only where it
/// starts a line's message, so neither a continuation line nor a quoted text says anything;
/// nor does the `Deduplicated silent MCP diagnostic: error:[MCP error] …` line that may
/// repeat a failure.
pub const LOG_MESSAGE_AFTER: usize = 2;

/// Turns the debug log on and sets [`LaunchPlan::servers_ready`]: each server's
/// `Registering notification handlers for server '<name>'` and [`SESSION_READY`] ready;
/// each server's discovery or connection error failed, each at the start of a line's
/// message ([`LOG_MESSAGE_AFTER`]). Nothing without servers.
pub(super) fn wait_for_servers(plan: &mut LaunchPlan) {
    if plan.servers.is_empty() {
        return;
    }
    plan.env.push(EnvVar::new(
        DEBUG_LOG_VAR,
        format!("{}/{DEBUG_LOG_FILE}", plan.launch_dir),
    ));
    let mut ready: Vec<String> = plan
        .servers
        .iter()
        .map(|s| {
            format!(
                "Registering notification handlers for server '{}'",
                s.wire_name
            )
        })
        .collect();
    ready.push(SESSION_READY.to_owned());
    let failed = plan
        .servers
        .iter()
        .flat_map(|s| {
            [
                format!(
                    "[MCP error] Error during discovery for MCP server '{}'",
                    s.wire_name
                ),
                format!(
                    "[MCP error] Error connecting to MCP server '{}'",
                    s.wire_name
                ),
            ]
        })
        .collect();
    plan.servers_ready = Some(ServersReady {
        log: DEBUG_LOG_FILE.to_owned(),
        ready,
        failed,
        message_after: LOG_MESSAGE_AFTER,
        message_separator: "] ".to_owned(),
        settle_ms: 0,
    });
}
