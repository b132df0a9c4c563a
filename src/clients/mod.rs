//! The coding-agent clients kcap launches reviewers on, one room per client.
//!
//! Each client's room holds everything this crate knows about that client, written once with
//! the client version and the evidence: how its reviewer is launched, how the MCP servers it
//! would inherit from the user or the reviewed repository are found and neutralized, and how
//! its tools are trusted.
//!
//! - [`claude`]: Claude Code (pinned 2.1.197, also run on 2.1.328): the inline `--mcp-config`
//!   JSON, the argv, and the [preflight](claude::preflight) for settings that veto our servers.
//! - [`codex`]: OpenAI Codex CLI (pinned 0.169.0): the `-c` overrides, the argv, and the
//!   [inventory](codex::inventory) of the servers Codex inherits.
//! - [`gemini`]: Gemini CLI (pinned 0.61.0), driven over ACP, with per-launch aliased names.
//! - [`opencode`]: OpenCode (pinned 1.18.33), driven over ACP, with its configuration
//!   directories taken away.
//!
//! This module holds the vocabulary every room shares: [`Client`], [`LaunchContext`] (what a
//! launch needs from the daemon), [`RenderError`] and [`LaunchError`]; [`plan`] holds the
//! [`LaunchPlan`](plan::LaunchPlan) every room renders and the [`LaunchId`](plan::LaunchId).
//!
//! Every renderer keeps the same security rules: the result channel is always injected first
//! (unless [gated](LaunchContext::is_gated)); allowlisted servers follow in allowlist order;
//! a server that can start flows never appears; `KCAP_FLOW_AGENT_ID` (the `agent_id` env
//! source) reaches only the result channel; an empty or absent allowlist renders
//! byte-identical args to the no-allowlist baseline.

pub mod claude;
pub mod codex;
pub mod gemini;
#[cfg(feature = "cli")]
pub mod loaded;
pub mod opencode;
pub mod plan;

/// A coding-agent client this crate renders reviewer launches for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Client {
    /// Anthropic Claude Code ([`claude`]).
    Claude,
    /// OpenAI Codex CLI ([`codex`]).
    Codex,
    /// Gemini CLI ([`gemini`]).
    Gemini,
    /// OpenCode ([`opencode`]).
    OpenCode,
}

impl Client {
    /// Every client, in the order the CLI lists them.
    pub const ALL: [Client; 4] = [
        Client::Claude,
        Client::Codex,
        Client::Gemini,
        Client::OpenCode,
    ];

    /// The client's name on the command line and in output: `claude`, `codex`, `gemini`,
    /// `opencode`.
    pub const fn name(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::OpenCode => "opencode",
        }
    }

    /// Parses [`Client::name`] (exact, lower case); `None` for anything else.
    ///
    /// ```
    /// use kcap_mcp_registry::clients::Client;
    ///
    /// assert_eq!(Client::from_name("codex"), Some(Client::Codex));
    /// assert_eq!(Client::from_name("Codex"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

use std::fmt;

use crate::allowlist::{Policy, Rejection, Resolution, resolve_allowlist};
use crate::model::{EnvSource, McpServer};
use crate::registry::result_channel;

/// What a reviewer launch needs from the daemon. A blank (empty or whitespace-only) `model`,
/// `effort` or `worktree` counts as unset; so does an empty `prompt`, while a whitespace-only
/// prompt is passed as given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchContext {
    /// The kcap server URL (`KCAP_URL`). Absent or blank gates every MCP server off.
    pub server_url: Option<String>,
    /// Path of the kcap binary, the `command` of every MCP server. Absent or blank gates
    /// every MCP server off.
    pub kcap_bin: Option<String>,
    /// The reviewer's agent id (`KCAP_FLOW_AGENT_ID`, result channel only).
    pub agent_id: String,
    /// The flow's MCP allowlist as the launch command carries it.
    pub mcp_allowlist: Option<Vec<Option<String>>>,
    /// Model name.
    pub model: Option<String>,
    /// Reasoning effort.
    pub effort: Option<String>,
    /// The reviewer's prompt, passed after `--`.
    pub prompt: Option<String>,
    /// The worktree the reviewer runs in (Codex `--cd`, and the `cwd` Codex servers get;
    /// the ACP `session/new` `cwd`, absolute).
    pub worktree: Option<String>,
    /// The per-launch directory the daemon creates (absolute, empty, private to this
    /// launch) and removes afterwards: [`LaunchPlan::files`](plan::LaunchPlan::files) are
    /// written under it, and clients that need a directory of their own (OpenCode's empty
    /// configuration home) get one inside it.
    pub launch_dir: Option<String>,
}

