//! Claude Code's room: the reviewer launch (`claude_plan`: the argv, the `--mcp-config` file
//! [`MCP_CONFIG_FILE`], the per-launch root and its first-run state) and what generic code
//! knows about the client ([`SPEC`], [`CREDENTIALS`], [`MANAGED_FILES`], [`GIT_AT_START`]).
//!
//! Files: [`state`] writes the first-run state, [`preflight`] refuses the settings that veto a
//! reviewer's servers, [`remote`] the launches that would fetch remote managed settings,
//! [`ready`] says when the first prompt is typed, [`tools`] lists the built-in tools that run
//! unasked; with the `cli` feature, `registration` (the file a person registers servers in),
//! `loader` (how Claude Code loads it) and `hostile` (`verify`'s hostile configuration).
//!
//! What Claude Code does, on which version, and the test that shows it (its configuration
//! sources and how each is closed, the differences between versions, the first turn, git at
//! start, the calls beside the model API): `docs/isolation/claude.md`.

#[cfg(feature = "cli")]
pub mod loader;
#[cfg(feature = "cli")]
pub mod registration;
pub mod tools;

/// `verify`: the hostile configuration of this client.
#[cfg(feature = "cli")]
pub mod hostile;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

pub mod preflight;
pub mod ready;
pub mod remote;
pub mod state;

use crate::allowlist::{Policy, Resolution};
use crate::clients::plan::{Dialog, EnvVar, LaunchPlan, PlanFile};
use crate::clients::root::{CredentialFileSpec, CredentialSpec, ManagedFile};
use crate::clients::{Client, LaunchContext, RenderError, option_value, wire_servers};
use crate::model::McpServer;

/// What generic code knows about Claude Code ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "claude",
    display_name: "Claude Code",
    // the npm package `@anthropic-ai/claude-code` installs `claude`.
    binary: "claude",
    stamps_driver: false,
    carries_model: true,
    carries_effort: true,
    credentials: CREDENTIALS,
    managed_files: &MANAGED_FILES,
    preflight: Some(start_preflight),
    acp: false,
    needs_worktree: false,
    brokered_only: false,
    uses_launch_id: false,
    unverified_isolation: false,
    builtins: tools::BUILTINS,
    hides_builtins: true,
    launch_secrets: &[],
    door: &[DOOR],
    plan: |ctx, r, inputs| Ok(claude_plan(ctx, r, inputs.policy)?),
    proof: crate::clients::spec::Proof::RealClient {
        tests: &[
            "conformance",
            "conformance_claude",
            "isolation_claude",
            "conformance_claude_launch",
            "launch_claude_dialogs",
            "git_start",
            "verify_clients",
        ],
        versions: &["2.1.197", "2.1.332"],
    },
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: Some(&hostile::VERIFY),
};

/// The client's words in `render claude --help` and `export claude --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Claude Code: `--mcp-config` JSON and the reviewer flags",
    render_usage: "\
{cmd} --agent-id <ID> --launch-dir <DIR> [OPTIONS]
       {cmd} --launch-json <FILE|-> --launch-dir <DIR> [OPTIONS]",
    render_after_help: "\
Example:
  kcap-mcp-registry render claude --agent-id a1 --launch-dir /run/kcap/l1 --allowlist kcap-review,kcap-flows --server-url URL --kcap-bin PATH",
    deprecated_flags: &[
        crate::clients::spec::DeprecatedFlag {
            long: "no-preflight",
            value_name: None,
        },
    ],
    deprecated_because: "the plan roots Claude Code in a per-launch CLAUDE_CONFIG_DIR and reads no settings file (--setting-sources=), so no user, project or local setting is left for a preflight to read",
    export_about: "Claude Code: a project .mcp.json registering every allowlistable server",
    export_aliases: &["claude-mcp-json"],
    export_after_help: Some("\
Example:
  kcap-mcp-registry export claude > .mcp.json"),
};

