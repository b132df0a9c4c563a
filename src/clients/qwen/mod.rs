//! Qwen Code's room: the reviewer launch over ACP (`qwen_plan`) and what generic code knows
//! about the client ([`SPEC`], [`CREDENTIALS`], [`WORKTREE_CONFIG`], [`ROOT_SETTINGS`], the
//! tool-name budget [`QWEN_TOOL_NAMES`]). What it does as Gemini CLI does is written once for
//! both rooms in `src/clients/gemini_family/`; this room passes in Qwen Code's own facts.
//!
//! Files: [`ready`] says when the servers are up (Qwen's debug log), [`tools`] lists the
//! built-in tools that run unasked; with the `cli` feature, `registration` (the file a person
//! registers servers in), `loader` (how Qwen Code loads it) and `hostile` (`verify`'s hostile
//! configuration).
//!
//! What Qwen Code does, on which version, and the test that shows it (how it takes, gates and
//! names MCP servers, its configuration sources and how each is closed, the parent `.env`
//! files): `docs/isolation/qwen.md`.

#[cfg(feature = "cli")]
pub mod registration;
pub mod tools;

#[cfg(feature = "cli")]
pub mod loader;

#[cfg(feature = "cli")]
pub mod hostile;

pub mod ready;

use std::path::Path;

use crate::allowlist::Resolution;
use crate::clients::gemini_family;
use crate::clients::plan::{EnvVar, LaunchId, LaunchPlan};
use crate::clients::root::CredentialSpec;
use crate::clients::{Client, LaunchContext, RenderError};
use crate::model::QWEN_TOOL_NAMES;

/// What generic code knows about Qwen Code ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "qwen",
    display_name: "Qwen Code",
    // the npm package `@qwen-code/qwen-code` installs `qwen`.
    binary: "qwen",
    // A JSON-configured client, stamped as Gemini CLI is (its flow-starting server learns
    // which client drives it).
    stamps_driver: true,
    carries_model: true,
    carries_effort: false,
    credentials: CREDENTIALS,
    managed_files: &[],
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
    plan: |ctx, r, inputs| Ok(qwen_plan(ctx, r, &inputs.launch_id()?, inputs.policy)?),
    proof: crate::clients::spec::Proof::RealClient {
        tests: &[
            "conformance_acp",
            "differential_qwen",
            "isolation_qwen",
            "verify_clients",
        ],
        versions: &["0.24.4"],
    },
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: Some(&hostile::VERIFY),
};

/// How the CLI offers Qwen Code (`render qwen`, `export qwen`).
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Qwen Code over ACP: servers in `session/new` under per-launch aliased names, \
                   in a per-launch QWEN_HOME",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
    render_after_help: "\
Example:
  kcap-mcp-registry render qwen --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "Qwen Code: `mcpServers` for ~/.qwen/settings.json (read-only servers trusted)",
    export_aliases: &[],
    export_after_help: None,
};

/// The longest tool name Qwen Code 0.24.4 passes on uncut: 63 ([`QWEN_TOOL_NAMES`]).
pub const MAX_TOOL_NAME: usize = QWEN_TOOL_NAMES.max_len;

/// The name Qwen Code gives tool `tool` of the server named `wire_name`:
/// `mcp__<wire name>__<tool>`.
pub fn qualified_tool_name(wire_name: &str, tool: &str) -> String {
    QWEN_TOOL_NAMES.qualified(wire_name, tool)
}

pub use crate::clients::gemini_family::deny_all_name;

