//! The coding-agent clients kcap launches reviewers on, one room per client.
//!
//! Each client's room holds what this crate does with that client, as code and data: how its
//! reviewer is launched, how the MCP servers it would inherit from the user or the reviewed
//! repository are kept out, and how its tools are trusted. What the client does, measured on
//! which version and shown by which test (or, for a client not installable here, reported
//! where), is written once in `docs/isolation/<client>.md`, which the room's docs link.
//!
//! - [`claude`]: Claude Code (pinned 2.1.197 and 2.1.332): the inline `--mcp-config`
//!   JSON, the argv, and the [preflight](claude::preflight) for settings that veto our servers.
//! - [`codex`]: OpenAI Codex CLI (pinned 0.169.0 and 0.171.0): the `-c` overrides, the argv, and the
//!   plan that roots the reviewer in a per-launch `CODEX_HOME`.
//! - [`gemini`]: Gemini CLI (pinned 0.61.0), driven over ACP, with per-launch aliased names.
//! - [`opencode`]: OpenCode (pinned 1.18.33), driven over ACP, with its configuration
//!   directories taken away.
//! - [`copilot`]: Copilot CLI (pinned 1.0.102), driven over ACP with its servers on the
//!   command line, in a per-launch `COPILOT_HOME` where nothing else is configured.
//! - [`qwen`]: Qwen Code (pinned 0.24.4), driven over ACP with per-launch aliased names, in a
//!   per-launch `QWEN_HOME`.
//! - [`cursor`], [`kiro`], [`antigravity`]: Cursor, Kiro (\[K\] 2.15.2/2.16.0) and
//!   Antigravity (\[K\] 1.1.10/1.1.13), not installable here: their plans follow the original
//!   system's facts only: their isolation is unverified, and their plans are refused unless
//!   the caller opts in ([`dispatch::UnverifiedIsolation`]).
//!
//! - [`gemini`], [`copilot`], [`opencode`], [`cursor`], [`kiro`], [`antigravity`], [`qwen`]: each
//!   client's registration file (the servers a person registers for interactive sessions),
//!   with the version and evidence of each fact.
//!
//! This module holds the vocabulary every room shares: [`Client`], [`LaunchContext`] (what a
//! launch needs from the daemon), [`RenderError`] and [`LaunchError`] (every error a launch
//! can meet, so a daemon returns them all with `?`); [`plan`] holds the
//! [`LaunchPlan`](plan::LaunchPlan) every room renders and the [`LaunchId`](plan::LaunchId).
//! What two rooms share because one client is a fork of the other is written once beside
//! them: `gemini_family/` for Gemini CLI and Qwen Code.
//!
//! A launch is one call, [`Client::plan`] (or the [`LaunchRequest`] that builds its inputs),
//! failing into [`LaunchError`]; the rooms' own functions are the crate's:
//!
//! ```
//! use kcap_mcp_registry::clients::dispatch::PlanInputs;
//! use kcap_mcp_registry::{Client, LaunchCommand, LaunchContext, LaunchError, Policy};
//!
//! fn reviewer_argv(cmd: LaunchCommand) -> Result<Vec<String>, LaunchError> {
//!     let mut ctx = LaunchContext::from_command(cmd, "http://127.0.0.1:5100", "/usr/bin/kcap");
//!     ctx.launch_dir = Some("/run/kcap/a1".into());
//!     let launch = Client::Claude.plan(&ctx, &PlanInputs::new(Policy::Strict))?;
//!     for warning in &launch.warnings {
//!         eprintln!("warning: {warning}");
//!     }
//!     Ok(launch.plan.argv)
//! }
//!
//! let cmd = LaunchCommand { agent_id: "a1".into(), ..LaunchCommand::default() };
//! assert_eq!(reviewer_argv(cmd)?[0], "--permission-mode");
//! let cmd = LaunchCommand {
//!     agent_id: "a1".into(),
//!     mcp_allowlist: Some(vec![Some("kcap-memory".into())]),
//!     ..LaunchCommand::default()
//! };
//! assert!(matches!(reviewer_argv(cmd), Err(LaunchError::Rejected(_))));
//! # Ok::<(), LaunchError>(())
//! ```
//!
//! Every renderer keeps the same security rules: the result channel is always injected first
//! (unless [gated](LaunchContext::is_gated)); allowlisted servers follow in allowlist order;
//! then, in a borrowed-snapshot review only, the `inject = "borrowed-snapshot"` servers; a
//! server that can start flows never appears; `KCAP_FLOW_AGENT_ID` (the `agent_id` env
//! source) reaches only the result channel; an empty or absent allowlist renders
//! byte-identical args to the no-allowlist baseline. Which reserved servers are injected,
//! and each one's env, come from the registry data ([`Inject`], [`EnvSource`]), never from
//! their names.

