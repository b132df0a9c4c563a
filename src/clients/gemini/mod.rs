//! Gemini CLI's room: the reviewer launch over ACP (`gemini_plan`) and what generic code knows
//! about the client ([`SPEC`], [`CREDENTIALS`], [`MANAGED_FILES`], [`WORKTREE_CONFIG`],
//! [`ROOT_SETTINGS`], the tool-name budget [`GEMINI_TOOL_NAMES`]). What Qwen Code, its fork,
//! does alike is written once for both rooms in `src/clients/gemini_family/`; this room passes
//! in Gemini CLI's own facts.
//!
//! Files: [`ready`] says when the servers are up (Gemini's debug log), [`tools`] lists the
//! built-in tools that run unasked; with the `cli` feature, `registration` (the file a person
//! registers servers in), `loader` (how Gemini CLI loads it) and `hostile` (`verify`'s hostile
//! configuration).
//!
//! What Gemini CLI does, on which version, and the test that shows it (how it takes, gates and
//! names MCP servers, its configuration sources and how each is closed, trust, the parent `.env`
//! files): `docs/isolation/gemini.md`.

pub mod ready;
#[cfg(feature = "cli")]
pub mod registration;
pub mod tools;

/// `verify`: the hostile configuration of this client.
#[cfg(feature = "cli")]
pub mod hostile;

#[cfg(feature = "cli")]
pub mod loader;

use std::path::Path;

use crate::allowlist::Resolution;
use crate::clients::gemini_family;
use crate::clients::plan::{LaunchId, LaunchPlan};
use crate::clients::root::{CredentialSpec, ManagedFile};
use crate::clients::{Client, LaunchContext, RenderError};
use crate::model::GEMINI_TOOL_NAMES;

/// What Gemini CLI does with `${` in an ACP server's `env` ([`RenderError::Expansion`];
/// 0.61.0).
pub const EXPANDS: &str =
    "which Gemini CLI expands as a variable reference in ACP server env values";

/// What generic code knows about Gemini CLI ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "gemini",
    display_name: "Gemini CLI",
    // the npm package `@google/gemini-cli` installs `gemini`.
    binary: "gemini",
    stamps_driver: true,
    carries_model: true,
    carries_effort: false,
    credentials: CREDENTIALS,
    managed_files: &MANAGED_FILES,
    preflight: Some(preflight),
    acp: true,
    needs_worktree: true,
    brokered_only: false,
    uses_launch_id: true,
    unverified_isolation: false,
    builtins: tools::BUILTINS,
    hides_builtins: true,
    launch_secrets: &[],
    door: &[DOOR],
    plan: |ctx, r, inputs| Ok(gemini_plan(ctx, r, &inputs.launch_id()?, inputs.policy)?),
    proof: crate::clients::spec::Proof::RealClient {
        tests: &[
            "conformance_acp",
            "isolation_gemini",
            "differential_gemini",
            "verify_clients",
        ],
        versions: &["0.61.0"],
    },
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: Some(&hostile::VERIFY),
};

/// The client's words in `render gemini --help` and `export gemini --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Gemini CLI over ACP: servers in `session/new` under per-launch aliased names",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
    render_after_help: "\
Example:
  kcap-mcp-registry render gemini --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "Gemini CLI: `mcpServers` for ~/.gemini/settings.json (read-only servers trusted)",
    export_aliases: &[],
    export_after_help: None,
};

/// The longest tool name Gemini CLI 0.61.0 passes on uncut: 63
/// ([`GEMINI_TOOL_NAMES`], the row registry rule `tool-name-length` checks).
pub const MAX_TOOL_NAME: usize = GEMINI_TOOL_NAMES.max_len;

/// The name Gemini CLI gives tool `tool` of the server named `wire_name`:
/// `mcp_<wire name>_<tool>` (before its replacement of characters outside
/// `[A-Za-z0-9_.:-]`, which registry ids, aliases and tool names never hold).
pub fn qualified_tool_name(wire_name: &str, tool: &str) -> String {
    GEMINI_TOOL_NAMES.qualified(wire_name, tool)
}

