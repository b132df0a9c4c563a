//! Codex CLI's built-in tools that run unasked in its reviewer (`--ask-for-approval never`:
//! every tool offered runs without a question; its own sandbox is off, the reviewer's
//! sandbox confines the commands), and how its strict plan hides those with effects.
//!
//! Measured on 0.169.0 and 0.171.0 (2026-12-05, `tests/clients/unasked_tools.rs`): the tools
//! of the reviewer's first Responses API request, less the injected servers' `mcp__<id>`
//! namespaces; the same on both versions. A namespace (`mcp__codex_tui`: Codex's own task
//! threads; `multi_agent_v1`: sub-agents) is one entry, by its name; the hosted
//! `{"type":"web_search"}` tool by its type.
//!
//! Under the strict policy `hide` turns off what offers the tools with effects
//! ([`SWITCHES`]); measured on both versions, none of them is offered then.

use crate::clients::tools::Builtin;
use crate::clients::tools::ToolKind::{Agent, Other, Read, Run, Web};

/// Codex CLI's built-in tools offered to its reviewer's model, by name.
pub const BUILTINS: &[Builtin] = &[
    Builtin::new("create_goal", Other),
    Builtin::new("exec_command", Run),
    Builtin::new("get_goal", Other),
    Builtin::new("list_mcp_resource_templates", Read),
    Builtin::new("list_mcp_resources", Read),
    Builtin::new("mcp__codex_tui", Agent),
    Builtin::new("multi_agent_v1", Agent),
    Builtin::new("read_mcp_resource", Read),
    Builtin::new("request_user_input", Other),
    Builtin::new("update_goal", Other),
    Builtin::new("view_image", Read),
    Builtin::new("web_search", Web),
    Builtin::new("write_stdin", Run),
];

/// The reviewer argv's switches that keep each of [`BUILTINS`] with effects from the model
/// (measured on 0.169.0 and 0.171.0): `--disable unified_exec` and `--disable shell_tool`
/// (`exec_command`, `write_stdin` and the older `shell`), `--disable multi_agent`, the
/// hosted web search `web_search = "disabled"`, and for the TUI's own task-thread tools
/// (`mcp__codex_tui`: create, fork, message and wait on other Codex tasks) a disabled MCP
/// server of that name, which Codex lets own the namespace ("a configured MCP server already
/// owns the TUI tools namespace"): it starts nothing.
pub const SWITCHES: &[(&str, &[&str])] = &[
    (
        "exec_command",
        &["--disable", "unified_exec", "--disable", "shell_tool"],
    ),
    ("mcp__codex_tui", &["-c", CODEX_TUI_OFF]),
    ("multi_agent_v1", &["--disable", "multi_agent"]),
    ("web_search", &["-c", "web_search=\"disabled\""]),
    (
        "write_stdin",
        &["--disable", "unified_exec", "--disable", "shell_tool"],
    ),
];

/// The `-c` override that gives the `codex_tui` namespace to a disabled MCP server.
pub const CODEX_TUI_OFF: &str = "mcp_servers.codex_tui={command=\"/bin/false\",enabled=false}";

/// Inserts before `--no-alt-screen` the [`SWITCHES`] of each built-in tool
/// [`tools::hidden`](crate::clients::tools::hidden) names under `policy`, each switch once.
pub(crate) fn hide(argv: &mut Vec<String>, policy: crate::Policy) {
    let mut switches: Vec<[&str; 2]> = Vec::new();
    for name in crate::clients::tools::hidden(&super::SPEC, policy) {
        let (_, args) = SWITCHES
            .iter()
            .find(|(tool, _)| *tool == name)
            .expect("every Codex built-in tool with effects has a switch (a unit test)");
        for pair in args.chunks_exact(2) {
            let pair = [pair[0], pair[1]];
            if !switches.contains(&pair) {
                switches.push(pair);
            }
        }
    }
    let at = argv
        .iter()
        .position(|a| a == "--no-alt-screen")
        .unwrap_or(argv.len());
    argv.splice(at..at, switches.into_iter().flatten().map(str::to_owned));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_with_effects_has_a_switch_and_no_other_does() {
        let with_effects: Vec<&str> = BUILTINS
            .iter()
            .filter(|b| b.kind.has_effects())
            .map(|b| b.name)
            .collect();
        let switched: Vec<&str> = SWITCHES.iter().map(|(t, _)| *t).collect();
        assert_eq!(switched, with_effects);
    }
}
