//! Codex CLI's room: the `-c` MCP overrides ([`codex_mcp_overrides`]) and the reviewer argv
//! (`codex_reviewer_args`, crate-private: a plan's argv, with the features closed in every
//! argv, [`CLOSED_FEATURES`]), and what generic code knows about the client ([`SPEC`]).
//!
//! Files: `launch` (re-exported here) holds the plan that roots the reviewer in a per-launch
//! `CODEX_HOME` (`codex_plan`, [`codex_config_toml`], [`CREDENTIALS`], [`MANAGED_FILES`],
//! [`GIT_AT_START`]); [`tools`] lists the built-in tools that run unasked; with the `cli`
//! feature, `registration` (the file a person registers servers in), `loader` (how Codex loads
//! it) and `hostile` (`verify`'s hostile configuration).
//!
//! What Codex CLI does, on which version, and the test or source that shows it (how it takes
//! `-c` overrides and approvals, its configuration sources and how each is closed, the
//! differences between versions, git at start): `docs/isolation/codex.md`.

mod launch;
pub mod tools;

#[cfg(feature = "cli")]
pub mod loader;
#[cfg(feature = "cli")]
pub mod registration;

/// `verify`: the hostile configuration of this client.
#[cfg(feature = "cli")]
pub mod hostile;

use std::fmt::Write as _;

use crate::allowlist::Resolution;
use crate::clients::{Client, LaunchContext, RenderError, non_blank, option_value};
use crate::model::McpServer;
pub(crate) use launch::codex_plan;
pub use launch::{
    BASE_URL_VAR, CODEX_HOME, CREDENTIALS, DIALOGS, GIT_AT_START, MANAGED_FILES, PROJECT_DOC_OFF,
    RUNTIME_DIR, WORKTREE_CONFIG, codex_config_toml, keep_api_key, preflight,
};

/// What generic code knows about Codex CLI ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "codex",
    display_name: "Codex CLI",
    // the npm package `@openai/codex` installs `codex`.
    binary: "codex",
    stamps_driver: false,
    carries_model: true,
    carries_effort: true,
    credentials: CREDENTIALS,
    managed_files: &MANAGED_FILES,
    preflight: Some(preflight),
    acp: false,
    needs_worktree: false,
    brokered_only: false,
    uses_launch_id: false,
    unverified_isolation: false,
    builtins: tools::BUILTINS,
    hides_builtins: true,
    launch_secrets: &[],
    door: &[launch::DOOR],
    plan: |ctx, r, inputs| Ok(codex_plan(ctx, r, inputs.policy)?),
    proof: crate::clients::spec::Proof::RealClient {
        tests: &[
            "conformance",
            "conformance_codex_config",
            "isolation_codex",
            "git_start",
            "conformance_codex_launch",
            "verify_clients",
        ],
        versions: &["0.169.0", "0.171.0"],
    },
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: Some(&hostile::VERIFY),
};

/// The client's words in `render codex --help` and `export codex --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Codex CLI: its TUI in a per-launch CODEX_HOME, servers as `-c` overrides",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --launch-dir <DIR> [OPTIONS]",
    render_after_help: "\
The plan (--format plan) roots Codex in a per-launch CODEX_HOME and HOME that configure no MCP
server but kcap's, and removes the worktree's .codex and .agents: Codex then starts exactly
these servers, with no inventory of the user's to disable. The argv alone (the other formats)
isolates nothing: run it only as the plan says.

Example:
  kcap-mcp-registry render codex --launch-json launch.json --launch-dir /run/kcap/l1 --worktree /work/tree --format plan",
    deprecated_flags: &[
        crate::clients::spec::DeprecatedFlag {
            long: "inventory",
            value_name: Some("FILE|-"),
        },
        crate::clients::spec::DeprecatedFlag {
            long: "codex-bin",
            value_name: Some("PATH"),
        },
        crate::clients::spec::DeprecatedFlag {
            long: "no-inherited-servers",
            value_name: None,
        },
    ],
    deprecated_because: "the plan roots Codex in a per-launch CODEX_HOME that configures no MCP server but kcap's, so there is no inherited server to take an inventory of",
    export_about: "Codex CLI: [mcp_servers.<id>] tables for config.toml",
    export_aliases: &["codex-toml"],
    export_after_help: Some("\
Example:
  kcap-mcp-registry export codex --project-dir \"$PWD\" > kcap-servers.toml
  # or merge them into config.toml: kcap-mcp-registry install --client codex"),
};