pub use crate::clients::gemini_family::deny_all_name;

/// The Gemini CLI reviewer launch: argv `--acp --skip-trust --approval-mode yolo
/// --allowed-mcp-server-names <wire names, comma-separated>`, then `--model M` when set; the
/// servers in `session/new` under their aliased names. Every injected server is aliased: the
/// `inject` servers (the result channel, and `kcap-review-context` in a borrowed-snapshot
/// review) as much as the allowlisted ones, with their env values for this launch's result
/// delivery and snapshot ([`LaunchContext::result_delivery`], [`LaunchContext::snapshot`]).
/// The effort is not a Gemini setting and is ignored; the prompt goes in ACP
/// `session/prompt`, which the daemon sends.
///
/// The launch is rooted in the per-launch directory (module docs): the root's environment,
/// then the credentials, then `GEMINI_CLI_HOME` (the per-launch home),
/// `GEMINI_CLI_SYSTEM_SETTINGS_PATH` and `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` (absent files under
/// [`SYSTEM_DIR`]) and `GEMINI_CLI_TRUST_WORKSPACE=true`; one file, [`ROOT_SETTINGS`] in the
/// per-launch home; the worktree's [`WORKTREE_CONFIG`] removed. Before carrying it out the
/// daemon runs [`env_file_preflight`] on the worktree and
/// [`managed_preflight`](crate::clients::root::managed_preflight) on [`MANAGED_FILES`].
///
/// Under `policy` [`Policy::Strict`](crate::Policy::Strict) the plan hides the client's
/// built-in tools with effects from its model ([`tools`](crate::clients::tools)), and
/// [`LaunchPlan::unasked`] lists the rest.
///
/// # Errors
/// [`RenderError::Expansion`] when a server's env value contains `${`;
/// [`RenderError::NeedsAbsolute`] without an absolute worktree or launch directory;
/// [`RenderError::ParentInSandbox`] for a worktree with a parent in the plan's sandbox
/// (`gemini_family::readable_parent`);
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`]; [`RenderError::OptionLike`] for a model starting
/// with `-`; [`RenderError::CredentialNotAccepted`] for a credential [`CREDENTIALS`] does not
/// list.
///
/// ```
/// use kcap_mcp_registry::{Client, LaunchContext, Policy};
/// use kcap_mcp_registry::clients::{dispatch::PlanInputs, plan::LaunchId};
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     ..LaunchContext::default()
/// };
/// let mut inputs = PlanInputs::new(Policy::Strict);
/// inputs.launch_id = Some(LaunchId::from_hex("0123456789abcdef")?);
/// let plan = Client::Gemini.plan(&ctx, &inputs)?.plan;
/// assert_eq!(plan.argv[4..], ["--allowed-mcp-server-names", "kcap-flow-result-0123456789abcdef"]);
/// assert_eq!(plan.env_value("GEMINI_CLI_HOME"), Some("/run/kcap/l1/home"));
/// assert_eq!(plan.worktree_remove, [".gemini", ".env", ".agents", "GEMINI.md"]);
/// let session = plan.session_new.unwrap();
/// assert_eq!(session.mcp_servers[0].name, "kcap-flow-result-0123456789abcdef");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub(crate) fn gemini_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    launch_id: &LaunchId,
    policy: crate::Policy,
) -> Result<LaunchPlan, RenderError> {
    let mut plan = gemini_family::plan(&LAUNCH, ctx, resolution, launch_id, policy)?;
    ready::wait_for_servers(&mut plan);
    Ok(plan)
}