/// The Qwen Code reviewer launch: argv `--acp --approval-mode yolo
/// --allowed-mcp-server-names <wire names, comma-separated>`, then `--model M` when set; the
/// servers in `session/new` under their aliased names (every injected server, as on Gemini
/// CLI). The effort is not a Qwen setting; the prompt goes in ACP `session/prompt`.
///
/// Rooted in the per-launch directory (module docs): the root's environment, then
/// `QWEN_HOME` (`<home>/.qwen`), `QWEN_CODE_SYSTEM_SETTINGS_PATH` and
/// `QWEN_CODE_SYSTEM_DEFAULTS_PATH` (absent files under [`SYSTEM_DIR`]) and
/// `QWEN_CODE_LEGACY_MCP_BLOCKING=1`; one file, `.qwen/settings.json` in the per-launch home
/// ([`ROOT_SETTINGS`], plus `security.auth` from the credentials); the worktree's
/// [`WORKTREE_CONFIG`] removed. Before carrying it out the daemon runs
/// [`env_file_preflight`] on the worktree.
///
/// Under `policy` [`Policy::Strict`](crate::Policy::Strict) the plan hides the client's
/// built-in tools with effects from its model ([`tools`](crate::clients::tools)), and
/// [`LaunchPlan::unasked`] lists the rest.
///
/// # Errors
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
/// let plan = Client::Qwen.plan(&ctx, &inputs)?.plan;
/// assert_eq!(plan.argv[3..], ["--allowed-mcp-server-names", "kcap-flow-result-0123456789abcdef"]);
/// assert_eq!(plan.env_value("QWEN_HOME"), Some("/run/kcap/l1/home/.qwen"));
/// assert_eq!(plan.worktree_remove, [".qwen", ".env", ".mcp.json", ".agents", "QWEN.md", "AGENTS.md"]);
/// let session = plan.session_new.unwrap();
/// assert_eq!(session.mcp_servers[0].name, "kcap-flow-result-0123456789abcdef");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub(crate) fn qwen_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    launch_id: &LaunchId,
    policy: crate::Policy,
) -> Result<LaunchPlan, RenderError> {
    let mut plan = gemini_family::plan(&LAUNCH, ctx, resolution, launch_id, policy)?;
    ready::wait_for_servers(&mut plan);
    Ok(plan)
}

/// Qwen Code's launch in the family's shape ([`gemini_family::plan`]): `--acp`, then
/// `--approval-mode yolo` (no trust flag: every folder is trusted); [`WORKTREE_CONFIG`]
/// removed; nothing refused for `${`, which Qwen does not expand in ACP `env` values;
/// `QWEN_HOME` the per-launch home's `.qwen`; the system settings moved to [`SYSTEM_DIR`];
/// MCP discovery blocking; [`SETTINGS_FILE`] written with the credentials, which leave the
/// environment every server inherits unfiltered ([`settings`]); the parents' `.qwen/.env` and
/// `.env` refused ([`env_file_preflight`]).
const LAUNCH: gemini_family::AcpLaunch = gemini_family::AcpLaunch {
    client: Client::Qwen,
    flags: &["--acp", "--approval-mode", "yolo"],
    worktree_config: &WORKTREE_CONFIG,
    expands_env: None,
    home_var: ("QWEN_HOME", Some(".qwen")),
    system_dir: SYSTEM_DIR,
    system_vars: [
        "QWEN_CODE_SYSTEM_SETTINGS_PATH",
        "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
    ],
    fixed_env: &[("QWEN_CODE_LEGACY_MCP_BLOCKING", "1")],
    settings_file: SETTINGS_FILE,
    settings: gemini_family::Settings::Credentials {
        names: CREDENTIALS.env,
        render: settings,
    },
    env_files: [".qwen/.env", ".env"],
};

/// The directory, relative to the per-launch directory, where
/// `QWEN_CODE_SYSTEM_SETTINGS_PATH` and `QWEN_CODE_SYSTEM_DEFAULTS_PATH` point: never
/// created, so Qwen Code reads no system settings instead of `/etc/qwen-code/`.
pub const SYSTEM_DIR: &str = "qwen-system";

/// The user settings file the plan writes, relative to the per-launch home.
pub const SETTINGS_FILE: &str = ".qwen/settings.json";

/// The user settings the plan writes (before the credentials, `qwen_plan`):
/// `$version: 4` (Qwen rewrites a file without it), `disableAllHooks` (a second lock on
/// hooks), `tools.toolSearch.enabled = false` (MCP tools offered to the model directly, not
/// behind `tool_search`), and `general.enableAutoUpdate = false` and
/// `privacy.usageStatisticsEnabled = false` (which stopped 4 connections to the dead proxy).
pub const ROOT_SETTINGS: &str = "{\"$version\":4,\"disableAllHooks\":true,\
     \"tools\":{\"toolSearch\":{\"enabled\":false}},\"general\":{\"enableAutoUpdate\":false},\
     \"privacy\":{\"usageStatisticsEnabled\":false}}";

