//! A typed model of one entry of Codex's effective `mcp_servers` table, as Codex CLI 0.169.0
//! reports it through `codex app-server` `config/read` (see [`super::app_server`]).
//!
//! Source: `RawMcpServerConfig` / `McpServerConfig` in `codex-rs/config/src/mcp_types.rs` of
//! openai/codex. The `rust-v0.169.0` tag itself could not be fetched here (the repository
//! snapshot exceeds the size the tools bring over), so the list was read from a stored version
//! of that file (commit `00b17c2659c96ab3d0ae8de723b4ce2d686850b1`) and then measured on the
//! pinned 0.169.0 binary with `config/read`: 0.169.0 names the environment selector
//! `environment_id` (the stored file's `experimental_environment` is reported as an ignored
//! setting), and always reports `environment_id` (`"local"` when unset), `enabled`, `args`
//! (stdio) and `tool_timeout_sec` (`null` when unset). `tests/conformance_codex_config.rs` fails
//! when `config/read` returns a field this model does not know.
//!
//! Fields `config.toml` accepts that `config/read` never returns (so no renderer must handle
//! them): see [`INPUT_ONLY_FIELDS`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One `[mcp_servers.<name>]` entry of Codex's effective configuration. `None` is "not
/// reported". Any field this model does not know lands in [`ServerConfig::unknown`], so the
/// renderer can refuse it by name instead of passing it through.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ServerConfig {
    /// stdio: the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// stdio: extra environment variables, merged key by key by `-c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: variables forwarded from Codex's own environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_vars: Option<Vec<EnvVar>>,
    /// stdio: working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// streamable HTTP: the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// streamable HTTP: variable holding a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    /// streamable HTTP: static headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_headers: Option<BTreeMap<String, String>>,
    /// streamable HTTP: headers whose values come from environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_http_headers: Option<BTreeMap<String, String>>,
    /// Where Codex starts the server; Codex reports [`LOCAL_ENVIRONMENT`] when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    /// `false` skips the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `true` makes `codex exec` fail when the server does not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// `true` advertises every tool as safe for parallel calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_parallel_tool_calls: Option<bool>,
    /// Seconds to start and list tools (`startup_timeout_ms` is reported here too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_sec: Option<f64>,
    /// Seconds per tool call (reported as `null` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_sec: Option<f64>,
    /// Approval of the server's tools without a per-tool setting: `auto`, `prompt`, `approve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_tools_approval_mode: Option<String>,
    /// Allow-list of tool names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// Deny-list of tool names, applied after `enabled_tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_tools: Option<Vec<String>>,
    /// OAuth scopes for `codex mcp login`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// OAuth settings (`client_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<BTreeMap<String, serde_json::Value>>,
    /// OAuth resource parameter (RFC 8707).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_resource: Option<String>,
    /// Per-tool settings keyed by tool name (names may hold `.`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeMap<String, ToolConfig>>,
    /// Every field this model does not know, by name, with its value.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// One `tools.<tool>` table of a [`ServerConfig`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ToolConfig {
    /// `auto`, `prompt` or `approve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<String>,
    /// Every key this model does not know.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// One `env_vars` entry: a name, or `{name, source}` (`source` is `local` or `remote`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum EnvVar {
    /// `"NAME"`.
    Name(String),
    /// `{name = "NAME", source = "local"}`.
    Config {
        /// Variable name.
        name: String,
        /// `local` or `remote`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
}

/// Every field [`ServerConfig`] knows, as `config/read` names it (Codex CLI 0.169.0).
pub const FIELDS: [&str; 22] = [
    "command",
    "args",
    "env",
    "env_vars",
    "cwd",
    "url",
    "bearer_token_env_var",
    "http_headers",
    "env_http_headers",
    "environment_id",
    "enabled",
    "required",
    "supports_parallel_tool_calls",
    "startup_timeout_sec",
    "tool_timeout_sec",
    "default_tools_approval_mode",
    "enabled_tools",
    "disabled_tools",
    "scopes",
    "oauth",
    "oauth_resource",
    "tools",
];

/// Every key of a [`ToolConfig`].
pub const TOOL_FIELDS: [&str; 1] = ["approval_mode"];

/// Keys `config.toml` accepts in a server table that `config/read` never reports on 0.169.0:
/// `startup_timeout_ms` (reported as `startup_timeout_sec`), `name` (legacy display name,
/// dropped), `experimental_environment` (ignored with a warning), `bearer_token` (rejected).
pub const INPUT_ONLY_FIELDS: [&str; 4] = [
    "startup_timeout_ms",
    "name",
    "experimental_environment",
    "bearer_token",
];

/// The `environment_id` Codex reports for a server that does not set one.
pub const LOCAL_ENVIRONMENT: &str = "local";

/// `AppToolApproval` in `codex-rs/config/src/mcp_types.rs`: the tool runs with no question
/// (Codex may still run its safety monitor).
pub const APPROVE: &str = "approve";

/// `AppToolApproval::Prompt`: Codex asks the user before every call.
pub const PROMPT: &str = "prompt";

impl ServerConfig {
    /// The names of the fields that are set (known ones in [`FIELDS`] order, then unknown
    /// ones), as `config/read` reports them.
    pub fn set_fields(&self) -> Vec<String> {
        let value = serde_json::to_value(self).unwrap_or_default();
        let map = value.as_object().cloned().unwrap_or_default();
        let mut out: Vec<String> = FIELDS
            .iter()
            .filter(|f| map.contains_key(**f))
            .map(|f| f.to_string())
            .collect();
        out.extend(self.unknown.keys().cloned());
        out
    }
}

impl From<&str> for EnvVar {
    fn from(name: &str) -> EnvVar {
        EnvVar::Name(name.to_string())
    }
}
