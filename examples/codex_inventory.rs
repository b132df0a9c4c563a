//! Times what a Codex reviewer launch pays for its inventory (BENCHMARKS.md): runs one of
//! the inventory sources against a Codex binary, with the current environment.
//!
//! ```sh
//! cargo run --release --example codex_inventory -- CODEX_BIN config-read|mcp-list|merged
//! ```

use std::process::Command;

use kcap_mcp_registry::clients::codex::app_server::config_read_from;
use kcap_mcp_registry::clients::codex::inventory::{INVENTORY_TIMEOUT, codex_inventory_with};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bin, mode] = args.as_slice() else {
        return Err("usage: codex_inventory CODEX_BIN config-read|mcp-list|merged".into());
    };
    let n = match mode.as_str() {
        "config-read" => config_read_from(Command::new(bin), INVENTORY_TIMEOUT)?.len(),
        "mcp-list" => {
            let out = Command::new(bin).args(["mcp", "list", "--json"]).output()?;
            let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
            list.len()
        }
        "merged" => codex_inventory_with(|| Command::new(bin), INVENTORY_TIMEOUT)?.len(),
        other => return Err(format!("unknown mode {other:?}").into()),
    };
    println!("{n} servers");
    Ok(())
}
