//! Writes a synthetic, valid MCP server registry for the scaling benchmarks.
//!
//! ```sh
//! cargo run --example gen_registry -- N DIR
//! ```
//!
//! Writes `N` registry files (`DIR/<id>.toml`) plus the reserved result channel
//! `DIR/kcap-flow-result.toml`, so `DIR` then holds `N + 1` files. The output is
//! deterministic. Entries vary the way real ones do: ids of 9 to 40 bytes, descriptions of
//! 40 to 160 characters, zero to six tools, every 25th entry starts flows, every 3rd is
//! read-only with unattended-safe tools, every 4th needs the project directory, and an entry
//! whose tool names would not fit an aliasing client's limit with its id (Gemini's
//! `mcp_<id>-<16 hex>_<tool>` within 63) gets a short `alias` (`s<N>`). `DIR` is
//! created if needed and must not already hold `.toml` files.
//!
//! Build against it with `KCAP_MCP_REGISTRY_DIR=DIR cargo build`, check it with
//! `kcap-mcp-registry check DIR`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

const WORDS: [&str; 16] = [
    "review",
    "sessions",
    "memory",
    "analytics",
    "workitems",
    "search",
    "docs",
    "tickets",
    "builds",
    "deploys",
    "metrics",
    "logs",
    "traces",
    "alerts",
    "secrets-audit",
    "dependency-graph",
];

const TOOL_VERBS: [&str; 6] = ["get", "list", "search", "summarize", "diff", "explain"];

/// The TOML text of synthetic entry `i` and its id.
pub fn entry(i: usize) -> (String, String) {
    let word = WORDS[i % WORDS.len()];
    let id = if i % 7 == 0 {
        format!("syn-{i}-{word}-{}", WORDS[(i / 7) % WORDS.len()])
    } else {
        format!("syn-{i}-{word}")
    };
    let starts_flows = i % 25 == 0;
    let read_only = !starts_flows && i % 3 == 0;
    let mut s = String::new();
    writeln!(s, "# Synthetic entry {i} (examples/gen_registry.rs).").unwrap();
    writeln!(s, "id = \"{id}\"").unwrap();
    let description = format!(
        "Synthetic {word} server number {i}, serving project data to reviewers{}.",
        " and to the flows that start them".repeat(i % 3)
    );
    writeln!(s, "description = \"{description}\"").unwrap();
    writeln!(
        s,
        "args = [\"mcp\", \"{word}\", \"--shard\", \"{}\"]",
        i % 97
    )
    .unwrap();
    writeln!(s, "starts_flows = {starts_flows}").unwrap();
    if read_only {
        writeln!(s, "read_only = true").unwrap();
    }
    if i % 4 == 0 {
        writeln!(s, "needs_project_cwd = true").unwrap();
    }
    let tools: Vec<String> = (0..i % 7)
        .map(|t| {
            format!(
                "{}_{}_{t}",
                TOOL_VERBS[t % TOOL_VERBS.len()],
                word.replace('-', "_")
            )
        })
        .collect();
    // Rule `tool-name-length`: on an aliasing client the id is the stem of a per-launch name.
    if tools.iter().any(|t| {
        kcap_mcp_registry::ALIASING_CLIENTS
            .iter()
            .any(|c| c.aliased_len(&id, t) > c.max_len)
    }) {
        writeln!(s, "alias = \"s{i}\"").unwrap();
    }
    writeln!(s, "\n[env]\nKCAP_URL = \"server_url\"").unwrap();
    for tool in &tools {
        writeln!(s, "\n[[tools]]\nname = \"{tool}\"").unwrap();
        if read_only {
            writeln!(s, "unattended_safe = true").unwrap();
        }
    }
    (id, s)
}

/// The reserved result channel, as in the bundled registry.
pub const RESULT_CHANNEL: &str = r#"id = "kcap-flow-result"
description = "Result channel through which a reviewer submits its verdict and messages back to its flow."
args = ["mcp", "flow-result"]
starts_flows = false
allowlistable = false
inject = "always"

[env]
KCAP_URL = "server_url"
KCAP_FLOW_CAPABILITY_URL = "result_capability_url"
KCAP_FLOW_AGENT_ID = "agent_id"

[[tools]]
name = "submit_review_result"
unattended_safe = true

[[tools]]
name = "send_flow_message"
unattended_safe = true
"#;

/// Writes `n` synthetic entries and the result channel into `dir`.
///
/// # Errors
/// A message naming the path when `dir` already holds `.toml` files or a write fails.
pub fn write_registry(n: usize, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let existing = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .any(|f| f.path().extension().is_some_and(|e| e == "toml"));
    if existing {
        return Err(format!(
            "{} already holds .toml files; give an empty or new directory",
            dir.display()
        ));
    }
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write("kcap-flow-result.toml", RESULT_CHANNEL)?;
    for i in 0..n {
        let (id, text) = entry(i);
        write(&format!("{id}.toml"), &text)?;
    }
    Ok(())
}

#[allow(dead_code)] // Not called when tests include this file as a module.
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(dir), None) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("usage: cargo run --example gen_registry -- N DIR");
        return ExitCode::from(2);
    };
    let Ok(n) = n.replace(['_', ','], "").parse::<usize>() else {
        eprintln!("error: N must be a non-negative integer, got `{n}`");
        return ExitCode::from(2);
    };
    match write_registry(n, Path::new(dir)) {
        Ok(()) => {
            println!("wrote {} registry files into {dir}", n + 1);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
