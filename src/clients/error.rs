//! The errors of a reviewer launch: [`RenderError`] (a value the room cannot render
//! safely) and [`LaunchError`] (every way the one launch call fails), each message naming the
//! client, the value and how to fix it.

use std::fmt;

use super::{Client, plan};
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
    /// one meant.
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
    /// The client's isolation from the MCP servers the user or the reviewed repository
    /// configured is not established ([`plan::Isolation::Unverified`]: Cursor), and the
    /// strict policy renders it only when the caller opts in
    /// ([`UnverifiedIsolation::Allow`](super::dispatch::UnverifiedIsolation::Allow)).
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
}

impl RenderError {
    /// The messages of the door's refusals, of a worktree in another repository and of remote
    /// managed settings; `None` for another error.
    fn fmt_door(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        Some(match self {
            RenderError::DoorUnsupported { client } => write!(
                f,
                "cannot put the {} reviewer behind the door: how its model API goes through \
                 the door is not measured; launch it without the door",
                client.display_name()
            ),
            RenderError::DoorUpstream {
                client,
                field,
                url,
                problem,
            } => {
                let (shown, hint) = match url.is_empty() {
                    true => (
                        String::new(),
                        "; hand it over as a credential, an http:// or https:// URL (the CLI: \
                         `--credential NAME`, its value from the environment)",
                    ),
                    false => (format!(" \"{}\"", url.escape_debug()), ""),
                };
                write!(
                    f,
                    "cannot put the {} reviewer behind the door: `{field}`{shown} {problem}{hint}",
                    client.display_name()
                )
            }
            RenderError::DoorCredential {
                client,
                name,
                problem,
            } => write!(
                f,
                "cannot put the {} reviewer behind the door: credential `{name}` {problem}; \
                 hand over the model key as one of {}",
                client.display_name(),
                client
                    .spec()
                    .door
                    .iter()
                    .flat_map(|d| {
                        let vars = d.keys.iter().map(|k| format!("`{}`", k.var));
                        let files = (d.key_files.iter())
                            .map(|k| format!("`{}` (its `{}`)", k.file, k.field));
                        vars.chain(files)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            RenderError::WorktreeInRepository { client, git } => write!(
                f,
                "cannot render the {client} launch: its worktree has no .git of its own and lies \
                 in the repository of {}: the client would run git with that repository's \
                 configuration and read its hooks, which no plan removes; give the reviewer a \
                 checkout of its own (`git worktree add`, a clone) or a directory outside any \
                 repository",
                git.display()
            ),
            RenderError::RemoteSettings {
                client,
                source,
                fix,
            } => write!(
                f,
                "cannot isolate the {client} reviewer: with this credential at the default API \
                 endpoint {client} fetches its remote managed settings from {source} when it \
                 starts, an administrator's policy the plan can neither see nor keep out; {fix}"
            ),
            _ => return None,
        })
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::Expansion {
                client,
                server,
                field,
                expands,
            } => write!(
                f,
                "cannot render the {} launch: `{server}.{field}` contains `${{`, {expands}; \
                 remove `${{` from that value",
                client.display_name()
            ),
            RenderError::BlankAgentId => f.write_str(
                "the reviewer's agent id is blank, and the result channel needs it \
                 (KCAP_FLOW_AGENT_ID); give the launch its agent id",
            ),
            RenderError::ArgvUnpassable {
                client,
                prompt,
                bytes,
                nul,
            } => fmt_argv_unpassable(*client, *prompt, *bytes, *nul, f),
            RenderError::PromptIsCommand { .. } | RenderError::LaunchValueExpands { .. } => {
                self.fmt_launch_value(f).unwrap_or(Ok(()))
            }
            RenderError::DoorUnsupported { .. }
            | RenderError::DoorUpstream { .. }
            | RenderError::DoorCredential { .. } => self.fmt_door(f).unwrap_or(Ok(())),
            RenderError::NotUtf8 { field } => write!(
                f,
                "the reviewer's `{field}` is not UTF-8, and the client reads it as text; use a \
                 path of UTF-8 characters"
            ),
            RenderError::ForbiddenChar {
                field,
                value,
                found,
            } => fmt_forbidden_char(field, value, *found, f),
            RenderError::OptionLike { field } => write!(
                f,
                "the reviewer's `{field}` starts with `-`, so the client would read it as an \
                 option; use a value that does not start with `-`"
            ),
            RenderError::ParentEnvFile { client, file } => write!(
                f,
                "cannot isolate the {client} reviewer: {} exists in a parent directory of the \
                 worktree, and {client} loads the first environment file it finds from the \
                 worktree up into its own environment and every MCP server's, adding variables \
                 the launch plan did not set; remove it, or put the worktree where no parent \
                 directory has one",
                crate::text::ShownPath(file)
            ),
            RenderError::NeedsAbsolute { client, field } => fmt_needs_absolute(f, *client, field),
            RenderError::BlankCapabilityUrl => f.write_str(
                "brokered result delivery needs the result channel's capability URL \
                 (KCAP_FLOW_CAPABILITY_URL), but it is blank; give the launch its capability URL",
            ),
            RenderError::MissingReviewContextUrl => f.write_str(
                "a borrowed-snapshot review needs the review-context URL \
                 (KCAP_REVIEW_CONTEXT_URL of its review-context server), but none is set; \
                 give the launch its review-context URL",
            ),
            RenderError::UnverifiedIsolation { client } => fmt_unverified(*client, f),
            RenderError::UnprovenVersion { .. } => super::version::fmt_unproven(self, f),
            RenderError::NeedsBrokeredDelivery { client } => fmt_needs_brokered(*client, f),
            RenderError::Vetoed(vetoes) => super::veto::fmt_vetoes(vetoes, f),
            RenderError::GitConfig(refusal) => refusal.fmt(f),
            RenderError::CredentialNotAccepted { client, name, kind } => {
                fmt_credential_not_accepted(*client, name, *kind, f)
            }
            RenderError::CredentialFile {
                client,
                name,
                problem,
            } => fmt_credential_file(*client, name, problem, f),
            RenderError::Unsupported { client, field } => write!(
                f,
                "the {client} launch has no setting for the reviewer's `{field}`, so it would be \
                 dropped; leave it out for {client}, or use the lenient policy to launch without it"
            ),
            RenderError::Managed {
                client,
                file,
                effect,
            } => fmt_managed(*client, file, effect, f),
            RenderError::RemoteSettings { .. } | RenderError::WorktreeInRepository { .. } => {
                self.fmt_door(f).unwrap_or(Ok(()))
            }
            RenderError::UnreadableConfig {
                client,
                file,
                problem,
            } => write!(
                f,
                "cannot tell which MCP servers {} would start: {} {problem}; fix or remove it",
                client.display_name(),
                crate::text::ShownPath(file)
            ),
        }
    }
}

impl RenderError {
    /// The message of a launch value the client would not take as given:
    /// [`RenderError::PromptIsCommand`], [`RenderError::LaunchValueExpands`]; `None` for
    /// the other variants.
    fn fmt_launch_value(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        Some(match self {
            RenderError::PromptIsCommand {
                client,
                prefix,
                runs,
            } => write!(
                f,
                "cannot render the {} launch: the reviewer's prompt starts with `{prefix}`, \
                 {runs}; start the prompt with text (e.g. `Review: …`)",
                client.display_name()
            ),
            RenderError::LaunchValueExpands {
                client,
                field,
                marker,
                expands,
            } => write!(
                f,
                "cannot render the {} launch: its `{field}` contains `{marker}`, {expands}; \
                 give the {field} without `{marker}`",
                client.display_name()
            ),
            _ => return None,
        })
    }
}

/// [`RenderError::ArgvUnpassable`]'s message.
fn fmt_argv_unpassable(
    client: Client,
    prompt: bool,
    bytes: usize,
    nul: bool,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    let what = if prompt {
        "the reviewer's prompt"
    } else {
        "an argument"
    };
    write!(
        f,
        "cannot render the {client} launch: {client} takes {what} in argv, "
    )?;
    if nul {
        return f.write_str("and it holds a NUL byte, which no argument can pass; remove it");
    }
    write!(
        f,
        "and it is {bytes} bytes, more than the {} one argument holds (Linux's MAX_ARG_STRLEN, \
         its NUL included); shorten it, or review on a client that takes the prompt over ACP",
        plan::MAX_ARG_BYTES - 1
    )
}

/// [`RenderError::ForbiddenChar`]'s message.
fn fmt_forbidden_char(
    field: &str,
    value: &str,
    found: char,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(
        f,
        "the reviewer's `{field}` `{}` contains {}; give it without one",
        value.escape_debug(),
        crate::text::char_name(found)
    )
}

/// [`RenderError::UnverifiedIsolation`]'s message.
fn fmt_unverified(client: Client, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "cannot render the {client} launch: its isolation from the MCP servers the user or the \
         reviewed repository configured is not verified, so one of them (a flow-starting one \
         included) could start beside kcap's; opt in explicitly (`PlanInputs::unverified_isolation = \
         UnverifiedIsolation::Allow`; --allow-unverified-isolation)"
    )
}

/// [`RenderError::CredentialFile`]'s message.
fn fmt_credential_file(
    client: Client,
    name: &str,
    problem: &str,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(
        f,
        "cannot render the {client} launch: credential file `{}` {problem}; hand over the file \
         as {client} stored it",
        name.escape_debug()
    )
}

/// [`RenderError::Managed`]'s message.
fn fmt_managed(
    client: Client,
    file: &std::path::Path,
    effect: &str,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(
        f,
        "cannot isolate the {client} reviewer: {} exists, an administrator's file that {client} \
         reads whatever the launch's environment says, and that {effect}; remove it, or run \
         reviewers on a machine without it",
        crate::text::ShownPath(file)
    )
}

/// [`RenderError::CredentialNotAccepted`]'s message: what was refused, and everything the
/// client does accept, variables and files, so a refused name points at the accepted way
/// (Codex's API key is a file, not a variable).
fn fmt_credential_not_accepted(
    client: Client,
    name: &str,
    kind: root::CredentialKind,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    let kind = match kind {
        root::CredentialKind::Variable => "credential or provider variable",
        root::CredentialKind::File => "credential file",
    };
    let accepted = &client.spec().credentials;
    write!(
        f,
        "cannot render the {client} launch: `{}` is not a {kind} {client} accepts, or is given \
         twice; {client} accepts {accepted}",
        name.escape_debug(),
    )?;
    if accepted.env.is_empty() && accepted.files.is_empty() {
        Ok(())
    } else {
        f.write_str(", each at most once")
    }
}

/// [`RenderError::NeedsBrokeredDelivery`]'s message.
fn fmt_needs_brokered(client: Client, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "cannot render the {client} launch: it runs with a HOME of its own, so the result \
         channel needs brokered delivery; give the launch its capability URL \
         (`result_capability_url` in the launch command; --result-capability-url URL)"
    )
}

/// [`RenderError::NeedsAbsolute`]'s message.
fn fmt_needs_absolute(f: &mut fmt::Formatter<'_>, client: Client, field: &str) -> fmt::Result {
    let (what, flag) = match field {
        // A client not driven over ACP starts in the worktree.
        "worktree" if !client.spec().acp => (
            "the reviewer's worktree (the directory it starts in)",
            "--worktree",
        ),
        "worktree" => (
            "the reviewer's worktree (the ACP session's `cwd`)",
            "--worktree",
        ),
        "cache_dir" => ("a cache directory kept across launches", "--cache-dir"),
        _ => ("a per-launch directory", "--launch-dir"),
    };
    write!(
        f,
        "cannot render the {client} launch: it needs {what} as an absolute path; \
         give the launch its `{field}` ({flag} DIR)"
    )
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
