//! One call from a launch to a plan, for any client: [`Client::plan`], or
//! [`Client::plan_resolved`] for a caller that resolved the allowlist itself.
//!
//! Its callers: [`LaunchRequest::plan`](super::LaunchRequest::plan), a daemon's way in, which
//! builds the [`LaunchContext`] and [`PlanInputs`] step by step; the CLI's `render` and `launch`
//! (`plan_resolved`, against the registry they name); `verify` (`ops::verify`); `doctor
//! --project` reads a room's plan without these checks (`room_plan`). Each call
//! resolves the allowlist under the caller's policy, checks the administrator files the client
//! would read ([`managed_preflight`](super::root::managed_preflight)), draws a fresh
//! [`LaunchId`] for the clients that alias server names, and has the client's room render the
//! plan. A launch value the client cannot carry (a model or effort it has no setting for) is
//! refused under [`Policy::Strict`] and a warning under [`Policy::Lenient`], never dropped in
//! silence; a client whose isolation is not verified (Cursor, Kiro, Antigravity) is refused
//! under either policy unless the caller opts in ([`UnverifiedIsolation::Allow`]), and its plan
//! then carries a warning.

use std::path::{Path, PathBuf};

use super::plan::{LaunchId, LaunchPlan, LaunchSecret};
use super::version::ClientVersion;
use super::{Client, LaunchContext, LaunchError, RenderError, non_blank, root};
use crate::allowlist::Policy;

/// The most skipped allowlist entries [`Client::plan`] names in its warnings, one warning
/// each; the rest are counted in one more warning.
pub const MAX_SKIP_WARNINGS: usize = 32;

/// Refuses a control or invisible character ([`crate::text::is_forbidden_char`], the rule
/// the CLI applies to its flags) in the values that name the reviewer, the server it reports
/// to, its directories, its model and its effort: the client would get, show or log another
/// value than the one the daemon meant.
///
/// # Errors
/// [`RenderError::ForbiddenChar`] for the first such value.
fn check_values(ctx: &LaunchContext) -> Result<(), RenderError> {
    let capability_url = match &ctx.result_delivery {
        super::ResultDelivery::Brokered { capability_url } => Some(capability_url.as_str()),
        super::ResultDelivery::Direct => None,
    };
    let review_context_url = match &ctx.snapshot {
        super::Snapshot::Borrowed { review_context_url } => review_context_url.as_deref(),
        super::Snapshot::Own => None,
    };
    let values = [
        ("agent_id", Some(ctx.agent_id.as_str())),
        ("server_url", ctx.server_url.as_deref()),
        ("kcap_bin", ctx.kcap_bin.as_deref()),
        ("result_capability_url", capability_url),
        ("review_context_url", review_context_url),
        ("worktree", ctx.worktree.as_deref()),
        ("launch_dir", ctx.launch_dir.as_deref()),
        ("cache_dir", ctx.cache_dir.as_deref()),
        ("model", ctx.model.as_deref()),
        ("effort", ctx.effort.as_deref()),
    ];
    for (field, value) in values {
        let Some(value) = value else { continue };
        if let Some(found) = value.chars().find(|&c| crate::text::is_forbidden_char(c)) {
            return Err(RenderError::ForbiddenChar {
                field,
                value: value.to_owned(),
                found,
            });
        }
    }
    Ok(())
}

