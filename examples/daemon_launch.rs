//! What the kcap daemon does with a launch command, for every client through the one call
//! (`Client::plan`): read the JSON payload, give it the daemon's own settings (server URL,
//! kcap binary, worktree, per-launch directory), and render each client's launch plan. It
//! prints, per client, the warnings and the plan as JSON, or the error that refuses the
//! launch; it spawns nothing.
//!
//! ```sh
//! cargo run --example daemon_launch -- examples/data/launch.json [LAUNCH_ID]
//! ```
//!
//! `LAUNCH_ID` (16 hex digits) fixes the per-launch id of the clients that alias server names,
//! and with it OpenCode's server password (all zeros), for reproducible output; a daemon
//! leaves it out, so each launch draws its own of both.

use std::process::ExitCode;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchSecret};
use kcap_mcp_registry::{LaunchCommand, LaunchContext, Policy};

/// The daemon's own settings (from its configuration in a real daemon).
const SERVER_URL: &str = "http://127.0.0.1:5100";
const KCAP_BIN: &str = "/usr/local/bin/kcap";
const WORKTREE: &str = "/srv/kcap/worktrees/review-42";
const LAUNCHES: &str = "/srv/kcap/launches";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (payload, launch_id) = match args.as_slice() {
        [p] => (p, None),
        [p, id] => (p, Some(id)),
        _ => {
            eprintln!("usage: daemon_launch LAUNCH.json [LAUNCH_ID]");
            return ExitCode::from(2);
        }
    };
    match run(payload, launch_id) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(payload: &str, launch_id: Option<&String>) -> Result<(), Box<dyn std::error::Error>> {
    let cmd: LaunchCommand = serde_json::from_str(&std::fs::read_to_string(payload)?)?;
    let mut ctx = LaunchContext::from_command(cmd, SERVER_URL, KCAP_BIN);
    ctx.worktree = Some(WORKTREE.into());
    ctx.launch_dir = Some(format!("{LAUNCHES}/{}", ctx.agent_id));
    // The daemon's default policy: skip what cannot be materialized, and log it.
    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.launch_id = launch_id.map(|id| LaunchId::from_hex(id)).transpose()?;
    inputs.launch_secret = launch_id.map(|_| LaunchSecret::from_bytes([0; 16]));
    for client in Client::ALL {
        println!("== {client}");
        match client.plan(&ctx, &inputs) {
            Ok(launch) => {
                for warning in launch.warnings {
                    println!("warning: {warning}");
                }
                print!("{}", launch.plan.to_json());
            }
            Err(e) => println!("error: {e}"),
        }
    }
    Ok(())
}