/// [`ROOT_SETTINGS`] with `security.auth` (`selectedType: "openai"`, `apiKey`, `baseUrl`)
/// when the launch hands over credentials, one line.
fn settings(credentials: &[EnvVar]) -> String {
    let mut auth = Vec::new();
    for (var, key) in [("OPENAI_API_KEY", "apiKey"), ("OPENAI_BASE_URL", "baseUrl")] {
        if let Some(v) = credentials.iter().find(|v| v.name == var) {
            let value = serde_json::Value::String(v.value.clone());
            auth.push(format!("\"{key}\":{value}"));
        }
    }
    let base = ROOT_SETTINGS.strip_suffix('}').unwrap_or(ROOT_SETTINGS);
    if auth.is_empty() {
        format!("{ROOT_SETTINGS}\n")
    } else {
        format!(
            "{base},\"security\":{{\"auth\":{{\"selectedType\":\"openai\",{}}}}}}}\n",
            auth.join(",")
        )
    }
}

/// How Qwen Code's model API goes through the reviewer's door: the plan writes
/// `OPENAI_API_KEY` (the per-launch token behind the door) and `OPENAI_BASE_URL` (the door's
/// endpoint) into the per-launch settings file, and Qwen sends the key as `authorization:
/// Bearer`. Measured on 0.24.4:
/// `isolation_qwen::behind_the_door_the_key_stays_outside_and_only_the_door_is_reached`
/// (the first model request through the door carried the daemon's key from the door, no
/// header the token; without the door the settings file holds the key).
pub const DOOR: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: "OPENAI_BASE_URL",
    keys: &[crate::clients::door::DoorKey {
        var: "OPENAI_API_KEY",
        header: "authorization",
        prefix: "Bearer ",
    }],
    key_files: &[],
    settings: &[],
};

/// The credentials and provider settings the daemon may hand a Qwen Code reviewer: an
/// OpenAI-compatible API key and base URL (auth type `openai`). The plan writes them into
/// the per-launch settings file's `security.auth` (measured: the model API saw the key from
/// the file, and no server's environment held `*KEY*` or `OPENAI*`), never into the
/// environment, which Qwen passes to every server unfiltered. Qwen's own OAuth and the other
/// auth types are not accepted.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &["OPENAI_API_KEY", "OPENAI_BASE_URL"],
    files: &[],
};

/// The reviewed worktree's files Qwen Code reads as configuration: `.qwen/` (settings with
/// servers, hooks, `env`, `mcp.*`; `.env`; agents, commands, skills, extensions), `.env`,
/// `.mcp.json` (servers, started over ACP without approval) and `.agents/` (its skills, as
/// Gemini CLI's: issue 34 measured a repository skill replacing a built-in one's description
/// on 0.24.4), and its context files `QWEN.md` and `AGENTS.md` (Qwen Code's default
/// `context.fileName`), whose text is sent to the model as context: a pull request can add or
/// edit them. Measured on 0.24.4 (`isolation_qwen::instruction_files_reach_no_model_request`):
/// both reached the first model request unless removed; `GEMINI.md`, a subfolder's and a
/// parent folder's (above the worktree, no git root) did not. Removed rather than renamed
/// away with `context.fileName`: that setting replaces the names, and any name it could give
/// is one a pull request can create. The removed files stay readable as `pr_config`.
pub const WORKTREE_CONFIG: [&str; 6] = [
    ".qwen",
    ".env",
    ".mcp.json",
    ".agents",
    "QWEN.md",
    "AGENTS.md",
];

