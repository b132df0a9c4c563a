//! Gemini CLI's built-in tools that run unasked in its reviewer (`--approval-mode yolo`:
//! every tool offered runs without a question), and how its strict plan hides those with
//! effects.
//!
//! Measured on 0.61.0 (2026-12-05, `tests/clients/unasked_tools.rs`): the function
//! declarations of the reviewer's first `streamGenerateContent` request, less the injected
//! servers' `mcp_<wire>_…` tools.
//!
//! Under the strict policy the plan hides the tools with effects with the user settings'
//! `tools.exclude` (`gemini_family`); measured, none of them is offered then.

use crate::clients::tools::Builtin;
use crate::clients::tools::ToolKind::{Agent, Other, Read, Run, Web, Write};

/// Gemini CLI's built-in tools offered to its reviewer's model, by name.
pub const BUILTINS: &[Builtin] = &[
    Builtin::new("activate_skill", Other),
    Builtin::new("glob", Read),
    Builtin::new("google_web_search", Web),
    Builtin::new("grep_search", Read),
    Builtin::new("invoke_agent", Agent),
    Builtin::new("list_background_processes", Run),
    Builtin::new("list_directory", Read),
    Builtin::new("read_background_output", Run),
    Builtin::new("read_file", Read),
    Builtin::new("replace", Write),
    Builtin::new("run_shell_command", Run),
    Builtin::new("update_topic", Other),
    Builtin::new("web_fetch", Web),
    Builtin::new("write_file", Write),
    Builtin::new("write_todos", Other),
];