pub mod antigravity;
pub mod boundary;
pub mod cache;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod cursor;
mod dialog;
pub mod dispatch;
pub mod door;
mod error;
pub mod gemini;
mod gemini_family;
pub mod git;
#[cfg(feature = "cli")]
pub mod hostile;
pub mod kiro;
mod launch_id;
#[cfg(feature = "cli")]
pub mod loaded;
pub mod opencode;
pub mod plan;
pub mod qwen;
#[cfg(feature = "cli")]
pub mod registration;
mod request;
pub mod root;
pub mod spec;
pub mod tools;
pub mod version;
pub mod veto;

use spec::ClientSpec;

/// [`RenderError::Expansion`]'s words for a client whose expansion of `${…}` is not
/// established (Cursor, Kiro, Antigravity: facts only): refused as if it expanded.
pub const UNKNOWN_EXPANSION: &str = "and whether the client expands it as a variable reference \
                                     is not established, so it is refused as if it did";

/// Generates [`Client`] from the one list of clients below: the enum, [`Client::ALL`] and
/// [`Client::spec`] (each variant's room declares `SPEC`).
macro_rules! clients {
    ($($(#[doc = $doc:expr])* $variant:ident => $room:ident,)*) => {
        /// A coding-agent client: this crate renders reviewer launches and registration files
        /// for each. Everything known about one is in its room, [`Client::spec`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Client {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Client {
            /// Every client, in the order the CLI lists them.
            pub const ALL: [Client; [$(stringify!($variant)),*].len()] = [$(Client::$variant),*];

            /// What this crate knows about the client, from its room (`SPEC`).
            pub const fn spec(self) -> &'static ClientSpec {
                match self {
                    $(Client::$variant => &$room::SPEC,)*
                }
            }
        }
    };
}

// The list of clients: one line each.
clients! {
    /// Anthropic Claude Code ([`claude`]).
    Claude => claude,
    /// OpenAI Codex CLI ([`codex`]).
    Codex => codex,
    /// Gemini CLI ([`gemini`]).
    Gemini => gemini,
    /// OpenCode ([`opencode`]).
    OpenCode => opencode,
    /// GitHub Copilot CLI ([`copilot`]).
    Copilot => copilot,
    /// Cursor ([`cursor`]).
    Cursor => cursor,
    /// Kiro ([`kiro`]).
    Kiro => kiro,
    /// Antigravity, `agy` ([`antigravity`]).
    Antigravity => antigravity,
    /// Qwen Code ([`qwen`]).
    Qwen => qwen,
}

