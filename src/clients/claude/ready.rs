//! Claude Code's first turn: its servers listed before the prompt goes out.
//!
//! Measured on 2.1.197 and 2.1.328 (2026-12-05, `tests/clients/first_turn.rs`: a stand-in
//! server that answers `initialize` after 5 s, a stand-in model API recording the requests):
//! in its terminal, Claude Code sends the prompt of its argv about a second after it starts,
//! while its MCP servers are still connecting, and the first request offers none of their
//! tools (anthropics/claude-code#76239). Neither `MCP_CONNECTION_NONBLOCKING=false` nor a
//! server's `"alwaysLoad": true` changes that in the terminal (both make only `--print` wait:
//! `mFc` in the 2.1.197 bundle).
//!
//! What it does tell: with `--debug-file <path>` it writes a debug log, and the terminal
//! UI's connection handler writes `MCP server "<name>": Channel notifications skipped: …`
//! (or `… registered`) once a server's connection result, its tools with it, is in the
//! session's state; `MCP server "<name>": Connection failed …` when it never will be (an exit,
//! `MCP_TIMEOUT`'s 30 s); `[REPL:mount] REPL mounted` once the prompt input exists, and
//! `DECSTBM: …` once its probe of the terminal is over ([`INPUT_READY`]). Same texts on both
//! versions. So the plan turns that log on and has the executor type the
//! prompt ([`TypedPrompt`]); with it, a server answering after 5 s is in the first request
//! on both versions.

use crate::clients::RenderError;
use crate::clients::plan::{LaunchPlan, TypedPrompt};

/// The file of the launch directory Claude Code writes its debug log to (`--debug-file`).
pub const DEBUG_LOG_FILE: &str = "claude-debug.log";

/// Where a line's message starts in that log: after the first `] ` of `<time> [<LEVEL>]
/// <message>` (2.1.197 and 2.1.328). It also quotes an MCP server's standard error
/// (`[ERROR] MCP server "x" Server stderr: …`) and the worktree's git remote URL (2.1.328:
/// `[DEBUG] Git remote URL: …`), and a quoted `Connection failed` stopped a healthy launch
/// when a text counted anywhere in a line
/// (`first_turn::claude_a_quoted_failure_does_not_stop_the_launch`).
pub const LOG_MESSAGE_AFTER: usize = 1;

/// What typed input that starts with one of these characters does in Claude Code's
/// terminal UI instead of being sent as a prompt (measured on 2.1.197, 2026-12-05,
/// `first_turn::claude_a_typed_prompt_is_only_a_prompt`: `!touch F` typed ran `touch F` in
/// its bash mode, with no model request; `/x` is a slash command). The same text in its
/// argv was sent to the model. `#`, `&` and `@` typed were sent as prompts.
pub const COMMAND_PREFIXES: [(char, &str); 2] = [
    (
        '!',
        "which Claude Code's terminal runs as a shell command (its bash mode) when typed",
    ),
    (
        '/',
        "which Claude Code's terminal runs as a slash command when typed",
    ),
];

/// The log texts that say the terminal UI takes input: its prompt input is mounted, and
/// its probe of the terminal (it writes queries and reads the answers from its input for a
/// while) is over, `DECSTBM: …` being the probe's last line on both versions (2.1.197:
/// `XTVERSION`, `DECRQM(2026)`, `DECSTBM`; 2.1.328: `XTVERSION`, terminal capabilities,
/// `DECSTBM`; 100–150 ms after the mount). A prompt typed between the mount and the end of
/// the probe was lost now and then: with no MCP server to wait for, 2.1.197 sent no request
/// in 2 of 5 runs while other reviewers started (`.ci/run`, 8 test threads).
pub const INPUT_READY: [&str; 2] = ["[REPL:mount] REPL mounted", "DECSTBM: "];

/// Moves `plan`'s argv prompt (after `--`) into [`LaunchPlan::typed_prompt`], typed once
/// every server of [`LaunchPlan::servers`] is ready, and turns the debug log on. Nothing
/// happens without a prompt.
///
/// # Errors
/// [`RenderError::ForbiddenChar`] for a prompt holding a control character other than a
/// line break or a tab: typed into the terminal, it would be a key (ESC ends the paste,
/// and what follows it would act on the reviewer's input line);
/// [`RenderError::PromptIsCommand`] for one that starts, after white space, with one of
/// [`COMMAND_PREFIXES`].
pub(super) fn type_when_ready(plan: &mut LaunchPlan) -> Result<(), RenderError> {
    let Some(text) = plan.take_argv_prompt("--") else {
        return Ok(());
    };
    let first = text.trim_start().chars().next();
    if let Some(&(prefix, runs)) = COMMAND_PREFIXES.iter().find(|(c, _)| Some(*c) == first) {
        return Err(RenderError::PromptIsCommand {
            client: crate::clients::Client::Claude,
            prefix,
            runs,
        });
    }
    if let Some(found) = text
        .chars()
        .find(|&c| crate::clients::plan::is_refused_in_terminal_prompt(c))
    {
        return Err(RenderError::ForbiddenChar {
            field: "prompt",
            value: text,
            found,
        });
    }
    plan.argv.extend([
        "--debug-file".to_owned(),
        format!("{}/{DEBUG_LOG_FILE}", plan.launch_dir),
    ]);
    let each = |what: &str| {
        plan.servers
            .iter()
            .map(|s| format!("MCP server \"{}\": {what}", s.wire_name))
            .collect::<Vec<_>>()
    };
    let mut ready: Vec<String> = INPUT_READY.map(str::to_owned).into();
    ready.extend(each("Channel notifications"));
    plan.typed_prompt = Some(TypedPrompt {
        text,
        log: DEBUG_LOG_FILE.to_owned(),
        ready,
        failed: each("Connection failed"),
        message_after: LOG_MESSAGE_AFTER,
    });
    Ok(())
}