/// `CLAUDE_CONFIG_DIR`, relative to the per-launch home: where Claude Code keeps
/// `.claude.json`, `settings.json` and `.credentials.json`.
pub const CONFIG_DIR: &str = ".claude";

/// The credentials and provider settings the daemon may hand a Claude Code reviewer: API
/// key or OAuth token (each measured to authenticate from an empty root: `x-api-key`,
/// `Authorization: Bearer`), the API endpoint, and `IS_SANDBOX` (a daemon that runs
/// reviewers as root needs `IS_SANDBOX=1` for `--permission-mode bypassPermissions`;
/// without it Claude Code exits 1). Or the user's `.credentials.json`, reduced by
/// [`keep_credentials`] to its claude.ai OAuth access token. Claude Code passes its whole
/// environment to every MCP server, so a variable credential reaches our servers too; the
/// file does not.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &[
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "IS_SANDBOX",
    ],
    files: &[CredentialFileSpec {
        name: ".credentials.json",
        path: ".claude/.credentials.json",
        keep: keep_credentials,
        kept: "its claude.ai OAuth access token (`claudeAiOauth`, not the refresh token)",
    }],
};

/// How Claude Code's model API goes through the reviewer's door: it sends
/// `ANTHROPIC_API_KEY` as `x-api-key` and `ANTHROPIC_AUTH_TOKEN` as `authorization: Bearer`
/// (measured, [`CREDENTIALS`]) to `ANTHROPIC_BASE_URL`; `IS_SANDBOX` is a setting. A review
/// turn through the door on 2.1.197 and 2.1.328: `tests/clients/isolation_claude.rs`, class 10. The OAuth
/// token (`CLAUDE_CODE_OAUTH_TOKEN`, `.credentials.json`) is not among the keys: a launch
/// behind the door that hands it over is refused.
pub const DOOR: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: "ANTHROPIC_BASE_URL",
    keys: &[
        crate::clients::door::DoorKey {
            var: "ANTHROPIC_API_KEY",
            header: "x-api-key",
            prefix: "",
        },
        crate::clients::door::DoorKey {
            var: "ANTHROPIC_AUTH_TOKEN",
            header: "authorization",
            prefix: "Bearer ",
        },
    ],
    key_files: &[],
    settings: &["IS_SANDBOX"],
};

/// The fields of `claudeAiOauth` kept from a `.credentials.json`: the access token and what
/// describes it. Not the `refreshToken` (a reviewer that refreshes would rotate the user's
/// token in its own copy), and no other entry: `enterpriseGateway` with `gatewayTrust` makes
/// Claude Code fetch managed settings from the gateway's URL and apply them as policy
/// (measured on 2.1.197 and 2.1.328: env, hooks and deny rules of the fetched document took
/// effect), `mcpOAuth` holds other MCP servers' tokens.
pub const KEPT_OAUTH_FIELDS: [&str; 5] = [
    "accessToken",
    "expiresAt",
    "scopes",
    "subscriptionType",
    "rateLimitTier",
];

/// Reduces a `.credentials.json` to `{"claudeAiOauth":{…}}` with only [`KEPT_OAUTH_FIELDS`].
///
/// # Errors
/// When `contents` is not a JSON object with a `claudeAiOauth` object holding a string
/// `accessToken`.
///
/// ```
/// use kcap_mcp_registry::clients::claude::keep_credentials;
///
/// let kept = keep_credentials(r#"{"claudeAiOauth":{"accessToken":"t","refreshToken":"r",
///     "expiresAt":1},"enterpriseGateway":{"url":"https://gw"}}"#).unwrap();
/// assert_eq!(kept, r#"{"claudeAiOauth":{"accessToken":"t","expiresAt":1}}"#);
/// ```
pub fn keep_credentials(contents: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(contents).map_err(|_| "is not JSON".to_owned())?;
    let oauth = value
        .get("claudeAiOauth")
        .and_then(serde_json::Value::as_object)
        .ok_or("has no `claudeAiOauth` object")?;
    if !oauth
        .get("accessToken")
        .is_some_and(serde_json::Value::is_string)
    {
        return Err("has no `claudeAiOauth.accessToken` string".into());
    }
    let kept: serde_json::Map<String, serde_json::Value> = KEPT_OAUTH_FIELDS
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), oauth.get(*k)?.clone())))
        .collect();
    Ok(serde_json::json!({ "claudeAiOauth": kept }).to_string())
}

