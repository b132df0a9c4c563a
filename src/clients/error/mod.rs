//! The errors of a reviewer launch: [`RenderError`] (a value the room cannot render
//! safely) and [`LaunchError`] (every way the one launch call fails), each message naming the
//! client, the value and how to fix it.

use std::fmt;

use super::{Client, plan};

mod messages;
#[allow(unused_imports, reason = "named in the docs")]
use super::{LaunchContext, ResultDelivery, claude, cursor, root};
#[allow(unused_imports, reason = "named in the docs")]
use crate::allowlist::Policy;
use crate::allowlist::Rejection;

/// A reviewer configuration that cannot be rendered safely.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RenderError {
    /// A value would reach the client holding `${`, which it expands as an environment
    /// variable reference with no escape (or whose expansion is not established, and so is
    /// refused as if it were), so the client would run something else than the plan says.
    Expansion {
        /// The client.
        client: Client,
        /// The MCP server the value belongs to (registry id, or its wire name).
        server: String,
        /// The field, e.g. `command`, `args[1]`, `env.KCAP_FLOW_AGENT_ID`.
        field: String,
        /// What the client does with it, in its room's words (measured on the client the
        /// room names): e.g. `which Claude Code expands as a variable reference and cannot
        /// escape`.
        expands: &'static str,
    },
    /// A launch value that follows an option in argv (`model`, `effort`, `worktree`) starts
    /// with `-`, so the client would read it as an option.
    OptionLike {
        /// The [`LaunchContext`] field.
        field: &'static str,
    },
    /// The reviewer's agent id is blank, so the result channel could not tell whose result
    /// it receives.
    BlankAgentId,
    /// An argument of the plan's argv cannot be passed to the client: longer than
    /// [`MAX_ARG_BYTES`](plan::MAX_ARG_BYTES), or holding a NUL. The clients that take the
    /// prompt in argv (Claude Code, Codex CLI, Antigravity) cannot take such a prompt.
    ArgvUnpassable {
        /// The client.
        client: Client,
        /// The argument is (or holds) the reviewer's prompt.
        prompt: bool,
        /// Its length in bytes.
        bytes: usize,
        /// It holds a NUL, which no argument can pass.
        nul: bool,
    },
    /// The reviewer's prompt starts (after leading white space) with a character that makes
    /// the client run it as a command instead of sending it to the model (Codex CLI's `!`:
    /// [`codex::PROMPT_SHELL_PREFIX`](super::codex::PROMPT_SHELL_PREFIX)).
    PromptIsCommand {
        /// The client.
        client: Client,
        /// The character.
        prefix: char,
        /// What the client does with such a prompt, in its room's words (measured on the
        /// client the room names).
        runs: &'static str,
    },
    /// A launch value (the model) would reach the client in a file whose text the client
    /// expands (OpenCode's `{env:NAME}` and `{file:PATH}` in `opencode.json`:
    /// [`opencode::EXPANDS`](super::opencode::EXPANDS)), so the client would use another
    /// value than the plan says, or send a file or a variable of its own to the model API.
    LaunchValueExpands {
        /// The client.
        client: Client,
        /// The [`LaunchContext`] field, e.g. `model`.
        field: &'static str,
        /// The character that starts the expansion, e.g. `{`.
        marker: char,
        /// What the client does with it, in its room's words (measured on the client the
        /// room names).
        expands: &'static str,
    },
    /// A path given to a [`LaunchRequest`](super::LaunchRequest) is not UTF-8: every client
    /// reads its configuration, and the paths in it, as text.
    NotUtf8 {
        /// The field: `kcap_bin`, `worktree`, `launch_dir` or `cache_dir`.
        field: &'static str,
    },
    /// A [`LaunchContext`] value holds a control or invisible character
    /// ([`crate::text::is_forbidden_char`]: C0 and C1 controls, bidirectional overrides,
    /// zero-width characters), so the client would get, show or log another value than the
    /// one meant. The `prompt` has a rule of its own
    /// ([`is_refused_in_terminal_prompt`](plan::is_refused_in_terminal_prompt), which says
    /// why by path): a client in a terminal (Claude Code, Codex CLI, Antigravity) is refused
    /// a prompt holding a control character other than a line break or a tab, which would
    /// reach its terminal as a key or an escape; invisible characters are kept, and an ACP
    /// client's prompt (a JSON string) may hold any character.
    ForbiddenChar {
        /// The [`LaunchContext`] field (`agent_id`, `server_url`, `result_capability_url`,
        /// `model`, …).
        field: &'static str,
        /// The value.
        value: String,
        /// The first such character in it.
        found: char,
    },
    /// Settings the reviewer's client reads would stop these injected servers from starting
    /// (Claude Code's: [`claude::preflight`]): every veto found, in server order, each naming
    /// its client.
    Vetoed(Vec<super::veto::Veto>),
    /// A configuration file the reviewer's client reads cannot be understood, so whether it
    /// vetoes an injected server is unknown (Claude Code's settings:
    /// [`claude::preflight`]).
    UnreadableConfig {
        /// The client.
        client: Client,
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong, e.g. `is not JSON (…)`.
        problem: String,
    },
    /// A parent directory of the worktree holds an environment file the client loads into
    /// its own environment and every MCP server's whatever the plan says (Gemini CLI's
    /// `.gemini/.env` or `.env`: [`gemini::env_file_preflight`](super::gemini::env_file_preflight); Qwen Code's `.qwen/.env` or
    /// `.env`: [`qwen::env_file_preflight`](super::qwen::env_file_preflight)).
    ParentEnvFile {
        /// The client.
        client: Client,
        /// The file, absolute.
        file: std::path::PathBuf,
    },
    /// A parent directory of the worktree lies in a path of the plan's sandbox, so an
    /// environment file written there after [`RenderError::ParentEnvFile`]'s check would
    /// still reach the client (Gemini CLI, Qwen Code: `gemini_family::readable_parent`).
    ParentInSandbox {
        /// The client.
        client: Client,
        /// The parent directory, absolute.
        dir: std::path::PathBuf,
        /// The sandbox path it lies in.
        path: String,
    },
    /// The client needs this [`LaunchContext`] field as an absolute path, and it is unset,
    /// blank or relative.
    NeedsAbsolute {
        /// The client.
        client: Client,
        /// The field: `worktree` (where the client starts, or the ACP session's `cwd`),
        /// `launch_dir` or `cache_dir`.
        field: &'static str,
    },
    /// Brokered result delivery with a blank capability URL: the result channel could reach
    /// nothing.
    BlankCapabilityUrl,
    /// A borrowed-snapshot review without a review-context URL: the review-context server
    /// would have nothing to read.
    MissingReviewContextUrl,
    /// A launch without a kcap server URL or a kcap binary ([`LaunchContext::is_gated`]) under
    /// [`Policy::Strict`](crate::Policy::Strict): every MCP server, the result channel
    /// included, would be gated off, so the reviewer could not report its result. The
    /// lenient policy launches it without MCP servers, with a warning.
    Gated {
        /// The client.
        client: Client,
    },
    /// The client's isolation from the MCP servers the user or the reviewed repository
    /// configured is not established ([`plan::Isolation::Unverified`]: Cursor, Kiro,
    /// Antigravity), and the caller did not opt in
    /// ([`UnverifiedIsolation::Allow`](super::dispatch::UnverifiedIsolation::Allow)): refused
    /// under either policy.
    UnverifiedIsolation {
        /// The client.
        client: Client,
    },
    /// The client runs with a HOME of its own (Antigravity), so the result channel cannot
    /// reach the daemon directly: the launch needs brokered result delivery
    /// ([`ResultDelivery::Brokered`]).
    NeedsBrokeredDelivery {
        /// The client.
        client: Client,
    },
    /// [`LaunchContext::credentials`] names a variable or file the client's room does not
    /// accept as a credential or provider setting ([`root::CredentialSpec`]), or names one
    /// twice.
    CredentialNotAccepted {
        /// The client.
        client: Client,
        /// The variable or file name.
        name: String,
        /// Whether it was given as a variable or as a file. What the client accepts is its
        /// [`ClientSpec::credentials`](super::spec::ClientSpec::credentials), which the
        /// message names.
        kind: root::CredentialKind,
    },
    /// A credential file's contents cannot be reduced to its credential fields.
    CredentialFile {
        /// The client.
        client: Client,
        /// The file's name in the client's [`root::CredentialSpec`].
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The launch gives a value (`model`, `effort`) the client has no setting for: refused
    /// under [`Policy::Strict`], a warning under [`Policy::Lenient`]
    /// ([`Client::plan`](Client::plan)).
    Unsupported {
        /// The client.
        client: Client,
        /// The [`LaunchContext`] field.
        field: &'static str,
    },
    /// An administrator-managed file the client reads whatever the plan's environment says
    /// exists ([`root::managed_preflight`]): it can veto, add or reconfigure MCP servers,
    /// hooks or permissions, so the reviewer cannot be isolated.
    Managed {
        /// The client.
        client: Client,
        /// The file, absolute.
        file: std::path::PathBuf,
        /// What the client does with it.
        effect: &'static str,
    },
    /// The launch would make the client fetch its vendor's remote managed settings (an
    /// organization administrator's policy, applied above the plan's; Claude Code's
    /// [`remote`](super::claude::remote)): refused under either policy, like [`Managed`].
    ///
    /// [`Managed`]: RenderError::Managed
    RemoteSettings {
        /// The client.
        client: Client,
        /// Where the settings are fetched from.
        source: &'static str,
        /// The ways out.
        fix: &'static str,
    },
    /// The worktree is a directory inside another git repository (it has no `.git` of its
    /// own): the client runs git there, whose configuration (`core.fsmonitor`, filters) and
    /// the repository's hooks (Copilot CLI's `.github/hooks`) are the other repository's,
    /// which no plan removes ([`root::worktree_preflight`]).
    WorktreeInRepository {
        /// The client.
        client: Client,
        /// The other repository's `.git`.
        git: std::path::PathBuf,
    },
    /// The worktree's git configuration sets a key whose value git runs as a command and
    /// that no override switches off, or cannot be read ([`super::git::preflight`]).
    GitConfig(Box<super::git::GitRefusal>),
    /// The launch asks for a door ([`LaunchContext::door`]) and the client's room has no
    /// [`DoorSpec`](super::door::DoorSpec): how its model API goes through the door is not
    /// measured.
    DoorUnsupported {
        /// The client.
        client: Client,
    },
    /// A launch behind the door: a URL the door cannot forward to.
    DoorUpstream {
        /// The client.
        client: Client,
        /// The [`LaunchContext`] field or credential variable that holds it.
        field: &'static str,
        /// The URL as given (empty when none was).
        url: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A launch behind the door: a credential that would enter the reviewer.
    DoorCredential {
        /// The client.
        client: Client,
        /// The credential variable or file.
        name: String,
        /// Why it is refused.
        problem: &'static str,
    },
    /// The daemon's shared cache directory, or what the client keeps in it, could be changed
    /// by another user than root and the daemon's ([`cache::check`](super::cache::check)),
    /// and the client runs the code it finds there.
    UnsafeCache {
        /// The client.
        client: Client,
        /// The cache directory ([`LaunchContext::cache_dir`]).
        cache: std::path::PathBuf,
        /// The unsafe path: the cache directory, a directory above it, or an entry beneath.
        path: std::path::PathBuf,
        /// The client's subdirectory another user may already have changed (the path lies in
        /// it, or is the cache directory): to be removed and filled again.
        tree: Option<std::path::PathBuf>,
        /// What is wrong.
        problem: super::cache::CacheProblem,
    },
    /// The client version the caller read is not one this crate's tests prove
    /// ([`Client::proven_on`]) and `verify` has not passed for it on this machine
    /// ([`super::version`]): refused under [`Policy::Strict`].
    UnprovenVersion {
        /// The client.
        client: Client,
        /// The version number (or the line, when it holds none).
        version: String,
        /// The versions this crate's tests prove.
        proven: &'static [&'static str],
    },
    /// Under [`Policy::Strict`] the client would run built-in tools with effects unasked
    /// (writing files, running commands, the web, other agents: [`ToolKind::has_effects`](
    /// super::tools::ToolKind::has_effects)) and cannot hide them from the model
    /// ([`super::tools`]).
    UnaskedTools {
        /// The client.
        client: Client,
        /// The tools' names, by name (`*`: every built-in tool).
        tools: Vec<String>,
    },
}

