//! Qwen Code's built-in tools that run unasked in its reviewer (`--approval-mode yolo`:
//! every tool offered runs without a question), and how its strict plan hides those with
//! effects.
//!
//! Measured on 0.24.4 (2026-12-05, `tests/clients/unasked_tools.rs`): the function tools of
//! the reviewer's first Chat Completions request, less the injected servers'
//! `mcp__<wire>__…` tools.
//!
//! Under the strict policy the plan hides the tools with effects with the user settings'
//! `tools.exclude` (`gemini_family`); measured, none of them is offered then.

use crate::clients::tools::Builtin;
use crate::clients::tools::ToolKind::{Agent, Other, Read, Run, Web, Write};

/// Qwen Code's built-in tools offered to its reviewer's model, by name.
pub const BUILTINS: &[Builtin] = &[
    Builtin::new("agent", Agent),
    Builtin::new("ask_user_question", Other),
    Builtin::new("cron_create", Other),
    Builtin::new("cron_delete", Other),
    Builtin::new("cron_list", Other),
    Builtin::new("edit", Write),
    Builtin::new("enter_plan_mode", Other),
    Builtin::new("enter_worktree", Write),
    Builtin::new("exit_plan_mode", Other),
    Builtin::new("exit_worktree", Write),
    Builtin::new("get_goal", Other),
    Builtin::new("glob", Read),
    Builtin::new("grep_search", Read),
    Builtin::new("list_agents", Other),
    Builtin::new("loop_wakeup", Other),
    Builtin::new("monitor", Run),
    Builtin::new("notebook_edit", Write),
    Builtin::new("read_file", Read),
    Builtin::new("read_mcp_resource", Read),
    Builtin::new("record_artifact", Write),
    Builtin::new("report_findings", Other),
    Builtin::new("run_shell_command", Run),
    Builtin::new("send_message", Agent),
    Builtin::new("skill", Other),
    Builtin::new("task_stop", Run),
    Builtin::new("update_goal", Other),
    Builtin::new("web_fetch", Web),
    Builtin::new("write_file", Write),
    Builtin::new("zoom_image", Read),
];