/// Refuses, for a client in a pseudo-terminal (a plan without `session_new`), a prompt
/// holding a character such a prompt cannot carry
/// ([`is_refused_in_terminal_prompt`](super::plan::is_refused_in_terminal_prompt), which
/// says why, and which it keeps: line breaks, tabs, invisible characters). An ACP client's
/// prompt, sent as JSON, carries every character.
///
/// # Errors
/// [`RenderError::ForbiddenChar`], field `prompt`, naming the first such character.
fn check_terminal_prompt(ctx: &LaunchContext, plan: &LaunchPlan) -> Result<(), RenderError> {
    let Some(prompt) = ctx.prompt.as_deref().filter(|_| plan.session_new.is_none()) else {
        return Ok(());
    };
    match prompt
        .chars()
        .find(|&c| super::plan::is_refused_in_terminal_prompt(c))
    {
        Some(found) => Err(RenderError::ForbiddenChar {
            field: "prompt",
            value: prompt.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

/// The caller's answer to a launch whose isolation is not verified
/// ([`Isolation::Unverified`](super::plan::Isolation::Unverified): Cursor, Kiro, Antigravity,
/// the clients whose spec says `unverified_isolation`), under either policy. [`PlanInputs`]
/// defaults to [`UnverifiedIsolation::Refuse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnverifiedIsolation {
    /// Refuse the launch, under either policy ([`RenderError::UnverifiedIsolation`]).
    Refuse,
    /// Render it anyway, with a warning: the caller accepts that servers of the user's or
    /// the repository's configuration may start beside the injected ones
    /// (`render <client> --allow-unverified-isolation`).
    Allow,
}

/// What a launch needs beyond its [`LaunchContext`]: the policy, and the inputs some clients
/// need. Build it with [`PlanInputs::new`]; every other field has the safe default.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlanInputs {
    /// The allowlist policy: [`Policy::Strict`] refuses what [`Policy::Lenient`] skips with a
    /// warning.
    pub policy: Policy,
    /// The per-launch id of clients that alias server names (Gemini CLI, Kiro). `None`
    /// (default): drawn from the operating system's CSPRNG for this launch. Set it only for
    /// reproducible output; never from launch data.
    pub launch_id: Option<LaunchId>,
    /// The password of a client's own local server (OpenCode). `None` (default): drawn from
    /// the operating system's CSPRNG for this launch. Set it only for reproducible output.
    pub launch_secret: Option<LaunchSecret>,
    /// The answer to a client whose isolation is not verified (Cursor, Kiro, Antigravity).
    /// Default [`UnverifiedIsolation::Refuse`]: refused under every policy.
    pub unverified_isolation: UnverifiedIsolation,
    /// Where the client's administrator files are looked for: `/` (default) on a real
    /// launch, a directory of a test's own otherwise.
    pub system_root: PathBuf,
    /// The version of the client binary the launch starts, as the caller read it
    /// (`<client> --version`), and whether `verify` passed for that binary here
    /// ([`ClientVersion::verified_here`]). A version neither proven
    /// ([`Client::proven_on`]) nor verified is refused under [`Policy::Strict`]
    /// ([`RenderError::UnprovenVersion`]) and a warning under [`Policy::Lenient`]. `None`
    /// (default): not checked.
    pub client_version: Option<ClientVersion>,
}

impl PlanInputs {
    /// The launch id of this launch: [`PlanInputs::launch_id`], or a fresh one from the
    /// operating system's CSPRNG.
    ///
    /// # Errors
    /// [`LaunchError::LaunchId`] when no random id can be drawn.
    pub fn launch_id(&self) -> Result<LaunchId, LaunchError> {
        match self.launch_id {
            Some(id) => Ok(id),
            None => Ok(LaunchId::random()?),
        }
    }

    /// The secret of this launch: [`PlanInputs::launch_secret`], or a fresh one from the
    /// operating system's CSPRNG.
    ///
    /// # Errors
    /// [`LaunchError::LaunchId`] when no random secret can be drawn.
    pub fn launch_secret(&self) -> Result<LaunchSecret, LaunchError> {
        match &self.launch_secret {
            Some(secret) => Ok(secret.clone()),
            None => Ok(LaunchSecret::random()?),
        }
    }

    /// The inputs for `policy`, every other field at its default.
    pub fn new(policy: Policy) -> PlanInputs {
        PlanInputs {
            policy,
            launch_id: None,
            launch_secret: None,
            unverified_isolation: UnverifiedIsolation::Refuse,
            system_root: PathBuf::from("/"),
            client_version: None,
        }
    }
}

/// A rendered launch: the plan to carry out, and the warnings to log with it (allowlist
/// entries skipped under [`Policy::Lenient`], launch values the client cannot carry, a client
/// version neither proven nor verified, an unverified isolation the caller accepted), each
/// one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedLaunch {
    /// The plan.
    pub plan: LaunchPlan,
    /// Warnings, in the order they arose.
    pub warnings: Vec<String>,
}

impl Client {
    /// Renders the reviewer launch of `ctx` on this client: resolves its allowlist under
    /// `inputs.policy` against the compiled-in registry, refuses a launch the client's
    /// administrator files would reconfigure (and, for Gemini CLI and Qwen Code, one whose
    /// worktree's parents hold an environment file it would load), and returns the plan with
    /// its warnings.
    ///
    /// # Errors
    /// [`LaunchError::Rejected`] when the strict policy refuses an allowlist entry;
    /// [`LaunchError::Render`] with [`RenderError::Managed`] for an administrator file,
    /// [`RenderError::ParentEnvFile`] for a parent's environment file,
    /// [`RenderError::Unsupported`] for a model or effort the client has no setting for
    /// and [`RenderError::UnprovenVersion`] for a client version neither proven nor
    /// verified here ([`PlanInputs::client_version`]; strict policy only),
    /// [`RenderError::DoorUnsupported`],
    /// [`RenderError::DoorUpstream`] and [`RenderError::DoorCredential`] for a launch behind
    /// the door ([`LaunchContext::door`], [`super::door::through`]),
    /// [`RenderError::UnverifiedIsolation`] for a client whose isolation is not verified
    /// unless [`PlanInputs::unverified_isolation`] allows it, and every error of the
    /// client's plan function; [`LaunchError::LaunchId`] when no launch id can be drawn.
    ///
    /// ```
    /// use kcap_mcp_registry::clients::Client;
    /// use kcap_mcp_registry::clients::dispatch::PlanInputs;
    /// use kcap_mcp_registry::{LaunchCommand, LaunchContext, Policy};
    ///
    /// let cmd: LaunchCommand = serde_json::from_str(r#"{"agent_id":"a1"}"#)?;
    /// let mut ctx = LaunchContext::from_command(cmd, "http://127.0.0.1:5100", "/usr/bin/kcap");
    /// ctx.worktree = Some("/work/tree".into());
    /// ctx.launch_dir = Some("/run/kcap/l1".into());
    /// for client in [Client::Claude, Client::Gemini, Client::OpenCode] {
    ///     let launch = client.plan(&ctx, &PlanInputs::new(Policy::Strict))?;
    ///     assert_eq!(launch.plan.client, client);
    ///     assert_eq!(launch.plan.env_value("HOME"), Some("/run/kcap/l1/home"));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plan(
        self,
        ctx: &LaunchContext,
        inputs: &PlanInputs,
    ) -> Result<PlannedLaunch, LaunchError> {
        let resolution = ctx.resolve(inputs.policy)?;
        let mut planned = self.plan_resolved(ctx, &resolution, inputs)?;
        let agent = &ctx.agent_id;
        let mut skipped = resolution.skipped();
        let mut shown: Vec<String> = skipped
            .by_ref()
            .take(MAX_SKIP_WARNINGS)
            .map(|s| format!("agent {agent:?}: {s}"))
            .collect();
        let more = skipped.count();
        if more > 0 {
            shown.push(format!(
                "agent {agent:?}: {more} more allowlist entries skipped (the first \
                 {MAX_SKIP_WARNINGS} are listed)"
            ));
        }
        planned.warnings.splice(0..0, shown);
        Ok(planned)
    }

    /// [`Client::plan`] for an allowlist already resolved (against another registry than
    /// the compiled-in one, as `render --registry DIR` does): the same checks and plan; the
    /// warnings leave out the skipped allowlist entries, which `resolution` holds.
    ///
    /// # Errors
    /// As [`Client::plan`], but for the strict policy's refusal, which resolving does.
    pub fn plan_resolved(
        self,
        ctx: &LaunchContext,
        resolution: &crate::allowlist::Resolution<'_, String>,
        inputs: &PlanInputs,
    ) -> Result<PlannedLaunch, LaunchError> {
        check_values(ctx)?;
        self.check_paths(ctx)?;
        self.preflight(ctx, &inputs.system_root)?;
        let mut warnings = self.gated(ctx, inputs.policy)?;
        warnings.extend(self.uncarried_values(ctx, inputs.policy)?);
        warnings.extend(self.check_version(ctx, inputs.client_version.as_ref(), inputs.policy)?);
        // Behind the door the room plans the launch with the door's URLs and token.
        let behind;
        let (ctx, door) = match ctx.door {
            true => {
                let token = inputs.launch_secret()?;
                let (c, door) = super::door::through(self, ctx, &token)?;
                behind = c;
                (&behind, Some(door))
            }
            false => (ctx, None),
        };
        let mut plan = self.room_plan(ctx, resolution, inputs)?;
        plan.unasked = super::tools::unasked(self, inputs.policy)?;
        plan.door = door;
        self.check_argv(ctx, &plan)?;
        check_terminal_prompt(ctx, &plan)?;
        if let super::plan::Isolation::Unverified { reason } = &plan.isolation {
            warnings.push(format!(
                "agent {:?}: the {self} launch's isolation is not verified: {reason}",
                ctx.agent_id
            ));
        }
        Ok(PlannedLaunch { plan, warnings })
    }
    /// A launch whose MCP servers are all gated off ([`LaunchContext::is_gated`]): refused
    /// under [`Policy::Strict`] ([`RenderError::Gated`]), a warning under [`Policy::Lenient`]
    /// (the reviewer then has no result channel). Never silent: a daemon that forgot its kcap
    /// server would otherwise launch reviewers that cannot report.
    fn gated(self, ctx: &LaunchContext, policy: Policy) -> Result<Vec<String>, RenderError> {
        if !ctx.is_gated() {
            return Ok(Vec::new());
        }
        match policy {
            Policy::Strict => Err(RenderError::Gated { client: self }),
            Policy::Lenient => Ok(vec![format!(
                "agent {:?}: no kcap server URL or no kcap binary (--server-url, --kcap-bin; \
                 `LaunchRequest::server`), so every MCP server (the result channel and any \
                 allowlist) is gated off",
                ctx.agent_id
            )]),
        }
    }

    /// Refuses a relative `worktree`, `launch_dir` or `cache_dir`: the client would resolve it
    /// against wherever it happens to start, which is not where the daemon meant.
    fn check_paths(self, ctx: &LaunchContext) -> Result<(), RenderError> {
        for (field, value) in [
            ("worktree", &ctx.worktree),
            ("launch_dir", &ctx.launch_dir),
            ("cache_dir", &ctx.cache_dir),
        ] {
            if non_blank(value).is_some_and(|v| !Path::new(v).is_absolute()) {
                return Err(RenderError::NeedsAbsolute {
                    client: self,
                    field,
                });
            }
        }
        Ok(())
    }

    /// Refuses a plan whose argv the kernel cannot pass: an argument of more than
    /// [`MAX_ARG_BYTES`](super::plan::MAX_ARG_BYTES), or one holding a NUL (the prompt, for
    /// the clients that take it in argv: Claude Code, Codex CLI, Antigravity).
    fn check_argv(self, ctx: &LaunchContext, plan: &LaunchPlan) -> Result<(), RenderError> {
        let limit = super::plan::MAX_ARG_BYTES;
        let Some(arg) = plan
            .argv
            .iter()
            .find(|a| a.len() + 1 > limit || a.contains('\0'))
        else {
            return Ok(());
        };
        Err(RenderError::ArgvUnpassable {
            client: self,
            prompt: ctx.prompt.as_deref().is_some_and(|p| arg.contains(p)),
            bytes: arg.len(),
            nul: arg.contains('\0'),
        })
    }

    /// The plan of this client's room for `ctx` and its resolved allowlist, without
    /// [`Client::preflight`] or [`Client::uncarried_values`]: what [`Client::plan`] renders
    /// once those pass, and what `doctor --project` reads `worktree_remove` from (it looks
    /// at the plan, not at this machine's administrator files).
    ///
    /// # Errors
    /// Every error of the client's plan function; [`LaunchError::LaunchId`].
    pub(crate) fn room_plan(
        self,
        ctx: &LaunchContext,
        r: &crate::allowlist::Resolution<'_, String>,
        inputs: &PlanInputs,
    ) -> Result<LaunchPlan, LaunchError> {
        (self.spec().plan)(ctx, r, inputs)
    }

    /// The client versions whose isolation this crate's tests prove on the real client
    /// (the versions `scripts/install-peers.sh` pins; `tests/conformance*.rs`,
    /// `tests/isolation_*.rs`), as `--version` names them; empty for the clients not
    /// installable here (Cursor, Kiro, Antigravity: facts only). On another version,
    /// `kcap-mcp-registry verify` is the proof.
    pub fn proven_on(self) -> &'static [&'static str] {
        match self.spec().proof {
            super::spec::Proof::RealClient { versions, .. } => versions,
            super::spec::Proof::FactsOnly => &[],
        }
    }

    /// What no plan can keep out, refused before the launch: the client's administrator
    /// files under `system_root` ([`root::managed_preflight`]) and its room's further
    /// check, if any ([`ClientSpec::preflight`](super::spec::ClientSpec::preflight): Gemini
    /// CLI's environment files in the worktree's parents, [`super::gemini::preflight`]; Copilot
    /// CLI's package cache, [`super::copilot::preflight`]). The one implementation
    /// [`Client::plan`] and the CLI's `render` share.
    ///
    /// # Errors
    /// [`RenderError::Managed`], [`RenderError::WorktreeInRepository`] (a worktree inside
    /// another git repository, [`root::worktree_preflight`]), [`RenderError::ParentEnvFile`],
    /// [`RenderError::UnsafeCache`].
    pub fn preflight(self, ctx: &LaunchContext, system_root: &Path) -> Result<(), RenderError> {
        root::managed_preflight(self, self.managed_files(), system_root)?;
        root::worktree_preflight(self, ctx)?;
        match self.spec().preflight {
            Some(preflight) => preflight(ctx),
            None => Ok(()),
        }
    }

    /// The launch values (`model`, `effort`) set in `ctx` that this client has no setting
    /// for: under [`Policy::Lenient`] one warning each (the launch goes on without them),
    /// under [`Policy::Strict`] a refusal. The one implementation [`Client::plan`] and the
    /// CLI's `render` share.
    ///
    /// # Errors
    /// [`RenderError::Unsupported`] under [`Policy::Strict`], for the first such value.
    pub fn uncarried_values(
        self,
        ctx: &LaunchContext,
        policy: Policy,
    ) -> Result<Vec<String>, RenderError> {
        let (model, effort) = (self.spec().carries_model, self.spec().carries_effort);
        let mut warnings = Vec::new();
        for (field, carried, value) in [
            ("model", model, &ctx.model),
            ("effort", effort, &ctx.effort),
        ] {
            if carried || non_blank(value).is_none() {
                continue;
            }
            match policy {
                Policy::Strict => {
                    return Err(RenderError::Unsupported {
                        client: self,
                        field,
                    });
                }
                Policy::Lenient => warnings.push(format!(
                    "agent {:?}: the {self} launch has no setting for the reviewer's `{field}`; \
                     launched without it",
                    ctx.agent_id
                )),
            }
        }
        Ok(warnings)
    }
}