impl LaunchContext {
    /// Whether MCP servers are gated off: `server_url` or `kcap_bin` is absent or
    /// blank. A gated reviewer gets an empty MCP configuration.
    pub fn is_gated(&self) -> bool {
        self.materials().is_none()
    }

    /// `(kcap_bin, server_url)` unless gated.
    fn materials(&self) -> Option<(&str, &str)> {
        let path = set(&self.kcap_bin)?;
        let url = set(&self.server_url)?;
        Some((path, url))
    }

    /// Refuses a blank agent id unless gated: the result channel, injected into every
    /// ungated reviewer, carries it as `KCAP_FLOW_AGENT_ID`.
    fn require_agent_id(&self) -> Result<(), RenderError> {
        if !self.is_gated() && self.agent_id.trim().is_empty() {
            return Err(RenderError::BlankAgentId);
        }
        Ok(())
    }

    /// Resolves [`LaunchContext::mcp_allowlist`] (absent = empty) under `policy`.
    ///
    /// # Errors
    /// [`Rejection`] under [`Policy::Strict`]; see [`resolve_allowlist`].
    pub fn resolve(&self, policy: Policy) -> Result<Resolution<'_, String>, Rejection> {
        resolve_allowlist(self.mcp_allowlist.as_deref().unwrap_or(&[]), policy)
    }

    /// The servers to materialize with their env values: the result channel, then the
    /// resolved servers. Empty when gated.
    fn servers<'s>(
        &'s self,
        resolution: &'s Resolution<'_, String>,
    ) -> impl Iterator<Item = (&'static McpServer, Vec<(&'static str, &'s str)>)> + 's {
        let materials = self.materials();
        materials
            .into_iter()
            .flat_map(move |(_, url)| {
                std::iter::once(result_channel())
                    .chain(resolution.servers())
                    .map(move |s| (s, url))
            })
            .map(move |(s, url)| {
                let env = s
                    .env
                    .iter()
                    .map(|&(name, source)| {
                        let value = match source {
                            EnvSource::ServerUrl => url,
                            // Build rule `agent-id-injection-only` keeps this source on
                            // injection-only entries; only the result channel is injected.
                            EnvSource::AgentId => self.agent_id.as_str(),
                        };
                        (name, value)
                    })
                    .collect();
                (s, env)
            })
    }
}

/// `Some(s)` when `s` is set and not blank.
fn set(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.trim().is_empty())
}

/// [`set`] for a value that follows an option in argv (`--model M`): one starting with `-`
/// would be read as an option, so it is refused.
fn option_value<'a>(
    field: &'static str,
    value: &'a Option<String>,
) -> Result<Option<&'a str>, RenderError> {
    match set(value) {
        Some(v) if v.starts_with('-') => Err(RenderError::OptionLike { field }),
        v => Ok(v),
    }
}

/// The absolute worktree an ACP session runs in (`session/new` `cwd`).
fn acp_cwd(client: Client, ctx: &LaunchContext) -> Result<&str, RenderError> {
    match set(&ctx.worktree) {
        Some(w) if is_absolute(w) => Ok(w),
        _ => Err(RenderError::NeedsAbsolute {
            client,
            field: "worktree",
        }),
    }
}

/// The absolute per-launch directory, for a client that needs one.
fn launch_dir(client: Client, ctx: &LaunchContext) -> Result<&str, RenderError> {
    match set(&ctx.launch_dir) {
        Some(d) if is_absolute(d) => Ok(d.strip_suffix('/').filter(|d| !d.is_empty()).unwrap_or(d)),
        _ => Err(RenderError::NeedsAbsolute {
            client,
            field: "launch_dir",
        }),
    }
}

