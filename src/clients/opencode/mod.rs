//! OpenCode's room: the reviewer launch over ACP (`opencode_plan`: the per-launch root, its
//! `opencode.json` ([`config_json`]) and the permission rules ([`permission_json`])) and what
//! generic code knows about the client ([`SPEC`], [`SWITCHES`], [`CREDENTIALS`],
//! [`MANAGED_FILES`], [`WORKTREE_CONFIG`]).
//!
//! Files: [`auth`] keeps only the credential entries of `auth.json`, [`ready`] says when the
//! servers are up (OpenCode's log); with the `cli` feature, `registration` (the file a person
//! registers servers in), `loader` (how OpenCode loads it) and `hostile` (`verify`'s hostile
//! configuration).
//!
//! What OpenCode does, on which version, and the test that shows it (how it takes MCP servers
//! and permissions, every configuration source and how each is closed, its own local server):
//! `docs/isolation/opencode.md`.

#[cfg(feature = "cli")]
pub mod registration;

/// `verify`: the hostile configuration of this client.
#[cfg(feature = "cli")]
pub mod hostile;

#[cfg(feature = "cli")]
pub mod loader;

pub mod auth;

pub mod ready;

use serde::Serialize;

use crate::allowlist::Resolution;
use crate::clients::claude::Ordered;
use crate::clients::plan::{Admitted, EnvVar, LaunchPlan, PlanFile, SessionNew};
use crate::clients::root::{CredentialFileSpec, CredentialSpec, HOME_DIR, ManagedFile};
use crate::clients::{Client, LaunchContext, RenderError, acp_cwd, acp_servers};
use crate::model::McpServer;

/// OpenCode's built-in tools that run unasked in its reviewer: the ones its
/// `OPENCODE_PERMISSION` allows (every other built-in is denied and leaves the model's
/// toolset). Measured on 1.18.33 (2026-12-05, `tests/clients/unasked_tools.rs`): the tools of
/// the reviewer's first model request, less the injected servers' `<wire>_<tool>` ones.
pub const BUILTINS: &[crate::clients::tools::Builtin] = &[
    crate::clients::tools::Builtin::new("glob", crate::clients::tools::ToolKind::Read),
    crate::clients::tools::Builtin::new("grep", crate::clients::tools::ToolKind::Read),
    crate::clients::tools::Builtin::new("read", crate::clients::tools::ToolKind::Read),
];

/// What generic code knows about OpenCode ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "opencode",
    display_name: "OpenCode",
    // the npm package `opencode-ai` installs `opencode`.
    binary: "opencode",
    stamps_driver: true,
    // OpenCode's model goes into the plan's `opencode.json`.
    carries_model: true,
    carries_effort: false,
    credentials: CREDENTIALS,
    managed_files: &MANAGED_FILES,
    preflight: None,
    acp: true,
    needs_worktree: true,
    brokered_only: false,
    uses_launch_id: false,
    unverified_isolation: false,
    builtins: BUILTINS,
    hides_builtins: false,
    launch_secrets: &[SERVER_PASSWORD_VAR],
    door: &[DOOR, DOOR_OPENAI],
    plan: |ctx, r, inputs| {
        let mut plan = opencode_plan(ctx, r)?;
        plan.env.push(crate::clients::plan::EnvVar::new(
            SERVER_PASSWORD_VAR,
            inputs.launch_secret()?.hex(),
        ));
        Ok(plan)
    },
    proof: crate::clients::spec::Proof::RealClient {
        tests: &[
            "conformance_acp",
            "isolation_opencode",
            "differential_opencode",
            "verify_clients",
        ],
        versions: &["1.18.33"],
    },
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: Some(&hostile::VERIFY),
};

/// The client's words in `render opencode --help` and `export opencode --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "OpenCode over ACP: servers in `session/new`, configuration directories taken away",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --worktree <DIR> --launch-dir <DIR> [OPTIONS]",
    render_after_help: "\
Example:
  kcap-mcp-registry render opencode --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "OpenCode: `mcp` for $XDG_CONFIG_HOME/opencode/opencode.json",
    export_aliases: &[],
    export_after_help: None,
};

/// The OpenCode configuration directory, relative to the per-launch home
/// (`$XDG_CONFIG_HOME/opencode`).
pub const CONFIG_DIR: &str = ".config/opencode";

