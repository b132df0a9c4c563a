//! OpenAI Codex CLI: the `-c` MCP overrides and the reviewer argv.
//!
//! Format: Codex `-c key=value` overrides (Codex CLI 0.169.0): the key is a dotted path split
//! on every `.` (quotes are not understood), the value is parsed as TOML and silently taken
//! as a raw string when that fails, so every value here is valid TOML. Overrides deep-merge
//! onto the user's `$CODEX_HOME/config.toml` (tables key by key; arrays and scalars
//! replace); a later whole-table `-c mcp_servers={…}` replaces an earlier one.
//!
//! Consequences, all probed on 0.169.0, and what the renderer does about them:
//! - `-c mcp_servers={}` removes nothing: every inherited server (from the
//!   [inventory]) that we do not enable is disabled by name in the first
//!   override, as a quoted TOML key so dotted names work, keeping its `url` (URL servers) or
//!   getting an inert `command` (so the entry stays valid for plugin servers).
//! - An inherited server named like one we enable merges its fields into ours: `env_vars`,
//!   `cwd`, timeouts and `disabled_tools` are overridden back to neutral values; extra `env`
//!   keys and a `url` cannot be neutralized and are refused with a [`RenderError`].

pub mod inventory;

#[cfg(feature = "cli")]
pub mod loader;
#[cfg(feature = "cli")]
pub mod registration;

use std::fmt::Write as _;

use crate::allowlist::{Policy, Resolution};
use crate::clients::{LaunchContext, LaunchError, RenderError, option_value, set};
use crate::model::McpServer;
use inventory::{InheritedServer, Transport};

/// The command given to inherited stdio servers we disable. Never run: the entry is disabled.
pub const INERT_COMMAND: &str = "false";

/// `startup_timeout_sec` Codex 0.169.0 uses when unset (observed: 30 s).
pub const NEUTRAL_STARTUP_TIMEOUT_SEC: u32 = 30;

/// `tool_timeout_sec` Codex uses when unset (`DEFAULT_TOOL_TIMEOUT` in codex-rs: 120 s).
pub const NEUTRAL_TOOL_TIMEOUT_SEC: u32 = 120;

/// Writes `s` as a TOML 1.0 basic string (`"…"`): `\\`, `\"`, `\b`, `\t`, `\n`, `\f`, `\r`,
/// other U+0000–U+001F and U+007F as `\uXXXX`, everything else verbatim.
///
/// ```
/// use kcap_mcp_registry::clients::codex::toml_basic_string;
///
/// assert_eq!(toml_basic_string("C:\\kcap \"x\"\t\u{1}é"), r#""C:\\kcap \"x\"\t\u0001é""#);
/// ```
pub fn toml_basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_toml_string(&mut out, s);
    out
}