impl Client {
    /// The client's name on the command line and in output: `claude`, `codex`, `gemini`,
    /// `opencode`, `copilot`, `cursor`, `kiro`, `antigravity`, `qwen`.
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// The client's display name: `Claude Code`, `Codex CLI`, `Gemini CLI`, `OpenCode`,
    /// `Copilot CLI`, `Cursor`, `Kiro`, `Antigravity`, `Qwen Code`.
    pub const fn display_name(self) -> &'static str {
        self.spec().display_name
    }

    /// Whether registrations for this client append `--driver <client>` to the args of the
    /// flow-starting server: its only way to learn which client drives the flows it starts.
    /// The original system stamps the six JSON-configured clients (Gemini, OpenCode, Copilot,
    /// Cursor, Kiro, Antigravity) and leaves Claude Code and Codex unstamped (facts
    /// "Registration", kcap-cli 07ef5ebf `Core/Mcp`).
    pub const fn stamps_driver(self) -> bool {
        self.spec().stamps_driver
    }

    /// The client's registration file format, from its room.
    #[cfg(feature = "cli")]
    pub fn registration(self) -> &'static crate::clients::registration::RegistrationFormat {
        self.spec().registration
    }

    /// The administrator files the client reads whatever the plan's environment says, which
    /// [`root::managed_preflight`] refuses while they exist (empty where none is known).
    pub fn managed_files(self) -> &'static [root::ManagedFile] {
        self.spec().managed_files
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