/// Codex 0.169.0 features that can give a reviewer tools outside `mcp_servers`, each turned
/// off with `--disable <feature>` in every reviewer argv (`config/read` of the planned
/// reviewer reports each as `false`, tested in `tests/clients/conformance_codex_config.rs`; measured
/// before the plan had its own `CODEX_HOME`: a user's `[features]` could not turn them back
/// on either). From `codex features list` on 0.169.0 and the
/// feature descriptions in `codex-rs/features/src/lib.rs`:
/// - `apps`: ChatGPT connectors, served as the `codex_apps` MCP server, which bypasses
///   `mcp_servers` (stable, on by default; needs ChatGPT sign-in);
/// - `enable_mcp_apps`, `codex_apps_mcp_2026_07_28`: MCP apps and the newer connectors
///   server (under development, off by default, but a user's config can turn them on);
/// - `plugins`: MCP servers from installed plugins' `.mcp.json` (stable, on; measured:
///   `--disable plugins` removes a plugin's server from `codex mcp list`);
/// - `remote_plugin`: the remote plugin catalog (stable, on);
/// - `skill_mcp_dependency_install`: skills that install the MCP servers they depend on
///   (stable, on);
/// - `tool_suggest`: suggestions to install connectors and plugins (stable, on);
/// - `browser_use`, `browser_use_external`, `in_app_browser`, `computer_use`: browser and
///   computer control tools (stable, on; requirements-only gates of the desktop apps);
/// - `shell_snapshot`, `shell_snapshot_v2`: a snapshot of the user's login shell taken when a
///   session starts (measured on 0.169.0: it ran `/etc/profile` and `/etc/profile.d/*`, with
///   or without `allow_login_shell = false`; with both disabled, neither ran:
///   `isolation_codex::no_login_shell_profile_runs`).
pub const CLOSED_FEATURES: [&str; 13] = [
    "apps",
    "enable_mcp_apps",
    "codex_apps_mcp_2026_07_28",
    "plugins",
    "remote_plugin",
    "skill_mcp_dependency_install",
    "tool_suggest",
    "browser_use",
    "browser_use_external",
    "in_app_browser",
    "computer_use",
    "shell_snapshot",
    "shell_snapshot_v2",
];

/// `AppToolApproval::Approve` in `codex-rs/config/src/mcp_types.rs`: the tool runs with no
/// question (Codex may still run its safety monitor).
pub const APPROVE: &str = "approve";

/// `AppToolApproval::Prompt`: Codex asks the user before every call.
pub const PROMPT: &str = "prompt";

/// Writes `s` as a TOML 1.0 basic string (`"…"`): `\\`, `\"`, `\b`, `\t`, `\n`, `\f`, `\r`,
/// other U+0000–U+001F and U+007F as `\uXXXX`, everything else verbatim.
///
/// ```
/// use kcap_mcp_registry::clients::codex::toml_basic_string;
///
/// assert_eq!(toml_basic_string("C:\\kcap \"x\"\t\u{1}é"), r#""C:\\kcap \"x\"\t\u0001é""#);
/// ```
pub fn toml_basic_string(s: &str) -> String {
    let mut out = String::new();
    push_toml_string(&mut out, s);
    out
}

fn push_toml_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\0'..='\u{1f}' | '\u{7f}' => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn push_toml_array<'s>(out: &mut String, items: impl IntoIterator<Item = &'s str>) {
    out.push('[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_toml_string(out, item);
    }
    out.push(']');
}