/// The reviewed worktree's files Claude Code reads as configuration: the project's MCP
/// servers and its `.claude/` folder (settings with `env`, `hooks`, `permissions`, and
/// local settings; skills, commands, agents and rules). `--setting-sources=` already keeps
/// them out (measured); removing them keeps them out of a Claude Code that would ignore the
/// flag. `CLAUDE.md` stays: instructions, not configuration, and not loaded under the flag.
pub const WORKTREE_CONFIG: [&str; 2] = [".mcp.json", ".claude"];

/// Administrator files Claude Code reads whatever its environment says (no variable moves
/// `/etc/claude-code`; `CLAUDE_CODE_MANAGED_SETTINGS_PATH` is not honoured, measured), all
/// measured to reach a rooted launch under `--setting-sources=` on 2.1.197 and 2.1.328.
pub const MANAGED_FILES: [ManagedFile; 6] = [
    ManagedFile {
        path: "/etc/claude-code/managed-settings.json",
        effect: "sets env for every MCP server, runs hooks and helper commands \
                 (apiKeyHelper, policyHelper), and can deny our tools or disable \
                 bypassPermissions",
    },
    ManagedFile {
        path: "/etc/claude-code/managed-settings.d",
        effect: "holds managed settings files (*.json) with the same effects as \
                 managed-settings.json",
    },
    ManagedFile {
        path: "/etc/claude-code/managed-mcp.json",
        effect: "takes exclusive control of MCP servers (Claude Code exits 1 under \
                 --strict-mcp-config)",
    },
    ManagedFile {
        path: "/etc/claude-code/.claude",
        effect: "adds managed skills, agents, commands and rules to every session \
                 (skills and agents can carry hooks)",
    },
    // Issue 34: read from `/etc/claude-code` whatever the plan's `--setting-sources` say
    // (2.1.197, 2.1.328; `isolation_claude::class5_…` shows its text in a model request).
    ManagedFile {
        path: "/etc/claude-code/CLAUDE.md",
        effect: "puts the administrator's instructions into the model's context",
    },
    // Issue 34: a fixed credential path outside the launch directory. Both pinned versions
    // read `<this>/.api_key` and `<this>/.oauth_token` (and `.session_ingress_token`)
    // whenever `CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR` (or its OAuth twin) is unset, and fall
    // back to them when that descriptor cannot be read (binary strings of 2.1.197 and
    // 2.1.328: `wellKnownPath`); a planted `.api_key` replaced the plan's credential on the
    // model requests (issue 34's measurement).
    ManagedFile {
        path: "/home/claude/.claude/remote",
        effect: "holds credentials Claude Code uses instead of the plan's (.api_key, \
                 .oauth_token)",
    },
];