/// On the command line a client is its [`Client::name`], from [`Client::ALL`]: the CLI's
/// `--client` values and `render <client>` come from the one list of clients.
#[cfg(feature = "cli")]
impl clap::ValueEnum for Client {
    fn value_variants<'a>() -> &'a [Self] {
        &Client::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

/// A client as JSON: its [`name`](Client::name) (`"gemini"`), as launch plans carry it.
impl serde::Serialize for Client {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A client from its [`name`](Client::name); another string is an error naming the clients.
impl<'de> serde::Deserialize<'de> for Client {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Client::from_name(&name).ok_or_else(|| {
            let names: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
            serde::de::Error::custom(format_args!(
                "unknown client `{}`, expected one of: {}",
                name.escape_debug(),
                names.join(", ")
            ))
        })
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

use std::fmt;

pub use error::{LaunchError, RenderError};
pub use request::LaunchRequest;

use crate::allowlist::{Policy, Rejection, Resolution};
use crate::model::{EnvSource, Inject, McpServer};
use crate::registry::Registry;
use crate::wire::LaunchCommand;

/// How the result channel hands a reviewer's result to the daemon.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ResultDelivery {
    /// The result channel talks to the kcap server at [`LaunchContext::server_url`]: its
    /// `"server_url"` variables (`KCAP_URL`) are set, its `"result_capability_url"` ones are not.
    #[default]
    Direct,
    /// The reviewer's HOME is not the daemon user's (a borrowed snapshot, or a client that
    /// needs a per-launch HOME), so the result goes through a per-launch capability URL
    /// (`http://127.0.0.1:<port>/<token>`): the result channel's `"result_capability_url"`
    /// variables (`KCAP_FLOW_CAPABILITY_URL`) are set **instead of** its `"server_url"` ones,
    /// never both. Allowlisted servers keep `KCAP_URL`. A blank URL is
    /// [`RenderError::BlankCapabilityUrl`].
    Brokered {
        /// The capability URL.
        capability_url: String,
    },
}

impl ResultDelivery {
    /// [`ResultDelivery::Brokered`] with the launch command's capability URL when it has one,
    /// else [`ResultDelivery::Direct`].
    pub fn from_capability_url(capability_url: Option<String>) -> ResultDelivery {
        match capability_url {
            Some(capability_url) => ResultDelivery::Brokered { capability_url },
            None => ResultDelivery::Direct,
        }
    }
}

/// Whose checkout the reviewer reviews.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Snapshot {
    /// The daemon user's own worktree: no `inject = "borrowed-snapshot"` server is injected.
    #[default]
    Own,
    /// A borrowed snapshot (another user's checkout): every `inject = "borrowed-snapshot"`
    /// server (`kcap-review-context`) is injected after the allowlisted servers, its
    /// `"review_context_url"` variables set to the bridge URL. An absent or blank URL is
    /// [`RenderError::MissingReviewContextUrl`]: the launch fails rather than start a
    /// review-context server with nothing to read.
    Borrowed {
        /// The review-context bridge URL
        /// (`<bridge>/review-context/workspace-mcp-configs`).
        review_context_url: Option<String>,
    },
}

impl Snapshot {
    /// The snapshot a launch command describes: [`Snapshot::Borrowed`] when it says
    /// `borrowed_snapshot` or carries a review-context URL (which marks a borrowed snapshot),
    /// else [`Snapshot::Own`].
    pub fn from_launch(borrowed_snapshot: bool, review_context_url: Option<String>) -> Snapshot {
        if borrowed_snapshot || review_context_url.is_some() {
            Snapshot::Borrowed { review_context_url }
        } else {
            Snapshot::Own
        }
    }
}

/// What a reviewer launch needs from the daemon: the launch command's fields
/// ([`LaunchContext::from_command`]) and the daemon's own settings. A blank (empty or
/// whitespace-only) `model`, `effort` or `worktree` counts as unset; so does an empty
/// `prompt`, while a whitespace-only prompt is passed as given.
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
    /// How the result channel delivers the result (default: direct).
    pub result_delivery: ResultDelivery,
    /// Whose checkout is reviewed (default: the daemon user's own).
    pub snapshot: Snapshot,
    /// Credentials and model-provider settings for the reviewer's client, handed over
    /// explicitly (default: none): only what the client's room accepts
    /// ([`root::CredentialSpec`]) reaches it, since the client no longer reads the user's
    /// own configuration.
    pub credentials: root::Credentials,
    /// A directory the daemon keeps across launches (absolute) for what a client would
    /// otherwise fetch on every launch: Copilot CLI's package (`COPILOT_PKG_CACHE_HOME=<dir>/
    /// copilot`, where it unpacks its ~235 MB package on its first run). Every client keeps
    /// its `XDG_CACHE_HOME` per launch. It must be the daemon's own, not the user's
    /// `~/.cache`; a reviewer may read and run it, never write it (the plan's
    /// [`sandbox`](plan::LaunchPlan::sandbox)): every launch shares it and Copilot runs the
    /// package found there, so the daemon fills it outside a reviewer's sandbox (or in a
    /// launch it gives `--sandbox-write <dir>`, one that reviews nothing).
    pub cache_dir: Option<String>,
    /// Whether the reviewer's network is a door of its own (default: no, the executor's
    /// network): the client and all it starts reach only the endpoints the plan names
    /// ([`plan::DoorPlan`]), the URLs name them, and the model key stays outside
    /// ([`door`]). Needs a client whose room declares how its model API goes through the door
    /// ([`spec::ClientSpec::door`]), the model API's base URL among the credentials, and
    /// `http://` URLs.
    pub door: bool,
}

impl LaunchContext {
    /// The context for launch command `cmd` with the daemon's kcap server URL and kcap
    /// binary; no worktree (set [`LaunchContext::worktree`] for Codex and the ACP clients)
    /// and no launch directory (set [`LaunchContext::launch_dir`] for OpenCode).
    ///
    /// ```
    /// use kcap_mcp_registry::{LaunchCommand, LaunchContext};
    ///
    /// let cmd: LaunchCommand = serde_json::from_str(r#"{"agent_id":"a1","model":"m"}"#)?;
    /// let ctx = LaunchContext::from_command(cmd, "http://127.0.0.1:5100", "/usr/bin/kcap");
    /// assert_eq!((ctx.agent_id.as_str(), ctx.model.as_deref()), ("a1", Some("m")));
    /// assert!(!ctx.is_gated());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn from_command(
        cmd: LaunchCommand,
        server_url: impl Into<String>,
        kcap_bin: impl Into<String>,
    ) -> LaunchContext {
        let LaunchCommand {
            agent_id,
            mcp_allowlist,
            model,
            effort,
            prompt,
            result_capability_url,
            borrowed_snapshot,
            review_context_url,
        } = cmd;
        LaunchContext {
            server_url: Some(server_url.into()),
            kcap_bin: Some(kcap_bin.into()),
            agent_id,
            mcp_allowlist,
            model,
            effort,
            prompt,
            worktree: None,
            launch_dir: None,
            result_delivery: ResultDelivery::from_capability_url(result_capability_url),
            snapshot: Snapshot::from_launch(borrowed_snapshot, review_context_url),
            credentials: root::Credentials::default(),
            cache_dir: None,
            door: false,
        }
    }

