//! What the kcap daemon does with a launch command: read the JSON payload, resolve its MCP
//! allowlist against the compiled-in registry, and render the reviewer argv for Claude Code
//! or Codex. It prints the argv, one element per line; it spawns nothing.
//!
//! ```sh
//! cargo run --example daemon_launch -- claude examples/data/launch.json
//! cargo run --example daemon_launch -- codex examples/data/launch.json [INVENTORY.json]
//! ```
//!
//! The Codex inventory is saved `codex mcp list --json` output; a daemon would call
//! `kcap_mcp_registry::clients::codex::inventory::codex_inventory` instead.

use std::process::ExitCode;

use kcap_mcp_registry::clients::claude::claude_reviewer_args;
use kcap_mcp_registry::clients::codex::codex_reviewer_args;
use kcap_mcp_registry::clients::codex::inventory::parse_inventory;
use kcap_mcp_registry::{LaunchCommand, LaunchContext, Policy};

/// The daemon's own settings (from its configuration in a real daemon).
const SERVER_URL: &str = "http://127.0.0.1:5100";
const KCAP_BIN: &str = "/usr/local/bin/kcap";
const WORKTREE: &str = "/srv/kcap/worktrees/review-42";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (client, payload, inventory) = match args.as_slice() {
        [c, p] => (c.as_str(), p, None),
        [c, p, i] if c == "codex" => (c.as_str(), p, Some(i)),
        _ => {
            eprintln!("usage: daemon_launch claude|codex LAUNCH.json [CODEX_INVENTORY.json]");
            return ExitCode::from(2);
        }
    };
    match run(client, payload, inventory) {
        Ok(argv) => {
            for a in argv {
                println!("{a}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    client: &str,
    payload: &str,
    inventory: Option<&String>,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let cmd: LaunchCommand = serde_json::from_str(&std::fs::read_to_string(payload)?)?;
    let mut ctx = LaunchContext::from_command(cmd, SERVER_URL, KCAP_BIN);
    ctx.worktree = Some(WORKTREE.into());
    // The daemon's default policy: skip what cannot be materialized, and log it.
    let resolution = ctx.resolve(Policy::Lenient)?;
    for skipped in resolution.skipped() {
        eprintln!("warning: agent {:?}: {skipped}", ctx.agent_id);
    }
    Ok(match client {
        "claude" => claude_reviewer_args(&ctx, &resolution)?,
        "codex" => {
            let inventory = match inventory {
                Some(path) => parse_inventory(&std::fs::read_to_string(path)?)?,
                None => Vec::new(),
            };
            codex_reviewer_args(&ctx, &resolution, &inventory)?
        }
        other => return Err(format!("unknown client {other:?}: use claude or codex").into()),
    })
}
