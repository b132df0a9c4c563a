//! Claude Code: the inline `--mcp-config` JSON and the reviewer argv.
//!
//! Format: Claude Code's MCP configuration, `{"mcpServers":{<name>:{"command":…,"args":[…],
//! "env":{…}}}}` (stdio servers; `type` defaults to `stdio`). With `--strict-mcp-config`
//! Claude Code uses only the servers of `--mcp-config`, ignoring user and project ones.
//! Claude Code expands `${NAME}` and `${NAME:-default}` in `command`, `args` and `env`, with
//! no escape, so a value holding `${` is refused ([`RenderError::ClaudeExpansion`]).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::allowlist::{Policy, Resolution};
use crate::clients::{LaunchContext, LaunchError, RenderError, option_value};
use crate::model::McpServer;

/// The compact `--mcp-config` JSON for `ctx` and its resolved allowlist.
///
/// Gated ([`LaunchContext::is_gated`]) → exactly `{"mcpServers":{}}`. Otherwise
/// `kcap-flow-result` first, then each resolved server in allowlist order, each as
/// `{"command":<kcap_bin>,"args":[…],"env":{…}}` with env names in registry order.
///
/// # Errors
/// [`RenderError::ClaudeExpansion`] when any emitted value contains `${`;
/// [`RenderError::BlankAgentId`] when not gated and the agent id is blank.
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
    ctx.require_agent_id()?;
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

/// Refuses `value` when it contains `${`; `field` names it in the error (built only then).
fn refuse_expansion(
    server: &McpServer,
    value: &str,
    field: impl FnOnce() -> String,
) -> Result<(), RenderError> {
    if value.contains("${") {
        return Err(RenderError::ClaudeExpansion {
            server: server.id,
            field: field(),
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

/// The Claude Code reviewer argv (after the `claude` binary):
/// `--permission-mode bypassPermissions --strict-mcp-config --mcp-config <json>
/// --disallowedTools Agent`, then `--effort E` and `--model M` when set, then `-- <prompt>`
/// when set. `--mcp-config` takes several values, so its JSON is always followed by an
/// option, never by a positional argument.
///
/// Skipped allowlist entries are not reported here; call [`LaunchContext::resolve`] and
/// [`Resolution::skipped`] to log them.
///
/// # Errors
/// [`LaunchError::Rejected`] under [`Policy::Strict`]; [`LaunchError::Render`] as
/// [`claude_mcp_config`].
pub fn claude_reviewer_args(
    ctx: &LaunchContext,
    policy: Policy,
) -> Result<Vec<String>, LaunchError> {
    let resolution = ctx.resolve(policy)?;
    let config = claude_mcp_config(ctx, &resolution)?;
    let mut args: Vec<String> = [
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        &config,
        "--disallowedTools",
        "Agent",
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

/// The Claude Code reviewer launch as a [`LaunchPlan`](crate::clients::plan::LaunchPlan):
/// [`claude_reviewer_args`] as the argv, the worktree (if set) as the directory to start in,
/// the injected servers under their registry ids, the registry's env names removed from the
/// environment; no files or ACP session.
///
/// # Errors
/// As [`claude_reviewer_args`].
pub fn claude_plan(
    ctx: &LaunchContext,
    policy: Policy,
) -> Result<crate::clients::plan::LaunchPlan, LaunchError> {
    let argv = claude_reviewer_args(ctx, policy)?;
    let resolution = ctx.resolve(policy)?;
    Ok(crate::clients::plan::LaunchPlan::argv_only(
        crate::clients::Client::Claude,
        ctx,
        argv,
        crate::clients::wire_servers(ctx, &resolution),
    ))
}