    /// Whether MCP servers are gated off: `server_url` or `kcap_bin` is absent or
    /// blank. A gated reviewer gets an empty MCP configuration.
    pub fn is_gated(&self) -> bool {
        self.kcap_bin_and_url().is_none()
    }

    /// `(kcap_bin, server_url)`, both set and not blank; `None` when gated.
    fn kcap_bin_and_url(&self) -> Option<(&str, &str)> {
        let path = non_blank(&self.kcap_bin)?;
        let url = non_blank(&self.server_url)?;
        Some((path, url))
    }

    /// Refuses, unless gated, a blank agent id (the result channel, injected into every
    /// ungated reviewer, carries it as `KCAP_FLOW_AGENT_ID`), a blank brokered capability URL,
    /// and a borrowed snapshot without a review-context URL.
    fn require_launch_values(&self) -> Result<(), RenderError> {
        if self.is_gated() {
            return Ok(());
        }
        if self.agent_id.trim().is_empty() {
            return Err(RenderError::BlankAgentId);
        }
        if let ResultDelivery::Brokered { capability_url } = &self.result_delivery {
            if capability_url.trim().is_empty() {
                return Err(RenderError::BlankCapabilityUrl);
            }
        }
        if let Snapshot::Borrowed { review_context_url } = &self.snapshot {
            if non_blank(review_context_url).is_none() {
                return Err(RenderError::MissingReviewContextUrl);
            }
        }
        Ok(())
    }

    /// Resolves [`LaunchContext::mcp_allowlist`] (absent = empty) under `policy` against
    /// the compiled-in registry. The renderers take the [`Resolution`]; log its
    /// [`skipped`](Resolution::skipped) entries.
    ///
    /// # Errors
    /// [`Rejection`] under [`Policy::Strict`]; see [`crate::resolve_allowlist`].
    pub fn resolve(&self, policy: Policy) -> Result<Resolution<'_, String>, Rejection> {
        self.resolve_in(Registry::compiled(), policy)
    }

    /// [`LaunchContext::resolve`] against `registry`.
    ///
    /// # Errors
    /// As [`LaunchContext::resolve`].
    pub fn resolve_in(
        &self,
        registry: Registry,
        policy: Policy,
    ) -> Result<Resolution<'_, String>, Rejection> {
        registry.resolve(self.mcp_allowlist.as_deref().unwrap_or(&[]), policy)
    }

    /// The servers to materialize with their env values: the `inject = "always"` servers (the
    /// result channel), then the resolved servers, then, for a borrowed snapshot, the
    /// `inject = "borrowed-snapshot"` servers. Empty when gated. Call
    /// [`LaunchContext::require_launch_values`] first.
    pub(crate) fn servers<'s>(
        &'s self,
        resolution: &'s Resolution<'_, String>,
    ) -> impl Iterator<Item = (&'static McpServer, Vec<(&'static str, &'s str)>)> + 's {
        let borrowed = matches!(self.snapshot, Snapshot::Borrowed { .. });
        let registry = resolution.registry();
        self.kcap_bin_and_url()
            .into_iter()
            .flat_map(move |_| {
                registry
                    .injected(Inject::Always)
                    .chain(resolution.servers())
                    .chain(
                        borrowed
                            .then(|| registry.injected(Inject::BorrowedSnapshot))
                            .into_iter()
                            .flatten(),
                    )
            })
            .map(move |s| (s, self.env_of(s)))
    }

    /// `server`'s env vars with their values, in registry order, leaving out the variables
    /// whose source this launch does not provide: the `"server_url"` ones of a server that
    /// also takes `"result_capability_url"` under brokered delivery, and the
    /// `"result_capability_url"` ones under direct delivery (rule `capability-url-server-url`
    /// gives such a server both). The other sources are always provided when their server is
    /// injected (rule `env-source-scope`).
    fn env_of<'s>(&'s self, server: &'static McpServer) -> Vec<(&'static str, &'s str)> {
        let url = non_blank(&self.server_url).unwrap_or_default();
        let capability = match &self.result_delivery {
            ResultDelivery::Direct => None,
            ResultDelivery::Brokered { capability_url } => Some(capability_url.as_str()),
        };
        let brokered_here = capability.is_some()
            && server
                .env
                .iter()
                .any(|(_, s)| *s == EnvSource::ResultCapabilityUrl);
        let review_context_url = match &self.snapshot {
            Snapshot::Own => None,
            Snapshot::Borrowed { review_context_url } => non_blank(review_context_url),
        };
        server
            .env
            .iter()
            .filter_map(|&(name, source)| {
                let value = match source {
                    EnvSource::ServerUrl if brokered_here => return None,
                    EnvSource::ServerUrl => url,
                    EnvSource::ResultCapabilityUrl => capability?,
                    // Build rule `agent-id-injection-only` keeps this source on
                    // injection-only entries.
                    EnvSource::AgentId => self.agent_id.as_str(),
                    EnvSource::ReviewContextUrl => review_context_url?,
                    EnvSource::Constant(value) => value,
                };
                Some((name, value))
            })
            .collect()
    }
}