/// A Unix absolute path: starts with `/`.
fn is_absolute(path: &str) -> bool {
    path.starts_with('/')
}

/// The ACP `session/new` servers and their wire names, `wire_name` naming each by its id.
fn acp_servers(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    wire_name: impl Fn(&str) -> String,
) -> (Vec<plan::AcpServer>, Vec<plan::WireServer>) {
    let command = ctx.kcap_bin.as_deref().unwrap_or_default();
    ctx.servers(resolution)
        .map(|(server, env)| {
            let name = wire_name(server.id);
            let acp = plan::AcpServer {
                name: name.clone(),
                command: command.to_owned(),
                args: server.args.iter().map(|a| (*a).to_owned()).collect(),
                env: env.iter().map(|(n, v)| plan::EnvVar::new(*n, *v)).collect(),
            };
            let wire = plan::WireServer {
                id: server.id.to_owned(),
                wire_name: name,
            };
            (acp, wire)
        })
        .unzip()
}

/// Every env name a registry server is given, sorted, once each: removed from the
/// environment of clients that pass their own environment on to MCP servers, so a value the
/// daemon's environment happens to hold (say `KCAP_FLOW_AGENT_ID`) never reaches a server the
/// registry does not give it to.
fn registry_env_names() -> impl Iterator<Item = String> {
    let names: std::collections::BTreeSet<&str> = crate::registry::servers()
        .iter()
        .flat_map(|s| s.env.iter().map(|(name, _)| *name))
        .collect();
    names.into_iter().map(str::to_owned)
}

/// The injected servers of a client that names them by id.
fn wire_servers(ctx: &LaunchContext, resolution: &Resolution<'_, String>) -> Vec<plan::WireServer> {
    ctx.servers(resolution)
        .map(|(server, _)| plan::WireServer {
            id: server.id.to_owned(),
            wire_name: server.id.to_owned(),
        })
        .collect()
}