fn push_toml_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let needs_escape = |b: u8| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\';
    // A fold without early exit, which the compiler vectorizes: most values need no escape.
    if !s.bytes().fold(false, |any, b| any | needs_escape(b)) {
        out.push_str(s);
        out.push('"');
        return;
    }
    // Every escaped character is ASCII, so each run between them ends on a char boundary.
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f | 0x7f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04X}");
        } else {
            out.push_str(escape);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
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

/// The Codex `-c` override values (without the `-c`), in order:
///
/// 1. `mcp_servers={…}` disabling every inherited server we do not enable
///    (`"<name>"={enabled=false,url="…"}` or `{enabled=false,command="false"}`), or
///    `mcp_servers={}` when there is none;
/// 2. unless gated, for the result channel and then each resolved server:
///    `mcp_servers.<id>.enabled=true`, `.command="…"`, `.args=[…]`, `.env={NAME="…",…}`,
///    followed, only where the inventory holds a server of the same name, by `.env_vars=[]`,
///    `.cwd="<worktree>"` (if it has a `cwd`), `.startup_timeout_sec=30` and
///    `.tool_timeout_sec=120` (if set), `.disabled_tools=[]`, and `.enabled_tools=[…]` (the
///    registry's tool catalog, when it has one).
///
/// # Errors
/// [`RenderError::CodexInheritedField`] when an inherited server of the same name as one we
/// enable has a `url`, an `env` key we do not set, or a `cwd` while `ctx.worktree` is unset;
/// [`RenderError::DuplicateInherited`] when the inventory lists a name twice;
/// [`RenderError::BlankAgentId`] when not gated and the agent id is blank.
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
/// let overrides = codex_mcp_overrides(&ctx, &ctx.resolve(Policy::Lenient).unwrap(), &[]).unwrap();
/// assert_eq!(overrides, [
///     "mcp_servers={}",
///     "mcp_servers.kcap-flow-result.enabled=true",
///     r#"mcp_servers.kcap-flow-result.command="/usr/bin/kcap""#,
///     r#"mcp_servers.kcap-flow-result.args=["mcp","flow-result"]"#,
///     r#"mcp_servers.kcap-flow-result.env={KCAP_URL="http://127.0.0.1:5100",KCAP_FLOW_AGENT_ID="a1"}"#,
/// ]);
/// ```
pub fn codex_mcp_overrides(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    inventory: &[InheritedServer],
) -> Result<Vec<String>, RenderError> {
    ctx.require_agent_id()?;
    let servers: Vec<_> = ctx.servers(resolution).collect();
    let enabled = |name: &str| servers.iter().any(|(s, _)| s.id == name);

    if inventory.len() > 1 {
        let mut names = std::collections::HashSet::with_capacity(inventory.len());
        if let Some(s) = inventory.iter().find(|s| !names.insert(s.name.as_str())) {
            return Err(RenderError::DuplicateInherited {
                server: s.name.clone(),
            });
        }
    }
    let mut clear = String::from("mcp_servers={");
    for (i, inherited) in inventory.iter().filter(|s| !enabled(&s.name)).enumerate() {
        if i > 0 {
            clear.push(',');
        }
        push_toml_string(&mut clear, &inherited.name);
        clear.push_str("={enabled=false,");
        match &inherited.transport {
            Transport::StreamableHttp { url } => {
                clear.push_str("url=");
                push_toml_string(&mut clear, url);
            }
            Transport::Stdio { .. } => {
                clear.push_str("command=");
                push_toml_string(&mut clear, INERT_COMMAND);
            }
        }
        clear.push('}');
    }
    clear.push('}');

    let mut out = Vec::with_capacity(1 + 4 * servers.len());
    out.push(clear);
    let command = ctx.kcap_bin.as_deref().unwrap_or_default();
    for (server, env) in &servers {
        let id = server.id;
        // `mcp_servers.<id>.<field>=`, with room for a value of `value_len` bytes.
        let key = |field: &str, value_len: usize| {
            let mut k = String::with_capacity(14 + id.len() + field.len() + value_len);
            k.push_str("mcp_servers.");
            k.push_str(id);
            k.push('.');
            k.push_str(field);
            k.push('=');
            k
        };
        let mut v = key("enabled", 4);
        v.push_str("true");
        out.push(v);
        let mut v = key("command", command.len() + 2);
        push_toml_string(&mut v, command);
        out.push(v);
        let args_len = server.args.iter().map(|a| a.len() + 3).sum::<usize>();
        let mut v = key("args", args_len + 2);
        push_toml_array(&mut v, server.args.iter().copied());
        out.push(v);
        let env_len = env
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum::<usize>();
        let mut v = key("env", env_len + 2);
        v.push('{');
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
        if let Some(inherited) = inventory.iter().find(|s| s.name == id) {
            neutralize(ctx, server, env, inherited, &mut out)?;
        }
    }
    Ok(out)
}

/// Overrides for the fields an inherited server of the same name would merge into ours.
fn neutralize(
    ctx: &LaunchContext,
    server: &McpServer,
    env: &[(&str, &str)],
    inherited: &InheritedServer,
    out: &mut Vec<String>,
) -> Result<(), RenderError> {
    let refuse = |field: String| RenderError::CodexInheritedField {
        server: inherited.name.clone(),
        field,
    };
    let Transport::Stdio {
        env: inherited_env,
        cwd,
        ..
    } = &inherited.transport
    else {
        return Err(refuse("url".into()));
    };
    if let Some(extra) = inherited_env
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| !env.iter().any(|(name, _)| name == k))
    {
        return Err(refuse(format!("env.{extra}")));
    }
    let id = server.id;
    out.push(format!("mcp_servers.{id}.env_vars=[]"));
    if cwd.is_some() {
        let worktree = set(&ctx.worktree).ok_or_else(|| refuse("cwd".into()))?;
        let mut v = format!("mcp_servers.{id}.cwd=");
        push_toml_string(&mut v, worktree);
        out.push(v);
    }
    if inherited.startup_timeout_sec.is_some() {
        out.push(format!(
            "mcp_servers.{id}.startup_timeout_sec={NEUTRAL_STARTUP_TIMEOUT_SEC}"
        ));
    }
    if inherited.tool_timeout_sec.is_some() {
        out.push(format!(
            "mcp_servers.{id}.tool_timeout_sec={NEUTRAL_TOOL_TIMEOUT_SEC}"
        ));
    }
    // `codex mcp list` does not show tool filters, so reset them whenever names collide.
    out.push(format!("mcp_servers.{id}.disabled_tools=[]"));
    if !server.tools.is_empty() {
        let mut v = format!("mcp_servers.{id}.enabled_tools=");
        push_toml_array(&mut v, server.tools.iter().map(|t| t.name));
        out.push(v);
    }
    Ok(())
}

