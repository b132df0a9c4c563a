//! [`ClientSpec`]: what generic code needs to know about one client, declared once in the
//! client's room as `pub const SPEC: ClientSpec`.
//!
//! A `const` table rather than a trait: every field is data or a plain function, a room's
//! whole description reads as one literal, and [`Client::spec`] is a `const fn` (so
//! [`Client::name`] stays one). The list of clients is written once, in the `clients!`
//! invocation of `clients/mod.rs`, which generates [`Client`], [`Client::ALL`] and
//! [`Client::spec`]; generic code (dispatch, drift, doctor, install, export, the CLI) goes
//! through the spec and never names a client.

#[allow(unused_imports, reason = "named in the docs")]
use super::Client;
use super::dispatch::PlanInputs;
use super::plan::LaunchPlan;
use super::root::{CredentialSpec, ManagedFile};
use super::{LaunchContext, LaunchError, RenderError};
use crate::allowlist::Resolution;

/// A client's plan function, as [`Client::plan`] calls it once the allowlist is resolved
/// and the preflight passed: `(launch, resolved allowlist, inputs) -> plan`.
pub type PlanFn =
    fn(&LaunchContext, &Resolution<'_, String>, &PlanInputs) -> Result<LaunchPlan, LaunchError>;

/// A check of what no plan can keep out, beyond the client's administrator files (Gemini
/// CLI's `.env` files in the worktree's parents, Copilot CLI's package cache).
pub type PreflightFn = fn(&LaunchContext) -> Result<(), RenderError>;

/// Everything generic code needs to know about one client; each room declares its own as
/// `SPEC`, with the evidence of each fact beside it.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct ClientSpec {
    /// The name on the command line and in output (`claude`, `codex`, …).
    pub name: &'static str,
    /// The display name (`Claude Code`, `Codex CLI`, …).
    pub display_name: &'static str,
    /// The client's executable as its installer names it (`claude`, `agy`, …): what an
    /// operator passes as `--client-bin` when it is on `PATH`.
    pub binary: &'static str,
    /// Registrations append `--driver <client>` to the flow-starting server's args
    /// ([`Client::stamps_driver`]).
    pub stamps_driver: bool,
    /// The launch has a setting for the reviewer's `model` ([`Client::uncarried_values`]).
    pub carries_model: bool,
    /// The launch has a setting for the reviewer's `effort`.
    pub carries_effort: bool,
    /// The credentials and provider settings the daemon may hand the client: variable names
    /// and credential files, each file with what of it is kept ([`CredentialSpec`]); any
    /// other is refused ([`RenderError::CredentialNotAccepted`], naming these).
    pub credentials: CredentialSpec,
    /// The administrator files the client reads whatever the plan says, refused while
    /// they exist ([`super::root::managed_preflight`]).
    pub managed_files: &'static [ManagedFile],
    /// A further check of what the plan cannot keep out; `None` where there is none.
    pub preflight: Option<PreflightFn>,
    /// The reviewer is driven over ACP (the plan's `acp` session, started in the worktree);
    /// otherwise the client's own interface runs in the worktree.
    pub acp: bool,
    /// The launch needs the reviewer's worktree as an absolute path
    /// ([`LaunchContext::worktree`]); without it the plan is refused
    /// ([`RenderError::NeedsAbsolute`]).
    pub needs_worktree: bool,
    /// The launch needs brokered result delivery ([`crate::ResultDelivery::Brokered`]): the
    /// client's own HOME keeps the daemon's URL from the result channel, so the plan is
    /// refused without a capability URL ([`RenderError::NeedsBrokeredDelivery`]).
    pub brokered_only: bool,
    /// The launch draws a per-launch id ([`PlanInputs::launch_id`]): the client aliases
    /// server names with it. `render` takes `--launch-id HEX` for this client only.
    pub uses_launch_id: bool,
    /// The client's isolation is not verified: a launch needs the caller's opt-in
    /// ([`PlanInputs::unverified_isolation`]). `render` takes `--allow-unverified-isolation`
    /// for this client only.
    pub unverified_isolation: bool,
    /// The client's built-in tools that run unasked in its reviewer, by name in ASCII order
    /// (each once), each with what it does ([`super::tools`]); measured on the
    /// real client from its first model request, or taken from its documentation for a
    /// client not installable here.
    pub builtins: &'static [super::tools::Builtin],
    /// Under [`Policy::Strict`](crate::Policy::Strict) the room hides each of
    /// [`ClientSpec::builtins`] with effects from the model; otherwise the strict policy
    /// refuses a client that has any ([`RenderError::UnaskedTools`]).
    pub hides_builtins: bool,
    /// The variables the room sets to a per-launch secret
    /// ([`LaunchSecret`](super::plan::LaunchSecret): OpenCode's server password), hidden as
    /// credentials are where the plan is shown
    /// ([`LaunchPlan::to_json_without_credentials`](super::plan::LaunchPlan::to_json_without_credentials)).
    pub launch_secrets: &'static [&'static str],
    /// How the client's model APIs go through the reviewer's door ([`LaunchContext::door`]):
    /// one [`DoorSpec`](super::door::DoorSpec) per base-URL variable it can be pointed at (a
    /// launch hands over one). Empty where that is not measured, and a launch with a door
    /// is refused ([`RenderError::DoorUnsupported`]).
    pub door: &'static [super::door::DoorSpec],
    /// The room's plan function.
    pub plan: PlanFn,
    /// How the room's facts are known to hold on the real client.
    pub proof: Proof,
    /// The client's registration file format, its loader models and drift wording.
    #[cfg(feature = "cli")]
    pub registration: &'static crate::clients::registration::RegistrationFormat,
    /// The client's words in the command line's help (`render <client>`, `export <client>`).
    #[cfg(feature = "cli")]
    pub cli: &'static CliSpec,
    /// What `verify <client>` needs: the client's hostile configuration, how its launch is
    /// judged; `None` for a client `verify` cannot run (not installable here).
    #[cfg(feature = "cli")]
    pub verify: Option<&'static crate::clients::hostile::VerifySpec>,
}