/// A reviewer configuration that cannot be rendered safely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenderError {
    /// A value would reach Claude Code containing `${`, which Claude Code expands as an
    /// environment variable reference in `command`, `args` and `env` with no escape.
    ClaudeExpansion {
        /// The MCP server the value belongs to.
        server: String,
        /// The field, e.g. `command`, `args[1]`, `env.KCAP_URL`.
        field: String,
    },
    /// A Codex server inherited from the user's configuration has the same name as one we
    /// enable and carries a field the `-c` overrides cannot neutralize.
    CodexInheritedField {
        /// The server name.
        server: String,
        /// The field, e.g. `url`, `env.EXTRA`.
        field: String,
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
    /// Settings the reviewer's Claude Code reads would stop these injected servers from
    /// starting ([`claude::preflight`]): every veto found, in server order.
    ClaudeVetoed(Vec<claude::preflight::Veto>),
    /// A configuration file the reviewer's Claude Code reads cannot be understood, so
    /// whether it vetoes an injected server is unknown.
    ClaudeConfig {
        /// The file.
        file: std::path::PathBuf,
        /// What is wrong, e.g. `is not JSON (…)`.
        problem: String,
    },
    /// The Codex inventory lists a server name twice (Codex never does); which entry is real
    /// cannot be known, so nothing is rendered.
    DuplicateInherited {
        /// The repeated name.
        server: String,
    },
    /// A value would reach Gemini CLI in an ACP server's `env` containing `${`, which Gemini
    /// CLI 0.61.0 expands as an environment variable reference.
    GeminiExpansion {
        /// The MCP server the value belongs to (registry id).
        server: &'static str,
        /// The field, e.g. `env.KCAP_FLOW_AGENT_ID`.
        field: String,
    },
    /// The client needs this [`LaunchContext`] field as an absolute path, and it is unset,
    /// blank or relative.
    NeedsAbsolute {
        /// The client.
        client: Client,
        /// The field: `worktree` (the ACP session's `cwd`) or `launch_dir`.
        field: &'static str,
    },
    /// A Codex server inherited under the name of one we enable is known only from
    /// `codex mcp list --json` (a plugin's server, or an inventory saved from `mcp list`),
    /// which hides most fields, so whether any of them would merge into ours is unknown.
    CodexUnseenFields {
        /// The server name.
        server: String,
    },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::ClaudeExpansion { server, field } => write!(
                f,
                "cannot render the Claude Code MCP config: `{server}.{field}` contains `${{`, \
                 which Claude Code expands as a variable reference and cannot escape; \
                 remove `${{` from that value"
            ),
            RenderError::CodexInheritedField { server, field } => {
                write!(
                    f,
                    "cannot isolate the Codex reviewer: the user's Codex config defines MCP server \
                     `{}` with `{}`, which would merge into kcap's server of the same name; ",
                    server.escape_debug(),
                    field.escape_debug(),
                )?;
                if field == "cwd" {
                    f.write_str("give the reviewer a worktree (its `cwd` then points there), or ")?;
                }
                write!(
                    f,
                    "remove `{}` from `[mcp_servers.{}]` in $CODEX_HOME/config.toml",
                    field.escape_debug(),
                    server.escape_debug()
                )
            }
            RenderError::BlankAgentId => f.write_str(
                "the reviewer's agent id is blank, and the result channel needs it \
                 (KCAP_FLOW_AGENT_ID); give the launch its agent id",
            ),
            RenderError::OptionLike { field } => write!(
                f,
                "the reviewer's `{field}` starts with `-`, so the client would read it as an \
                 option; use a value that does not start with `-`"
            ),
            RenderError::GeminiExpansion { server, field } => write!(
                f,
                "cannot render the Gemini CLI session: `{server}.{field}` contains `${{`, which \
                 Gemini CLI expands as a variable reference in ACP server env values; remove \
                 `${{` from that value"
            ),
            RenderError::NeedsAbsolute { client, field } => {
                let (what, flag) = match *field {
                    "worktree" => (
                        "the reviewer's worktree (the ACP session's `cwd`)",
                        "--worktree",
                    ),
                    _ => ("a per-launch directory", "--launch-dir"),
                };
                write!(
                    f,
                    "cannot render the {client} launch: it needs {what} as an absolute path; \
                     give the launch its `{field}` ({flag} DIR)"
                )
            }
            RenderError::ClaudeVetoed(vetoes) => {
                let result_channel = result_channel().id;
                for (i, veto) in vetoes.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    veto.fmt(f)?;
                }
                if vetoes.iter().any(|v| v.server == result_channel) {
                    f.write_str(
                        "; without its result channel the reviewer could never report, so it \
                         is not launched",
                    )?;
                } else {
                    f.write_str("; the strict policy launches no reviewer without them")?;
                }
                f.write_str(
                    "; remove those entries (or the file), or launch the reviewer with a HOME, \
                     CLAUDE_CONFIG_DIR and worktree that do not carry them",
                )
            }
            RenderError::ClaudeConfig { file, problem } => write!(
                f,
                "cannot tell which MCP servers Claude Code would start: {} {problem}; fix or \
                 remove it",
                claude::preflight::escape_controls(&file.to_string_lossy())
            ),
            RenderError::CodexUnseenFields { server } => write!(
                f,
                "cannot isolate the Codex reviewer: MCP server `{}` has the name of one of kcap's, \
                 and only `codex mcp list --json` reports it, which hides most of its fields; take \
                 the inventory from `codex app-server` `config/read` (--codex-bin, or a saved \
                 answer), or rename or remove that server",
                server.escape_debug()
            ),
            RenderError::DuplicateInherited { server } => write!(
                f,
                "the Codex inventory lists MCP server `{}` twice; take the inventory again \
                 with `codex mcp list --json`",
                server.escape_debug()
            ),
        }
    }
}

impl std::error::Error for RenderError {}

/// Why a reviewer argv could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// The strict policy refused an allowlist entry.
    Rejected(Rejection),
    /// A value cannot be rendered safely.
    Render(RenderError),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Rejected(e) => e.fmt(f),
            LaunchError::Render(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaunchError::Rejected(e) => Some(e),
            LaunchError::Render(e) => Some(e),
        }
    }
}

impl From<Rejection> for LaunchError {
    fn from(e: Rejection) -> Self {
        LaunchError::Rejected(e)
    }
}

impl From<RenderError> for LaunchError {
    fn from(e: RenderError) -> Self {
        LaunchError::Render(e)
    }
}
