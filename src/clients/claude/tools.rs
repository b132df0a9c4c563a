//! Claude Code's built-in tools that run unasked in its reviewer
//! (`--permission-mode bypassPermissions`: every tool offered runs without a question), and
//! how its strict plan hides those with effects.
//!
//! Measured on 2.1.197 and 2.1.332 (2026-12-05, `tests/clients/unasked_tools.rs`): the tools
//! of the reviewer's first model request, less the injected servers' `mcp__…` tools, on each
//! version; 2.1.332 offers most of them deferred, by name in a system message
//! ("The following deferred tools are now available via ToolSearch"), and the list is the
//! union of both versions. `Agent` is not among them: every plan disallows it.
//!
//! Under the strict policy `hide` adds the tools with effects to `--disallowedTools`
//! (comma-separated): measured on both versions, none of them is offered then, and `Glob`
//! and `Grep` are (Claude Code offers them only when `Bash` is not).
//!
//! `CronCreate` writes: called with `durable: true` it makes `<worktree>/.claude/` and
//! writes `scheduled_tasks.json` there ("Persisted to .claude/scheduled_tasks.json"),
//! measured on 2.1.197 and 2.1.332 (2026-12-05, `tests/clients/strict_attacks.rs`; the
//! reviewer's sandbox denies it, `EACCES`, but without the sandbox the file is made). So it
//! is a `Write` tool, hidden under the strict policy. `CronDelete` and `CronList` only read
//! or drop what `CronCreate` made.

use crate::clients::tools::Builtin;
use crate::clients::tools::ToolKind::{Agent, Other, Read, Run, Web, Write};

/// Claude Code's built-in tools offered to its reviewer's model, by name.
pub const BUILTINS: &[Builtin] = &[
    Builtin::new("AskUserQuestion", Other),
    Builtin::new("Bash", Run),
    Builtin::new("CronCreate", Write),
    Builtin::new("CronDelete", Other),
    Builtin::new("CronList", Other),
    Builtin::new("DeferredToolPlaceholder", Other),
    Builtin::new("Edit", Write),
    Builtin::new("EnterPlanMode", Other),
    Builtin::new("EnterWorktree", Write),
    Builtin::new("ExitPlanMode", Other),
    Builtin::new("ExitWorktree", Write),
    Builtin::new("Glob", Read),
    Builtin::new("Grep", Read),
    Builtin::new("ListAgents", Other),
    Builtin::new("Monitor", Run),
    Builtin::new("NotebookEdit", Write),
    Builtin::new("Read", Read),
    Builtin::new("ReportFindings", Other),
    Builtin::new("ScheduleWakeup", Other),
    Builtin::new("SendMessage", Agent),
    Builtin::new("Skill", Other),
    Builtin::new("TaskCreate", Other),
    Builtin::new("TaskGet", Other),
    Builtin::new("TaskList", Other),
    Builtin::new("TaskOutput", Run),
    Builtin::new("TaskStop", Run),
    Builtin::new("TaskUpdate", Other),
    Builtin::new("ToolSearch", Other),
    Builtin::new("WebFetch", Web),
    Builtin::new("WebSearch", Web),
    Builtin::new("Workflow", Agent),
    Builtin::new("Write", Write),
];

/// Adds the built-in tools [`tools::hidden`](crate::clients::tools::hidden) names under
/// `policy` to the argv's `--disallowedTools` list (`Agent`, then each, comma-separated).
pub(crate) fn hide(argv: &mut [String], policy: crate::Policy) {
    let Some(at) = argv.iter().position(|a| a == "--disallowedTools") else {
        return;
    };
    for name in crate::clients::tools::hidden(&super::SPEC, policy) {
        argv[at + 1].push(',');
        argv[at + 1].push_str(name);
    }
}