/// OpenCode's own switches in every plan: no project configuration (v1 loader, project
/// instructions), no skills from `.claude/` and `.agents/` (the user's or the worktree's),
/// no `CLAUDE.md`, the bundled model catalog instead of models.dev. Measured on 1.18.33
/// (`isolation_opencode::instruction_files_reach_no_model_request`): with
/// `OPENCODE_DISABLE_PROJECT_CONFIG` no `AGENTS.md`, `CLAUDE.md` or `CONTEXT.md` of the
/// worktree, a subfolder or the parent reached the model; without it the worktree's
/// `AGENTS.md` did.
pub const SWITCHES: [(&str, &str); 4] = [
    ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
    ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
    ("OPENCODE_DISABLE_CLAUDE_CODE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
];

/// The `package-lock.json` written in [`CONFIG_DIR`] (with an empty `node_modules/`):
/// OpenCode then skips the `npm install @opencode-ai/plugin` it runs in every configuration
/// directory, a registry download on every launch otherwise.
pub const PACKAGE_LOCK: &str = r#"{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}"#;

/// The root's `opencode.json`: `$schema` (without it OpenCode rewrites the file), the
/// launch's `model` when given, `disabled_providers: ["opencode"]` unless that model is one
/// of OpenCode Zen's (`opencode/…`), `snapshot: false` (no per-launch git copy of the
/// worktree), `share: "disabled"`, `autoupdate: false`.
///
/// Without a model OpenCode 1.18.33 picks `opencode/big-pickle`, a free model of its own
/// hosted service that needs no key, and would send the review there; with the `opencode`
/// provider disabled, `opencode models` lists none of its free models (measured, empty
/// root): the reviewer uses the providers the daemon handed credentials for, or none.
///
/// ```
/// use kcap_mcp_registry::clients::opencode::config_json;
///
/// assert_eq!(
///     config_json(Some("anthropic/claude-haiku-4-5")),
///     r#"{"$schema":"https://opencode.ai/config.json","model":"anthropic/claude-haiku-4-5","disabled_providers":["opencode"],"snapshot":false,"share":"disabled","autoupdate":false}"#
/// );
/// assert!(!config_json(Some("opencode/big-pickle")).contains("disabled_providers"));
/// ```
pub fn config_json(model: Option<&str>) -> String {
    let mut fields: Vec<(&str, serde_json::Value)> =
        vec![("$schema", "https://opencode.ai/config.json".into())];
    if let Some(model) = model {
        fields.push(("model", model.into()));
    }
    if !model.is_some_and(|m| m.starts_with("opencode/")) {
        fields.push(("disabled_providers", serde_json::json!(["opencode"])));
    }
    fields.extend([
        ("snapshot", false.into()),
        ("share", "disabled".into()),
        ("autoupdate", false.into()),
    ]);
    to_json(&Ordered(&fields))
}

/// OpenCode's built-in tools a reviewer may use without approval (they only read).
pub const READ_TOOLS: [&str; 4] = ["read", "grep", "glob", "list"];

/// OpenCode's built-in tools denied by name (the default rule denies them too; naming them
/// keeps the denial if a later OpenCode reads the rules differently).
pub const DENIED_TOOLS: [&str; 9] = [
    "write",
    "edit",
    "patch",
    "bash",
    "webfetch",
    "websearch",
    "task",
    "skill",
    "todowrite",
];

/// The tool name OpenCode gives tool `tool` of server `server`: `<server>_<tool>` with
/// every character outside `[A-Za-z0-9_-]` replaced by `_`. `tool` `*` stays a wildcard.
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let tool = if tool == "*" { "*".into() } else { clean(tool) };
    format!("{}_{tool}", clean(server))
}