/// The compact `--mcp-config` JSON for `ctx` and its resolved allowlist.
///
/// Gated ([`LaunchContext::is_gated`]) → exactly `{"mcpServers":{}}`. Otherwise
/// `kcap-flow-result` first, then each resolved server in allowlist order, then (for a
/// borrowed snapshot) each `inject = "borrowed-snapshot"` server, each as
/// `{"command":<kcap_bin>,"args":[…],"env":{…}}` with env names in registry order and only
/// the variables this launch's delivery mode and snapshot provide.
///
/// # Errors
/// [`RenderError::Expansion`] when any emitted value contains `${`; when not gated,
/// [`RenderError::BlankAgentId`] for a blank agent id, [`RenderError::BlankCapabilityUrl`]
/// and [`RenderError::MissingReviewContextUrl`].
///
/// ```
/// use kcap_mcp_registry::{LaunchContext, Policy, clients::claude::claude_mcp_config};
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     mcp_allowlist: Some(vec![Some("kcap-review".into())]),
///     ..LaunchContext::default()
/// };
/// let json = claude_mcp_config(&ctx, &ctx.resolve(Policy::Lenient).unwrap()).unwrap();
/// assert_eq!(json, concat!(
///     r#"{"mcpServers":{"kcap-flow-result":{"command":"/usr/bin/kcap","args":["mcp","flow-result"],"#,
///     r#""env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"a1"}},"#,
///     r#""kcap-review":{"command":"/usr/bin/kcap","args":["mcp","review"],"#,
///     r#""env":{"KCAP_URL":"http://127.0.0.1:5100"}}}}"#,
/// ));
/// ```
pub fn claude_mcp_config(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<String, RenderError> {
    ctx.require_launch_values()?;
    let command = ctx.kcap_bin.as_deref().unwrap_or_default();
    let mut servers = Vec::with_capacity(resolution.servers().len() + 1);
    // The JSON's size, to write it without growing the buffer: every string plus 64 bytes
    // of punctuation and keys per server (a few more when values need escaping).
    let mut size = 20;
    for (server, env) in ctx.servers(resolution) {
        refuse_expansion(server, command, || "command".into())?;
        for (i, arg) in server.args.iter().enumerate() {
            refuse_expansion(server, arg, || format!("args[{i}]"))?;
        }
        for (name, value) in &env {
            refuse_expansion(server, value, || format!("env.{name}"))?;
        }
        size += 64 + server.id.len() + command.len();
        size += server.args.iter().map(|a| a.len() + 3).sum::<usize>();
        size += env
            .iter()
            .map(|(n, v)| n.len() + v.len() + 6)
            .sum::<usize>();
        servers.push(ServerJson {
            id: server.id,
            command,
            args: server.args,
            env,
        });
    }
    let mut json = Vec::with_capacity(size);
    serde_json::to_writer(&mut json, &ConfigJson { servers })
        .expect("serializing strings to JSON cannot fail");
    Ok(String::from_utf8(json).expect("serde_json writes UTF-8"))
}

/// What Claude Code does with `${` in a server's `command`, `args` and `env`
/// ([`RenderError::Expansion`]; measured on 2.1.197, `tests/clients/conformance/`).
pub const EXPANDS: &str = "which Claude Code expands as a variable reference and cannot escape";

/// Refuses `value` when it contains `${`; `field` names it in the error (built only then).
fn refuse_expansion(
    server: &McpServer,
    value: &str,
    field: impl FnOnce() -> String,
) -> Result<(), RenderError> {
    if value.contains("${") {
        return Err(RenderError::Expansion {
            client: Client::Claude,
            server: server.id.to_string(),
            field: field(),
            expands: EXPANDS,
        });
    }
    Ok(())
}

/// `{"mcpServers":{…}}` with servers in insertion order.
struct ConfigJson<'a> {
    servers: Vec<ServerJson<'a>>,
}

struct ServerJson<'a> {
    id: &'static str,
    command: &'a str,
    args: &'static [&'static str],
    env: Vec<(&'static str, &'a str)>,
}

/// Serializes `(key, value)` pairs as a JSON object in the given order (the registration
/// exports use it too).
pub(crate) struct Ordered<'s, K, V>(pub(crate) &'s [(K, V)]);

impl<K: Serialize, V: Serialize> Serialize for Ordered<'_, K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for ConfigJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let servers: Vec<(&str, &ServerJson<'_>)> =
            self.servers.iter().map(|v| (v.id, v)).collect();
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("mcpServers", &Ordered(&servers))?;
        map.end()
    }
}