/// Gemini CLI's launch in the family's shape ([`gemini_family::plan`]): `--acp`, then
/// `--skip-trust` and `--approval-mode yolo` (module docs); [`WORKTREE_CONFIG`] removed;
/// `${` refused in server env values ([`EXPANDS`]); `GEMINI_CLI_HOME` the per-launch home;
/// the system settings moved to [`SYSTEM_DIR`]; the workspace trusted from the start;
/// [`ROOT_SETTINGS`] written, the credentials left in the environment (Gemini CLI withholds
/// secret-looking variables from its servers); the parents' `.gemini/.env` and `.env`
/// refused ([`env_file_preflight`]).
const LAUNCH: gemini_family::AcpLaunch = gemini_family::AcpLaunch {
    client: Client::Gemini,
    flags: &["--acp", "--skip-trust", "--approval-mode", "yolo"],
    worktree_config: &WORKTREE_CONFIG,
    expands_env: Some(EXPANDS),
    home_var: ("GEMINI_CLI_HOME", None),
    system_dir: SYSTEM_DIR,
    system_vars: [
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
        "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    ],
    fixed_env: &[("GEMINI_CLI_TRUST_WORKSPACE", "true")],
    settings_file: ROOT_SETTINGS.0,
    settings: gemini_family::Settings::Fixed(ROOT_SETTINGS.1),
    env_files: [".gemini/.env", ".env"],
};

/// The directory, relative to the per-launch directory, where `GEMINI_CLI_SYSTEM_SETTINGS_PATH`
/// and `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` point: the plan never creates it, so Gemini CLI reads
/// no system settings (an absent file is an empty layer) instead of `/etc/gemini-cli/`.
pub const SYSTEM_DIR: &str = "gemini-system";

/// The user settings the plan writes, as (path relative to the per-launch home, contents):
/// `hooksConfig.enabled = false` turns the hook system off. No other source of hooks is left
/// (measured: the root, the system paths and the worktree removal keep every hook out), so
/// this is a second lock: with it, a trusted worktree's own `.gemini/settings.json` hooks did
/// not run either (0.61.0).
pub const ROOT_SETTINGS: (&str, &str) = (
    ".gemini/settings.json",
    "{\"hooksConfig\":{\"enabled\":false}}\n",
);

/// How Gemini CLI's model API goes through the reviewer's door: it sends `GEMINI_API_KEY` as
/// `x-goog-api-key` to `GOOGLE_GEMINI_BASE_URL` (plain http on the loopback interface, which
/// the door's endpoint is). Measured on 0.61.0:
/// `isolation_gemini::behind_the_door_the_key_stays_outside_and_only_the_door_is_reached`
/// (the first model request through the door carried the daemon's key from the door, no
/// header the token; Gemini withholds the key's variable from its servers by itself, so the
/// door keeps it out of the client).
pub const DOOR: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: "GOOGLE_GEMINI_BASE_URL",
    keys: &[crate::clients::door::DoorKey {
        var: "GEMINI_API_KEY",
        header: "x-goog-api-key",
        prefix: "",
    }],
    key_files: &[],
    settings: &[],
};

/// The credentials and provider settings the daemon may hand a Gemini CLI reviewer: the
/// Gemini API key and the API endpoint. Over ACP, Gemini CLI 0.61.0 authenticates with
/// `GEMINI_API_KEY`, or as a gateway when `GOOGLE_GEMINI_BASE_URL` is set (an https URL, or
/// plain http on the loopback interface). Not accepted: Google login (`oauth_creds.json`),
/// application default credentials and the Code Assist variables, because that auth fetches
/// remote admin controls from Code Assist that can switch MCP off, add servers and forbid
/// `yolo` (measured against a stand-in Code Assist server: `fetchAdminControls` was
/// requested); Vertex AI, which ACP selects only through a settings file.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &["GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"],
    files: &[],
};