/// `Some(s)` when `s` is set and not blank.
fn non_blank(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.trim().is_empty())
}

/// [`non_blank`] for a value that follows an option in argv (`--model M`): one starting with `-`
/// would be read as an option, so it is refused.
fn option_value<'a>(
    field: &'static str,
    value: &'a Option<String>,
) -> Result<Option<&'a str>, RenderError> {
    match non_blank(value) {
        Some(v) if v.starts_with('-') => Err(RenderError::OptionLike { field }),
        v => Ok(v),
    }
}

/// The absolute worktree an ACP session runs in (`session/new` `cwd`).
fn acp_cwd(client: Client, ctx: &LaunchContext) -> Result<&str, RenderError> {
    match non_blank(&ctx.worktree) {
        Some(w) if is_absolute(w) => Ok(w),
        _ => Err(RenderError::NeedsAbsolute {
            client,
            field: "worktree",
        }),
    }
}

/// The absolute per-launch directory, for a client that needs one.
fn launch_dir(client: Client, ctx: &LaunchContext) -> Result<&str, RenderError> {
    match non_blank(&ctx.launch_dir) {
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

/// The ACP `session/new` servers and their wire names, `wire_name` naming each by its id:
/// every server [`LaunchContext::servers`] injects (the `inject` servers by their condition,
/// the allowlisted ones), with the env values of this launch's delivery and snapshot.
fn acp_servers(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    wire_name: impl Fn(&McpServer) -> String,
) -> (Vec<plan::AcpServer>, Vec<plan::WireServer>) {
    let command = ctx.kcap_bin.as_deref().unwrap_or_default();
    ctx.servers(resolution)
        .map(|(server, env)| {
            let name = wire_name(server);
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

/// Refuses a `command`, `args` or `env` value holding `${` in `servers`, for a client
/// (`client`) whose expansion of variable references is not established (Cursor, Kiro,
/// Antigravity: facts \[K\] only), the same conservative rule as their registration files.
/// `wires` names each server by its registry id in the error.
fn refuse_unknown_expansion(
    client: Client,
    servers: &[plan::AcpServer],
    wires: &[plan::WireServer],
) -> Result<(), RenderError> {
    for (server, wire) in servers.iter().zip(wires) {
        let fields = std::iter::once(("command".to_owned(), server.command.as_str()))
            .chain(
                server
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (format!("args[{i}]"), a.as_str())),
            )
            .chain(
                server
                    .env
                    .iter()
                    .map(|v| (format!("env.{}", v.name), v.value.as_str())),
            );
        for (field, value) in fields {
            if value.contains("${") {
                return Err(RenderError::Expansion {
                    client,
                    server: wire.id.clone(),
                    field,
                    expands: UNKNOWN_EXPANSION,
                });
            }
        }
    }
    Ok(())
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