impl Serialize for ServerJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("command", self.command)?;
        map.serialize_entry("args", self.args)?;
        map.serialize_entry("env", &Ordered(&self.env))?;
        map.end()
    }
}

/// The `--settings` flag's JSON: the bypass-permissions consent. Claude Code 2.1.328 shows
/// its bypass-permissions confirmation unless `skipDangerousModePermissionPrompt` is set in
/// the user, local, flag or policy settings (`zse()` in its bundle; the global config's
/// `bypassPermissionsModeAccepted` is only migrated into the user settings, which
/// `--setting-sources=` does not load); the flag's settings are always loaded (measured on
/// 2.1.197 and 2.1.328).
pub const FLAG_SETTINGS: &str = r#"{"skipDangerousModePermissionPrompt":true}"#;

/// The Claude Code reviewer argv (after the `claude` binary):
/// `--permission-mode bypassPermissions --strict-mcp-config --mcp-config <json>
/// --disallowedTools Agent --setting-sources= --settings `[`FLAG_SETTINGS`], then `--effort E` and `--model M` when set,
/// then `-- <prompt>` when set. `--mcp-config` takes several values, so its JSON is always
/// followed by an option, never by a positional argument. `--setting-sources=` (one
/// argument, an empty list) loads no user, project or local settings; an empty argument
/// `--setting-sources ""` would do the same but can be lost by a shell or a spawner.
///
/// `resolution` is `ctx`'s allowlist resolved ([`LaunchContext::resolve`]), whose
/// [`skipped`](Resolution::skipped) entries the caller logs.
///
/// # Errors
/// As [`claude_mcp_config`]; [`RenderError::OptionLike`] for a model or effort starting
/// with `-`.
pub(crate) fn claude_reviewer_args(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<Vec<String>, RenderError> {
    let config = claude_mcp_config(ctx, resolution)?;
    let mut args: Vec<String> = [
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        &config,
        "--disallowedTools",
        "Agent",
        "--setting-sources=",
        "--settings",
        FLAG_SETTINGS,
    ]
    .map(String::from)
    .into();
    if let Some(effort) = option_value("effort", &ctx.effort)? {
        args.extend(["--effort".into(), effort.into()]);
    }
    if let Some(model) = option_value("model", &ctx.model)? {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(prompt) = ctx.prompt.as_deref().filter(|p| !p.is_empty()) {
        args.extend(["--".into(), prompt.into()]);
    }
    Ok(args)
}

/// What the reviewer's Claude Code does unasked at start and is told not to: the
/// auto-updater's `npm install -g` and the official plugin marketplace's clone
/// (`DISABLE_AUTOUPDATER`, `CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL`), and its
/// calls to `api.anthropic.com` and `raw.githubusercontent.com` beside a gateway
/// (`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`; `tests/clients/quiet_claude.rs`). What each
/// variable stopped, on which version: `docs/isolation/claude.md`, "Calls beside the model
/// API".
pub const QUIET_ENV: [(&str, &str); 3] = [
    ("DISABLE_AUTOUPDATER", "1"),
    ("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
];

/// What Claude Code runs of the worktree's git configuration when it starts
/// ([`crate::clients::git`]): on 2.1.197 `core.fsmonitor`, the filters, a submodule's
/// configuration and `gpg.program` ran; 2.1.332 overrides them itself. The overrides
/// ([`crate::clients::git::OVERRIDES`]) stop all but the filters, which are refused
/// ([`crate::clients::git::preflight`]). Measured through the executor, offline, in the
/// reviewer's sandbox and without it (2026-12-05; `tests/clients/git_start.rs`): every call
/// and what ran, per version, in `docs/isolation/claude.md`, "Git at start".
pub static GIT_AT_START: crate::clients::git::StartFacts = crate::clients::git::StartFacts {
    client: Client::Claude,
    runs: "runs `git status` in the worktree when it starts (2.1.197: with no `-c` of its own)",
    ran: "the repository's `clean` and `process` filters (2.1.197; 2.1.332 overrides each \
          driver it finds)",
};

/// Claude Code's checks before a launch: its remote managed settings ([`remote::preflight`])
/// and the worktree's git configuration ([`crate::clients::git::preflight`] with
/// [`GIT_AT_START`]).
///
/// # Errors
/// [`RenderError::RemoteSettings`], [`RenderError::GitConfig`].
pub fn start_preflight(ctx: &LaunchContext) -> Result<(), RenderError> {
    remote::preflight(ctx)?;
    crate::clients::git::preflight(ctx, &GIT_AT_START)
}

/// The file of the launch directory that holds the reviewer's `--mcp-config` JSON (mode
/// 0600): Claude Code 2.1.197 and 2.1.328 read a path there as a file ("Load MCP servers from
/// JSON files or strings", `claude --help`), so the servers' secrets are in no argv.
pub const MCP_CONFIG_FILE: &str = "mcp-config.json";

/// The Claude Code reviewer launch as a [`LaunchPlan`]: [`claude_reviewer_args`] as the
/// argv, its `--mcp-config` JSON moved into [`MCP_CONFIG_FILE`] (the argv names the file),
/// its prompt moved out of the argv into [`LaunchPlan::typed_prompt`] (typed once the
/// servers are ready, [`ready`]), the worktree (if set) as the directory to start in, the per-launch root
/// ([`crate::clients::root`]) with `CLAUDE_CONFIG_DIR=<home>/`[`CONFIG_DIR`] and
/// [`QUIET_ENV`], the
/// credentials of [`CREDENTIALS`], the first-run state ([`state::STATE_FILE`], mode 0600:
/// onboarding done, the API key approved, the worktree trusted, bypass-permissions
/// accepted), [`WORKTREE_CONFIG`] to remove from the worktree, the injected servers under
/// their registry ids; no ACP session.
///
/// Under `policy` [`Policy::Strict`] the plan hides the client's
/// built-in tools with effects from its model ([`tools`](crate::clients::tools)), and
/// [`LaunchPlan::unasked`] lists the rest.
///
/// # Errors
/// As [`claude_reviewer_args`]; [`RenderError::NeedsAbsolute`] without an absolute launch
/// directory; the credential errors of [`CREDENTIALS`].
pub(crate) fn claude_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    policy: Policy,
) -> Result<LaunchPlan, RenderError> {
    let mut argv = claude_reviewer_args(ctx, resolution)?;
    tools::hide(&mut argv, policy);
    let mut plan = plan_of(ctx, resolution, argv)?;
    plan.unasked = crate::clients::tools::unasked(Client::Claude, policy)?;
    Ok(plan)
}

fn plan_of(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    argv: Vec<String>,
) -> Result<LaunchPlan, RenderError> {
    let mut plan = LaunchPlan::rooted(Client::Claude, ctx, &WORKTREE_CONFIG, argv)?;
    plan.note_pr_config("--");
    let home = plan.env_value("HOME").unwrap_or_default().to_owned();
    plan.env.push(EnvVar::new(
        "CLAUDE_CONFIG_DIR",
        format!("{home}/{CONFIG_DIR}"),
    ));
    plan.env
        .extend(QUIET_ENV.map(|(name, value)| EnvVar::new(name, value)));
    plan.env.extend(crate::clients::git::override_env());
    plan.dirs
        .push(format!("{}/{CONFIG_DIR}", crate::clients::root::HOME_DIR));
    plan.files.push(PlanFile {
        path: state::STATE_FILE.to_owned(),
        contents: state::state_json(ctx),
        mode: 0o600,
    });
    plan.argv_value_to_file("--mcp-config", MCP_CONFIG_FILE, "");
    plan.servers = wire_servers(ctx, resolution);
    ready::type_when_ready(&mut plan)?;
    plan.dialogs = Dialog::all(state::DIALOGS);
    Ok(plan)
}