/// The Codex `-c` override values (without the `-c`), unless gated: for the result channel,
/// each resolved server, then (for a borrowed snapshot) each `inject = "borrowed-snapshot"`
/// server: `mcp_servers.<id>.enabled=true`, `.command="…"`, `.args=[…]`,
/// `.env={NAME="…",…}`, `.default_tools_approval_mode="approve"|"prompt"`, and
/// `.tools={"<tool>"={approval_mode="approve"},…}` when the registry marks a tool
/// `unattended_safe`. Gated, none.
///
/// # Errors
/// When not gated, [`RenderError::BlankAgentId`] for a blank agent id,
/// [`RenderError::BlankCapabilityUrl`] and [`RenderError::MissingReviewContextUrl`].
///
/// ```
/// use kcap_mcp_registry::{LaunchContext, Policy, clients::codex::codex_mcp_overrides};
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     ..LaunchContext::default()
/// };
/// let overrides = codex_mcp_overrides(&ctx, &ctx.resolve(Policy::Lenient).unwrap()).unwrap();
/// assert_eq!(overrides, [
///     "mcp_servers.kcap-flow-result.enabled=true",
///     r#"mcp_servers.kcap-flow-result.command="/usr/bin/kcap""#,
///     r#"mcp_servers.kcap-flow-result.args=["mcp","flow-result"]"#,
///     r#"mcp_servers.kcap-flow-result.env={KCAP_URL="http://127.0.0.1:5100",KCAP_FLOW_AGENT_ID="a1"}"#,
///     r#"mcp_servers.kcap-flow-result.default_tools_approval_mode="prompt""#,
///     r#"mcp_servers.kcap-flow-result.tools={"submit_review_result"={approval_mode="approve"},"send_flow_message"={approval_mode="approve"}}"#,
/// ]);
/// ```
pub fn codex_mcp_overrides(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<Vec<String>, RenderError> {
    ctx.require_launch_values()?;
    let mut out = Vec::new();
    let command = ctx.kcap_bin.as_deref().unwrap_or_default();
    for (server, env) in ctx.servers(resolution) {
        let id = server.id;
        let key = |field: &str| format!("mcp_servers.{id}.{field}=");
        out.push(key("enabled") + "true");
        let mut v = key("command");
        push_toml_string(&mut v, command);
        out.push(v);
        let mut v = key("args");
        push_toml_array(&mut v, server.args.iter().copied());
        out.push(v);
        let mut v = key("env") + "{";
        for (i, (name, value)) in env.iter().enumerate() {
            if i > 0 {
                v.push(',');
            }
            v.push_str(name);
            v.push('=');
            push_toml_string(&mut v, value);
        }
        v.push('}');
        out.push(v);
        let mut v = key("default_tools_approval_mode");
        push_toml_string(&mut v, default_approval(server));
        out.push(v);
        let mut tools = server.tools.iter().filter(|t| t.unattended_safe).peekable();
        if tools.peek().is_some() {
            let mut v = key("tools") + "{";
            for (i, tool) in tools.enumerate() {
                if i > 0 {
                    v.push(',');
                }
                push_toml_string(&mut v, tool.name);
                v.push_str("={approval_mode=");
                push_toml_string(&mut v, APPROVE);
                v.push('}');
            }
            v.push('}');
            out.push(v);
        }
    }
    Ok(out)
}

/// The `default_tools_approval_mode` kcap gives `server`: [`APPROVE`] when it is
/// `read_only` (every tool is free of side effects), else [`PROMPT`].
pub fn default_approval(server: &McpServer) -> &'static str {
    if server.read_only { APPROVE } else { PROMPT }
}

/// The character that makes Codex CLI's terminal client run its prompt as a local shell
/// command: a prompt that starts with it (`codex -- '!touch x'`) runs `touch x` at start,
/// outside Codex's own sandbox (measured on 0.169.0, the model API at a dead port and at a
/// stand-in; reported on 0.171.0 too, issue 34; `isolation_codex::a_prompt_is_only_a_prompt` in
/// `tests/clients/isolation_codex.rs` shows it again on every run). One led
/// by a space or a line break was sent as a prompt on 0.169.0; the plan (`codex_reviewer_args`)
/// refuses it all the same, since the composer's trimming is not a documented contract.
pub const PROMPT_SHELL_PREFIX: char = '!';