impl std::error::Error for RenderError {}

/// Every way a reviewer launch can fail, so a daemon's launch function returns one error
/// type with `?` (a `From` impl for each).
///
/// Each variant is transparent: it displays as the error it holds and forwards that error's
/// [`source`](std::error::Error::source), so a chain printer (`anyhow`'s `{:#}`) shows
/// every cause once. This crate's errors follow one convention: `Display` describes one
/// layer, and the cause it wraps is returned from `source()`, never also displayed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LaunchError {
    /// The strict policy refused an allowlist entry ([`LaunchContext::resolve`]).
    Rejected(Rejection),
    /// A value cannot be rendered safely (the renderers).
    Render(RenderError),
    /// No launch id could be drawn ([`plan::LaunchId::random`]).
    LaunchId(plan::LaunchIdError),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Rejected(e) => e.fmt(f),
            LaunchError::Render(e) => e.fmt(f),
            LaunchError::LaunchId(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaunchError::Rejected(e) => e.source(),
            LaunchError::Render(e) => e.source(),
            LaunchError::LaunchId(e) => e.source(),
        }
    }
}

impl From<Rejection> for LaunchError {
    fn from(e: Rejection) -> Self {
        LaunchError::Rejected(e)
    }
}

impl From<plan::LaunchIdError> for LaunchError {
    fn from(e: plan::LaunchIdError) -> Self {
        LaunchError::LaunchId(e)
    }
}

impl From<RenderError> for LaunchError {
    fn from(e: RenderError) -> Self {
        LaunchError::Render(e)
    }
}