/// The Codex reviewer argv (after the `codex` binary): `--cd W` (when a worktree is set),
/// `--sandbox workspace-write --ask-for-approval never`, `-c` before each of
/// [`codex_mcp_overrides`], `-m M` unless the model is empty or `default` (any case),
/// `-c model_reasoning_effort="E"` unless the effort is empty or `auto` (any case; `max`
/// becomes `xhigh`), `--no-alt-screen`, then `-- <prompt>` when set.
///
/// # Errors
/// [`LaunchError::Rejected`] under [`Policy::Strict`]; [`LaunchError::Render`] as
/// [`codex_mcp_overrides`].
pub fn codex_reviewer_args(
    ctx: &LaunchContext,
    policy: Policy,
    inventory: &[InheritedServer],
) -> Result<Vec<String>, LaunchError> {
    let resolution = ctx.resolve(policy)?;
    let overrides = codex_mcp_overrides(ctx, &resolution, inventory)?;
    let mut args = Vec::with_capacity(overrides.len() * 2 + 12);
    if let Some(worktree) = option_value("worktree", &ctx.worktree)? {
        args.extend(["--cd".into(), worktree.into()]);
    }
    args.extend(
        [
            "--sandbox",
            "workspace-write",
            "--ask-for-approval",
            "never",
        ]
        .map(String::from),
    );
    for o in overrides {
        args.extend(["-c".into(), o]);
    }
    if let Some(model) =
        option_value("model", &ctx.model)?.filter(|m| !m.eq_ignore_ascii_case("default"))
    {
        args.extend(["-m".into(), model.into()]);
    }
    if let Some(effort) = set(&ctx.effort).filter(|e| !e.eq_ignore_ascii_case("auto")) {
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
        args.extend(["--".into(), prompt.into()]);
    }
    Ok(args)
}

/// The Codex reviewer launch as a [`LaunchPlan`](crate::clients::plan::LaunchPlan):
/// [`codex_reviewer_args`] as the argv, the worktree (if set) as the directory to start in,
/// the injected servers under their registry ids, the registry's env names removed from the
/// environment; no files or ACP session.
///
/// # Errors
/// As [`codex_reviewer_args`].
pub fn codex_plan(
    ctx: &LaunchContext,
    policy: Policy,
    inventory: &[InheritedServer],
) -> Result<crate::clients::plan::LaunchPlan, LaunchError> {
    let argv = codex_reviewer_args(ctx, policy, inventory)?;
    let resolution = ctx.resolve(policy)?;
    Ok(crate::clients::plan::LaunchPlan::argv_only(
        crate::clients::Client::Codex,
        ctx,
        argv,
        crate::clients::wire_servers(ctx, &resolution),
    ))
}