/// The `OPENCODE_PERMISSION` value: a compact JSON object whose rules, in order, are
/// `"*":"deny"`, `"allow"` for each of [`READ_TOOLS`], `"deny"` for each of
/// [`DENIED_TOOLS`], then `"allow"` for each admitted tool of each injected server
/// (`<wire name>_<tool>`, or `<wire name>_*` for [`Admitted::All`]).
///
/// ```
/// use kcap_mcp_registry::clients::opencode::permission_json;
/// use kcap_mcp_registry::Registry;
///
/// let analytics = Registry::compiled().lookup("kcap-analytics").unwrap();
/// let json = permission_json(&[(analytics, "kcap-analytics")]);
/// assert!(json.starts_with(r#"{"*":"deny","read":"allow""#));
/// assert!(json.ends_with(r#""todowrite":"deny","kcap-analytics_*":"allow"}"#));
/// ```
pub fn permission_json(servers: &[(&McpServer, &str)]) -> String {
    let mut rules: Vec<(String, &str)> = vec![("*".into(), "deny")];
    rules.extend(READ_TOOLS.iter().map(|t| ((*t).into(), "allow")));
    rules.extend(DENIED_TOOLS.iter().map(|t| ((*t).into(), "deny")));
    for (server, wire) in servers {
        match Admitted::of(server).names() {
            None => rules.push((tool_name(wire, "*"), "allow")),
            Some(tools) => rules.extend(tools.iter().map(|t| (tool_name(wire, t), "allow"))),
        }
    }
    to_json(&Ordered(&rules))
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("serializing strings to JSON cannot fail")
}

/// What OpenCode does with a `{` in `opencode.json`, where the plan writes the launch's model
/// ([`config_json`]): `{env:NAME}` becomes a variable of its environment and `{file:PATH}` a
/// file's contents, in the file's text before it is parsed (measured on 1.18.33 with
/// `opencode debug config`: a model of `{file:<secret>}` resolved to the file's contents,
/// which the model request then carries; `isolation_opencode::a_launch_value_is_never_expanded`
/// shows it again on every run). No model name has a `{`, so `opencode_plan` refuses any.
pub const EXPANDS: &str = "which OpenCode expands in its configuration (`{env:NAME}` to a \
                           variable, `{file:PATH}` to a file's contents)";

/// The variable that gives OpenCode's own HTTP server a password. `opencode acp` (1.18.33)
/// listens on `127.0.0.1:4096` (or the next free port) and, without it, answers every local
/// user: `GET /config`, and `POST /pty` ran commands as the daemon's user (measured,
/// 2026-12-01; `tests/clients/isolation_opencode.rs`). [`Client::plan`](crate::clients::Client::plan)
/// sets it to a fresh [`LaunchSecret`](crate::clients::plan::LaunchSecret) per launch
/// (`opencode_plan` alone leaves it out, for reproducible plans).
pub const SERVER_PASSWORD_VAR: &str = "OPENCODE_SERVER_PASSWORD";

