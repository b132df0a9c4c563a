//! [`LaunchRequest`]: one reviewer launch, built step by step, planned with one call. The way
//! in for a daemon: it sets what it knows (the launch command, its kcap server, the
//! directories, the credentials it hands over) and gets the plan, or the reason there is none.

use std::path::{Path, PathBuf};

use super::dispatch::{PlanInputs, PlannedLaunch, UnverifiedIsolation};
use super::plan::EnvVar;
use super::root::CredentialFile;
use super::version::ClientVersion;
use super::{Client, LaunchContext, LaunchError, RenderError};
use crate::allowlist::Policy;
use crate::wire::LaunchCommand;

/// One reviewer launch on one client: the launch command the daemon received, what the
/// daemon adds, and how strictly to plan it. [`LaunchRequest::plan`] is
/// [`Client::plan`] on the [`LaunchContext`] and [`PlanInputs`] these steps build.
///
/// Every setting has the safe default: the strict policy, no credentials, the per-launch
/// cache, a client whose isolation is unverified refused. Paths are paths; one that is not
/// UTF-8 is refused when planning ([`RenderError::NotUtf8`]), since every client reads its
/// configuration as text.
///
/// ```
/// use kcap_mcp_registry::{Client, LaunchCommand, LaunchRequest};
///
/// let cmd: LaunchCommand = serde_json::from_str(r#"{"agent_id":"a1","mcp_allowlist":["kcap-review"]}"#)?;
/// let launch = LaunchRequest::new(Client::Claude, cmd)
///     .server("http://127.0.0.1:5100", "/usr/local/bin/kcap")
///     .worktree("/srv/kcap/worktrees/review-42")
///     .launch_dir("/srv/kcap/launches/a1")
///     .credential_env("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
///     .credential_env("ANTHROPIC_API_KEY", "sk-…")
///     .door() // the key stays outside the reviewer
///     .plan()?;
/// assert_eq!(launch.plan.env_value("HOME"), Some("/srv/kcap/launches/a1/home"));
/// assert!(launch.plan.env_value("ANTHROPIC_API_KEY").unwrap().starts_with("kcap-door-"));
/// assert_eq!(launch.plan.servers[1].id, "kcap-review");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a launch request does nothing until it is planned"]
pub struct LaunchRequest {
    client: Client,
    ctx: LaunchContext,
    inputs: PlanInputs,
    kcap_bin: Option<PathBuf>,
    worktree: Option<PathBuf>,
    launch_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
}

impl LaunchRequest {
    /// The launch of `command` on `client`, under the strict policy, with no kcap server yet:
    /// until [`LaunchRequest::server`], every MCP server is gated off, which the strict policy
    /// refuses ([`RenderError::Gated`]) and the lenient one warns about.
    pub fn new(client: Client, command: LaunchCommand) -> LaunchRequest {
        let mut ctx = LaunchContext::from_command(command, "", "");
        ctx.server_url = None;
        ctx.kcap_bin = None;
        LaunchRequest {
            client,
            ctx,
            inputs: PlanInputs::new(Policy::Strict),
            kcap_bin: None,
            worktree: None,
            launch_dir: None,
            cache_dir: None,
        }
    }

    /// The kcap server the reviewer's MCP servers talk to (`KCAP_URL`) and the kcap binary
    /// that runs them (their `command`).
    pub fn server(mut self, url: impl Into<String>, kcap_bin: impl AsRef<Path>) -> Self {
        self.ctx.server_url = Some(url.into());
        self.kcap_bin = Some(kcap_bin.as_ref().to_owned());
        self
    }

    /// The worktree the reviewer reviews, absolute: where the client starts (Codex, the
    /// terminal clients) or the ACP session's `cwd`.
    pub fn worktree(mut self, dir: impl AsRef<Path>) -> Self {
        self.worktree = Some(dir.as_ref().to_owned());
        self
    }

    /// The per-launch directory, absolute: created empty by the executor, the client's
    /// HOME and files inside it, removed when the reviewer stops.
    pub fn launch_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.launch_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// A credential or provider setting handed to the client as an environment variable
    /// (`ANTHROPIC_API_KEY`): only the names the client's room accepts pass
    /// ([`RenderError::CredentialNotAccepted`] otherwise).
    pub fn credential_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.ctx.credentials.env.push(EnvVar::new(name, value));
        self
    }

    /// A credential file handed to the client by its name in the client's room
    /// (`auth.json` for Codex CLI), its contents as the user's client stored them.
    pub fn credential_file(mut self, name: impl Into<String>, contents: impl Into<String>) -> Self {
        self.ctx.credentials.files.push(CredentialFile {
            name: name.into(),
            contents: contents.into(),
        });
        self
    }

    /// A cache directory the daemon keeps for this client across launches
    /// ([`LaunchContext::cache_dir`]).
    pub fn cache_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cache_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Puts the reviewer behind the door ([`LaunchContext::door`]): a network of its own
    /// whose only way out is the endpoints the plan names, the model key kept outside (hand
    /// over the model API's base URL and key with [`LaunchRequest::credential_env`]:
    /// `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` for Claude Code). docs/network.md.
    pub fn door(mut self) -> Self {
        self.ctx.door = true;
        self
    }

    /// The allowlist policy (default [`Policy::Strict`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.inputs.policy = policy;
        self
    }

    /// The version of the client binary the launch starts, as read from `<client>
    /// --version` ([`ClientVersion::new`], [`ClientVersion::verified_here`] once a `verify`
    /// record of this binary matched): under the strict policy a version neither proven nor
    /// verified is refused ([`RenderError::UnprovenVersion`]). Not given: not checked.
    pub fn client_version(mut self, version: ClientVersion) -> Self {
        self.inputs.client_version = Some(version);
        self
    }

    /// Plans a client whose isolation is not verified (Cursor) instead of refusing it: the
    /// caller accepts that servers of the user's own configuration may start beside kcap's.
    pub fn allow_unverified_isolation(mut self) -> Self {
        self.inputs.unverified_isolation = UnverifiedIsolation::Allow;
        self
    }

    /// The launch context these steps built (for a caller that plans through
    /// [`Client::plan`] itself).
    ///
    /// # Errors
    /// [`RenderError::NotUtf8`] for a path that is not UTF-8.
    pub fn context(&self) -> Result<LaunchContext, RenderError> {
        let text = |field: &'static str, path: &Option<PathBuf>| {
            path.as_deref()
                .map(|p| {
                    p.to_str()
                        .map(str::to_owned)
                        .ok_or(RenderError::NotUtf8 { field })
                })
                .transpose()
        };
        let mut ctx = self.ctx.clone();
        ctx.kcap_bin = text("kcap_bin", &self.kcap_bin)?;
        ctx.worktree = text("worktree", &self.worktree)?;
        ctx.launch_dir = text("launch_dir", &self.launch_dir)?;
        ctx.cache_dir = text("cache_dir", &self.cache_dir)?;
        Ok(ctx)
    }

    /// The plan of this launch, with its warnings: [`Client::plan`].
    ///
    /// # Errors
    /// As [`Client::plan`]; [`RenderError::NotUtf8`] for a path that is not UTF-8.
    pub fn plan(&self) -> Result<PlannedLaunch, LaunchError> {
        self.client.plan(&self.context()?, &self.inputs)
    }
}