/// The reviewed worktree's files Gemini CLI reads as configuration: the project's
/// `.gemini/` folder (settings with MCP servers, hooks, tool exclusions and `mcp.excluded`;
/// `.gemini/.env`; policies, agents, commands, skills), `.env` (loaded into its
/// environment and its servers') and `.agents/` (its `skills/<name>/SKILL.md` offered to the
/// model, a built-in skill's description replaced by one of the same name: measured on
/// 0.61.0, issue 34, `isolation_gemini::repository_skills_reach_no_model_request`), and
/// `GEMINI.md`: its text is sent to the model as context, and a pull request can add or edit
/// it. No setting drops that file: `context.fileName` adds names to `GEMINI.md`
/// (`setGeminiMdFilename` keeps the current names, 0.61.0's bundle). Measured on 0.61.0
/// (`isolation_gemini::instruction_files_reach_no_model_request`): the worktree's `GEMINI.md`
/// was in the first model request unless removed; `AGENTS.md` (not a context file name by
/// default), a subfolder's `GEMINI.md` and a parent folder's (above the worktree, no git root)
/// were not. The removed files stay readable to the reviewer as `pr_config`.
pub const WORKTREE_CONFIG: [&str; 4] = [".gemini", ".env", ".agents", "GEMINI.md"];

/// The administrator file Gemini CLI reads whatever its environment says:
/// `/etc/gemini-cli/policies` (its settings files are kept out through
/// `GEMINI_CLI_SYSTEM_SETTINGS_PATH` and `GEMINI_CLI_SYSTEM_DEFAULTS_PATH`).
pub const MANAGED_FILES: [ManagedFile; 1] = [ManagedFile {
    path: "/etc/gemini-cli/policies",
    effect: "holds admin-tier policy rules above every other: a `deny` rule for MCP tools hides \
             the reviewer's tools from the model, an `ask_user` rule makes their calls wait for \
             a permission no one grants",
}];

/// Refuses a Gemini CLI launch in `worktree` while a parent directory of it holds `.env` or
/// `.gemini/.env`.
///
/// Gemini CLI 0.61.0 looks for one environment file from its workspace up to `/`: in each
/// directory `.gemini/.env` (in a trusted folder, which a reviewer's always is) then `.env`,
/// stopping at the first it finds, and loads every variable in it that its environment does
/// not set, into its own environment and so into every MCP server's. The plan removes the
/// worktree's own ([`WORKTREE_CONFIG`]); the parents' are outside its reach (with the
/// worktree under the user's home, the user's `~/.gemini/.env` reached both servers despite
/// the per-launch home). Both the path as given (the ACP session's `cwd`) and its canonical
/// form (Gemini's own working directory) are walked; the worktree itself is not checked. A
/// dangling link or a directory of that name stops Gemini's search as much as a file does,
/// and is refused too (`gemini_family::parent_env_file`). A file written after this check
/// is kept out by the sandbox, not by this check (`gemini_family::readable_parent`).
///
/// # Errors
/// [`RenderError::ParentEnvFile`] naming the nearest such file.
pub fn env_file_preflight(worktree: &Path) -> Result<(), RenderError> {
    gemini_family::env_file_preflight(&LAUNCH, worktree)
}

/// [`env_file_preflight`] for `ctx`'s worktree; nothing to check without an absolute one
/// (`gemini_plan` refuses that launch anyway).
///
/// # Errors
/// As [`env_file_preflight`].
pub fn preflight(ctx: &LaunchContext) -> Result<(), RenderError> {
    gemini_family::worktree_preflight(ctx, env_file_preflight)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files Gemini CLI looks for in each parent; the walk itself is
    /// `gemini_family::parent_env_file`'s (tested there).
    #[test]
    fn env_file_preflight_refuses_a_parents_gemini_env_not_a_qwen_one() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("a/wt");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(t.path().join("a/.qwen")).unwrap();
        std::fs::write(t.path().join("a/.qwen/.env"), "X=1").unwrap();
        assert_eq!(env_file_preflight(&tree), Ok(()));
        std::fs::create_dir_all(t.path().join(".gemini")).unwrap();
        std::fs::write(t.path().join(".gemini/.env"), "X=1").unwrap();
        assert_eq!(
            env_file_preflight(&tree),
            Err(RenderError::ParentEnvFile {
                client: Client::Gemini,
                file: t.path().join(".gemini/.env")
            })
        );
    }
}