/// Refuses a Qwen Code launch in `worktree` while a parent directory of it holds `.env` or
/// `.qwen/.env`.
///
/// Qwen Code 0.24.4 (`findEnvFiles`) walks from its workspace's canonical path up to `/`
/// (or its `HOME`, the per-launch one), taking in each directory `.qwen/.env` then `.env`,
/// and stops at the first it finds; every variable in it its environment lacks reaches Qwen
/// and every server (with the worktree under a hostile home, `~/.qwen/.env` reached the
/// servers, measured). The plan removes the worktree's own ([`WORKTREE_CONFIG`]); the
/// parents' are out of its reach. The lexical path and the canonical one are both walked;
/// the worktree itself is not checked. `existsSync` follows links; a dangling one is refused
/// too, to keep the rule simple (`gemini_family::parent_env_file`). A file written after
/// this check is kept out by the sandbox, not by this check
/// (`gemini_family::readable_parent`).
///
/// # Errors
/// [`RenderError::ParentEnvFile`] naming the nearest such file.
pub fn env_file_preflight(worktree: &Path) -> Result<(), RenderError> {
    gemini_family::env_file_preflight(&LAUNCH, worktree)
}

/// [`env_file_preflight`] for `ctx`'s worktree; nothing to check without an absolute one
/// (`qwen_plan` refuses that launch anyway).
///
/// # Errors
/// As [`env_file_preflight`].
pub fn preflight(ctx: &LaunchContext) -> Result<(), RenderError> {
    gemini_family::worktree_preflight(ctx, env_file_preflight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::root::Credentials;

    #[test]
    fn credentials_go_into_the_settings_file_not_the_environment() {
        let ctx = LaunchContext {
            server_url: Some("http://127.0.0.1:5100".into()),
            kcap_bin: Some("/usr/bin/kcap".into()),
            agent_id: "a1".into(),
            worktree: Some("/w".into()),
            launch_dir: Some("/l".into()),
            credentials: Credentials {
                env: vec![
                    EnvVar::new("OPENAI_API_KEY", "k\"1"),
                    EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
                ],
                files: Vec::new(),
            },
            ..LaunchContext::default()
        };
        let id = LaunchId::from_hex("0123456789abcdef").unwrap();
        let r = ctx.resolve(crate::Policy::Strict).unwrap();
        let plan = qwen_plan(&ctx, &r, &id, crate::Policy::Lenient).unwrap();
        assert_eq!(plan.env_value("OPENAI_API_KEY"), None);
        assert_eq!(plan.env_value("OPENAI_BASE_URL"), None);
        let file = &plan.files[0];
        assert_eq!(file.path, "home/.qwen/settings.json");
        assert_eq!(file.mode, 0o600);
        let v: serde_json::Value = serde_json::from_str(&file.contents).unwrap();
        assert_eq!(v["security"]["auth"]["apiKey"], "k\"1");
        assert_eq!(v["security"]["auth"]["baseUrl"], "http://127.0.0.1:9/v1");
        assert_eq!(v["security"]["auth"]["selectedType"], "openai");
        assert_eq!(v["$version"], 4);
        assert_eq!(v["disableAllHooks"], true);
        assert_eq!(v["tools"]["toolSearch"]["enabled"], false);
        // Without credentials: the settings alone.
        let bare = LaunchContext {
            credentials: Credentials::default(),
            ..ctx.clone()
        };
        let plan = qwen_plan(&bare, &r, &id, crate::Policy::Lenient).unwrap();
        assert_eq!(plan.files[0].contents, format!("{ROOT_SETTINGS}\n"));
    }

    /// The files Qwen Code looks for in each parent; the walk itself is
    /// `gemini_family::parent_env_file`'s (tested there).
    #[test]
    fn env_file_preflight_refuses_a_parents_qwen_env_not_a_gemini_one() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("a/wt");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(t.path().join("a/.gemini")).unwrap();
        std::fs::write(t.path().join("a/.gemini/.env"), "X=1").unwrap();
        assert_eq!(env_file_preflight(&tree), Ok(()));
        std::fs::create_dir_all(t.path().join(".qwen")).unwrap();
        std::fs::write(t.path().join(".qwen/.env"), "X=1").unwrap();
        let err = env_file_preflight(&tree).unwrap_err();
        assert_eq!(
            err,
            RenderError::ParentEnvFile {
                client: Client::Qwen,
                file: t.path().join(".qwen/.env")
            }
        );
        assert!(
            err.to_string()
                .starts_with("cannot isolate the qwen reviewer: "),
            "{err}"
        );
    }
}