/// The client's words in the command line's help: what `render <client>` and
/// `export <client>` print for `--help`, and the flags of earlier releases it still accepts.
/// The flags themselves are generic (`render`'s from [`ClientSpec::uses_launch_id`] and
/// [`ClientSpec::unverified_isolation`]).
#[cfg(feature = "cli")]
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CliSpec {
    /// `render <client>`'s one-line description (no final period, as clap shows it).
    pub render_about: &'static str,
    /// `render <client>`'s usage lines, `{cmd}` standing for `kcap-mcp-registry render
    /// <client>` (or `launch <client>`).
    pub render_usage: &'static str,
    /// `render <client> --help`'s epilogue.
    pub render_after_help: &'static str,
    /// Flags of earlier releases, accepted for one more release, hidden from the help and
    /// ignored with one warning naming them and saying [`CliSpec::deprecated_because`].
    pub deprecated_flags: &'static [DeprecatedFlag],
    /// Why the deprecated flags are ignored (after `ignored (deprecated, to be removed): `).
    pub deprecated_because: &'static str,
    /// `export <client>`'s one-line description (no final period).
    pub export_about: &'static str,
    /// Earlier names of `export <client>` still accepted (`claude-mcp-json`).
    pub export_aliases: &'static [&'static str],
    /// `export <client> --help`'s epilogue, if any.
    pub export_after_help: Option<&'static str>,
}

/// A flag of an earlier release ([`CliSpec::deprecated_flags`]).
#[cfg(feature = "cli")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeprecatedFlag {
    /// Its long name, without `--`.
    pub long: &'static str,
    /// Its value's name, for a flag that takes one.
    pub value_name: Option<&'static str>,
}

impl std::fmt::Debug for ClientSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSpec")
            .field("name", &self.name)
            .field("binary", &self.binary)
            .finish_non_exhaustive()
    }
}

/// How a room's facts are known to hold on the real client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Proof {
    /// Measured: the real client runs in these test files (`tests/<name>.rs`, real-client
    /// harness), which `.ci/run` runs with the client installed.
    RealClient {
        /// The test files' names, without `.rs`.
        tests: &'static [&'static str],
        /// The client versions those tests run on (the pins of `scripts/install-peers.sh`).
        versions: &'static [&'static str],
    },
    /// Not installable here: the room follows the original system's facts only, and its
    /// plan says so where isolation is unverified.
    FactsOnly,
}