/// The Codex reviewer argv (after the `codex` binary): `--cd W` (when a worktree is set),
/// `--sandbox danger-full-access` (Codex's own sandbox off: the reviewer's sandbox confines
/// it and all it starts; Codex 0.169.0's own, bubblewrap, cannot run inside it, as Landlock
/// allows no mount and building its command opens `/tmp/codex-daemon-<uid>` in the shared
/// `/tmp`, so with `workspace-write` every command of its shell tool failed with "error
/// building bubblewrap command: Permission denied": measured,
/// `sandbox_tools_openai::codex_tool_commands_are_confined`),
/// `--ask-for-approval never --no-daemon` (measured on 0.169.0:
/// without it the TUI signed in with an API key installed a copy of itself under
/// `$CODEX_HOME/packages`, started it as a background `app-server --managed-daemon`, ran the
/// session and its MCP servers there, and left it running after the TUI was killed; a daemon
/// already running for the same `CODEX_HOME` would be joined instead), `--disable F` for each of
/// [`CLOSED_FEATURES`], `-c` before each of
/// [`codex_mcp_overrides`], `-m M` unless the model is empty or `default` (any case),
/// `-c model_reasoning_effort="E"` unless the effort is empty or `auto` (any case; `max`
/// becomes `xhigh`), `--no-alt-screen`, then `-- <prompt>` when set.
///
/// `resolution` is `ctx`'s allowlist resolved ([`LaunchContext::resolve`]), whose
/// [`skipped`](Resolution::skipped) entries the caller logs. The argv isolates nothing by
/// itself: run it as `codex_plan` says.
///
/// # Errors
/// As [`codex_mcp_overrides`]; [`RenderError::OptionLike`] for a model or worktree
/// starting with `-`; [`RenderError::PromptIsCommand`] for a prompt that starts, after white
/// space, with [`PROMPT_SHELL_PREFIX`].
pub(crate) fn codex_reviewer_args(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<Vec<String>, RenderError> {
    let overrides = codex_mcp_overrides(ctx, resolution)?;
    let mut args = Vec::with_capacity(overrides.len() * 2 + 12);
    if let Some(worktree) = option_value("worktree", &ctx.worktree)? {
        args.extend(["--cd".into(), worktree.into()]);
    }
    args.extend(
        [
            "--sandbox",
            "danger-full-access",
            "--ask-for-approval",
            "never",
            "--no-daemon",
        ]
        .map(String::from),
    );
    for feature in CLOSED_FEATURES {
        args.extend(["--disable".into(), feature.into()]);
    }
    args.extend(["-c".into(), launch::PROJECT_DOC_OFF.into()]);
    for o in overrides {
        args.extend(["-c".into(), o]);
    }
    if let Some(model) =
        option_value("model", &ctx.model)?.filter(|m| !m.eq_ignore_ascii_case("default"))
    {
        args.extend(["-m".into(), model.into()]);
    }
    if let Some(effort) = non_blank(&ctx.effort).filter(|e| !e.eq_ignore_ascii_case("auto")) {
        let effort = if effort.eq_ignore_ascii_case("max") {
            "xhigh"
        } else {
            effort
        };
        args.extend([
            "-c".into(),
            format!("model_reasoning_effort={}", toml_basic_string(effort)),
        ]);
    }
    args.push("--no-alt-screen".into());
    if let Some(prompt) = ctx.prompt.as_deref().filter(|p| !p.is_empty()) {
        if prompt.trim_start().starts_with(PROMPT_SHELL_PREFIX) {
            return Err(RenderError::PromptIsCommand {
                client: Client::Codex,
                prefix: PROMPT_SHELL_PREFIX,
                runs: "which Codex CLI runs as a local shell command at start, outside its own \
                       sandbox",
            });
        }
        args.extend(["--".into(), prompt.into()]);
    }
    Ok(args)
}