/// The OpenCode reviewer launch, rooted in the per-launch directory
/// (`LaunchPlan::rooted`): argv `acp --pure`; env: the root (`HOME`, XDG directories,
/// `TMPDIR`), the credentials of [`CREDENTIALS`], [`SWITCHES`] and `OPENCODE_PERMISSION`
/// ([`permission_json`]); dirs: the root's, [`CONFIG_DIR`] and its `node_modules`; files: the
/// credential file, [`CONFIG_DIR`]`/opencode.json` ([`config_json`] with the launch's model)
/// and [`PACKAGE_LOCK`]; [`WORKTREE_CONFIG`] removed from the worktree; every injected server
/// (the `inject` servers by their condition, then the allowlisted ones, with the env values of
/// this launch's result delivery and snapshot) in `session/new` under its registry id.
///
/// # Errors
/// [`RenderError::NeedsAbsolute`] without an absolute worktree or launch directory;
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`]; the credential errors of [`CREDENTIALS`];
/// [`RenderError::LaunchValueExpands`] for a model holding `{` ([`EXPANDS`]).
pub(crate) fn opencode_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    if super::non_blank(&ctx.model).is_some_and(|m| m.contains('{')) {
        return Err(RenderError::LaunchValueExpands {
            client: Client::OpenCode,
            field: "model",
            marker: '{',
            expands: EXPANDS,
        });
    }
    let cwd = acp_cwd(Client::OpenCode, ctx)?;
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| s.id.to_owned());
    let admitted: Vec<(&McpServer, &str)> = ctx
        .servers(resolution)
        .zip(&servers)
        .map(|((server, _), wire)| (server, wire.wire_name.as_str()))
        .collect();
    let mut plan = LaunchPlan::rooted(
        Client::OpenCode,
        ctx,
        &WORKTREE_CONFIG,
        vec!["acp".into(), "--pure".into()],
    )?;
    plan.env.extend(
        SWITCHES
            .iter()
            .map(|(name, value)| EnvVar::new(*name, *value)),
    );
    plan.env.push(EnvVar::new(
        "OPENCODE_PERMISSION",
        permission_json(&admitted),
    ));
    let config = format!("{HOME_DIR}/{CONFIG_DIR}");
    plan.dirs
        .extend([config.clone(), format!("{config}/node_modules")]);
    plan.files.extend([
        PlanFile {
            path: format!("{config}/opencode.json"),
            contents: config_json(super::non_blank(&ctx.model)),
            mode: 0o600,
        },
        PlanFile {
            path: format!("{config}/package-lock.json"),
            contents: PACKAGE_LOCK.into(),
            mode: 0o600,
        },
    ]);
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    ready::wait_for_servers(&mut plan);
    Ok(plan)
}

/// The credentials and provider settings the daemon may hand an OpenCode reviewer: the API
/// keys and base URLs of the providers' SDKs bundled in 1.18.33, the proxy variables (with a
/// proxy, `NO_PROXY` must hold `127.0.0.1`: the ACP front end talks to OpenCode's own server
/// over loopback HTTP), and `auth.json` (`$XDG_DATA_HOME/opencode/auth.json`, the keys and
/// OAuth tokens `opencode auth login` stores) reduced to its `api` and `oauth` entries
/// ([`auth::keep_credentials`]): a `wellknown` entry would make OpenCode fetch and apply a
/// configuration document from a URL.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &[
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENROUTER_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
    ],
    files: &[CredentialFileSpec {
        name: "auth.json",
        path: ".local/share/opencode/auth.json",
        keep: auth::keep_credentials,
        kept: "its `api` and `oauth` entries",
    }],
};

/// How OpenCode's Anthropic provider goes through the reviewer's door: at
/// `ANTHROPIC_BASE_URL`, sent `ANTHROPIC_API_KEY` as `x-api-key` (measured on 1.18.33:
/// `isolation_opencode::behind_the_door_the_key_stays_outside_and_only_the_door_is_reached`,
/// a whole review turn through the door, every request carrying the daemon's key in
/// `x-api-key` and no header the token). One provider per launch ([`DOOR_OPENAI`] is the
/// other): a launch behind the door that also hands over another provider's key or base URL
/// (`OPENROUTER_API_KEY`, `GOOGLE_GENERATIVE_AI_API_KEY`), `auth.json`, or a proxy (none is
/// reachable behind the door) is refused.
pub const DOOR: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: "ANTHROPIC_BASE_URL",
    keys: &[crate::clients::door::DoorKey {
        var: "ANTHROPIC_API_KEY",
        header: "x-api-key",
        prefix: "",
    }],
    key_files: &[],
    settings: &[],
};

/// How OpenCode's OpenAI provider goes through the reviewer's door: at `OPENAI_BASE_URL`,
/// sent `OPENAI_API_KEY` as `authorization: Bearer` (measured on 1.18.33, model
/// `openai/…`: `isolation_opencode::behind_the_door_the_openai_key_stays_outside`, the
/// first model request through the door).
pub const DOOR_OPENAI: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: "OPENAI_BASE_URL",
    keys: &[crate::clients::door::DoorKey {
        var: "OPENAI_API_KEY",
        header: "authorization",
        prefix: "Bearer ",
    }],
    key_files: &[],
    settings: &[],
};

/// The reviewed worktree's files OpenCode reads as configuration: the project's
/// `opencode.json`/`opencode.jsonc` and `.opencode/` folder (read by the v2 loader, which
/// imports their plugins, whatever `OPENCODE_DISABLE_PROJECT_CONFIG` and `--pure` say).
pub const WORKTREE_CONFIG: [&str; 3] = ["opencode.json", "opencode.jsonc", ".opencode"];

/// Administrator files OpenCode 1.18.33 reads whatever its environment says (its managed
/// configuration directory on Linux; `OPENCODE_TEST_MANAGED_CONFIG_DIR`, a hook for its own
/// tests, would move it, but that would override the administrator's policy), merged over
/// every other layer.
pub const MANAGED_FILES: [ManagedFile; 2] = [
    ManagedFile {
        path: "/etc/opencode/opencode.json",
        effect: "is merged over every other configuration layer: it can add MCP servers and \
                 plugins, deny or hide the reviewer's tools, and set MCP timeouts",
    },
    ManagedFile {
        path: "/etc/opencode/opencode.jsonc",
        effect: "is merged over every other configuration layer: it can add MCP servers and \
                 plugins, deny or hide the reviewer's tools, and set MCP timeouts",
    },
];
