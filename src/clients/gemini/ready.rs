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
//! error -32000: Connection closed`) or `Error connecting to MCP server '<name>'` when it
//! failed (`McpClientManager.emitDiagnostic`, which ACP mode shows nowhere else), and
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

/// Turns the debug log on and sets [`LaunchPlan::servers_ready`]: each server's
/// `Registering notification handlers for server '<name>'` and [`SESSION_READY`] ready;
/// each server's discovery or connection error failed. Nothing without servers.
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
                format!("Error during discovery for MCP server '{}'", s.wire_name),
                format!("Error connecting to MCP server '{}'", s.wire_name),
            ]
        })
        .collect();
    plan.servers_ready = Some(ServersReady {
        log: DEBUG_LOG_FILE.to_owned(),
        ready,
        failed,
    });
}
