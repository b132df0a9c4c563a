//! `render claude|codex`: the reviewer argv for a launch, as an operator previews it.
//! Builds a [`LaunchContext`] from a launch command JSON and command-line values
//! ([`launch_context`]), names every skipped allowlist entry ([`skip_warnings`]), and prints
//! the argv in one of three forms ([`format_argv`]).

use std::fmt;
use std::io::Read as _;
use std::path::Path;

use crate::allowlist::Policy;
use crate::clients::LaunchContext;
use crate::wire::LaunchCommand;

/// The launch values given on the command line; each one that is set overrides the launch
/// command's field of the same meaning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchOverrides {
    /// `--server-url`.
    pub server_url: Option<String>,
    /// `--kcap-bin` (the kcap binary).
    pub kcap_bin: Option<String>,
    /// `--agent-id`.
    pub agent_id: Option<String>,
    /// `--allowlist`, every comma-separated entry of every occurrence, in order.
    pub allowlist: Option<Vec<String>>,
    /// `--model`.
    pub model: Option<String>,
    /// `--effort`.
    pub effort: Option<String>,
    /// `--prompt`.
    pub prompt: Option<String>,
    /// `--worktree`.
    pub worktree: Option<String>,
    /// `--launch-dir`.
    pub launch_dir: Option<String>,
}

/// The [`LaunchContext`] for `launch` (the launch command JSON, if given) with `overrides`
/// applied: a value given on the command line replaces the launch command's.
pub fn launch_context(launch: Option<LaunchCommand>, overrides: LaunchOverrides) -> LaunchContext {
    let launch = launch.unwrap_or_default();
    LaunchContext {
        server_url: overrides.server_url,
        kcap_bin: overrides.kcap_bin,
        agent_id: overrides.agent_id.unwrap_or(launch.agent_id),
        mcp_allowlist: overrides
            .allowlist
            .map(|a| a.into_iter().map(Some).collect())
            .or(launch.mcp_allowlist),
        model: overrides.model.or(launch.model),
        effort: overrides.effort.or(launch.effort),
        prompt: overrides.prompt.or(launch.prompt),
        worktree: overrides.worktree,
        launch_dir: overrides.launch_dir,
    }
}

/// One warning line per allowlist entry `ctx` skips under `policy`, naming the entry
/// (escaped) and the agent id (escaped): `agent "a1": MCP allowlist entry 1 "kcap-flows"
/// skipped: can start flows (recursion guard)`. Empty when the strict policy rejects the
/// allowlist (the rejection is the error).
pub fn skip_warnings(ctx: &LaunchContext, policy: Policy) -> Vec<String> {
    let Ok(resolution) = ctx.resolve(policy) else {
        return Vec::new();
    };
    resolution
        .skipped()
        .map(|s| format!("agent \"{}\": {s}", ctx.agent_id.escape_debug()))
        .collect()
}

/// How `render` prints the argv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgvFormat {
    /// One argument per line. Ambiguous for arguments holding a newline: use `Json` or
    /// `Shell` for those.
    Lines,
    /// A compact JSON array of strings, then a newline.
    Json,
    /// One line of POSIX shell words (quoted by the `shlex` crate), then a newline: `sh -c
    /// 'printf "%s\n" "$@"' _ <line>` gives back the argv.
    Shell,
}

/// An argv that cannot be printed in the chosen form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgvError {
    /// The position of the offending argument, from 0.
    pub index: usize,
}

impl fmt::Display for ArgvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "argument {} contains a NUL character, which no shell word or process argument can carry; \
             remove it from the launch values",
            self.index
        )
    }
}

impl std::error::Error for ArgvError {}

/// `args` in `format`, ending in a newline.
///
/// # Errors
/// [`ArgvError`] for [`ArgvFormat::Shell`] when an argument contains NUL.
pub fn format_argv(args: &[String], format: ArgvFormat) -> Result<String, ArgvError> {
    Ok(match format {
        ArgvFormat::Lines => args.iter().map(|a| format!("{a}\n")).collect(),
        ArgvFormat::Json => {
            let mut out = serde_json::to_string(args).expect("strings serialize");
            out.push('\n');
            out
        }
        ArgvFormat::Shell => {
            if let Some(index) = args.iter().position(|a| a.contains('\0')) {
                return Err(ArgvError { index });
            }
            let mut out = shlex::try_join(args.iter().map(String::as_str))
                .map_err(|_| ArgvError { index: 0 })?;
            out.push('\n');
            out
        }
    })
}

/// Reads `path` as UTF-8 text without one leading byte order mark
/// ([`crate::decode::strip_bom`]); `-` reads standard input.
///
/// # Errors
/// The I/O error, including invalid UTF-8.
pub fn read_input(path: &Path) -> std::io::Result<String> {
    let s = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s
    } else {
        std::fs::read_to_string(path)?
    };
    match crate::decode::strip_bom(&s).len() {
        n if n == s.len() => Ok(s),
        n => Ok(s[s.len() - n..].to_string()),
    }
}
