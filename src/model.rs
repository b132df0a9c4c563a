//! The shape of one compiled registry entry: [`McpServer`], its [`EnvSource`]s and [`Tool`]s.
//!
//! These types hold only `&'static` data: `build.rs` writes every registry entry as a
//! `const`-constructible literal of them, and the library hands out `&'static McpServer`.
//! `build.rs` compiles this file too (through `#[path]`), so the generator and the library
//! agree on one definition.

/// Where the launcher takes the value of an environment variable it sets on an MCP server.
///
/// Spelled in registry files as the strings `"server_url"` and `"agent_id"`
/// (see [`EnvSource::from_name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EnvSource {
    /// The kcap server URL the daemon talks to (`LaunchContext::server_url`).
    ServerUrl,
    /// The reviewer's agent id. Registry rule `agent-id-injection-only` allows it only on
    /// entries with `allowlistable = false`, so it never reaches an allowlisted server.
    AgentId,
}

impl EnvSource {
    /// Every source, in the order registry files document them.
    pub const ALL: [EnvSource; 2] = [EnvSource::ServerUrl, EnvSource::AgentId];

    /// The spelling used in registry files: `"server_url"` or `"agent_id"`.
    pub const fn name(self) -> &'static str {
        match self {
            EnvSource::ServerUrl => "server_url",
            EnvSource::AgentId => "agent_id",
        }
    }

    /// Parses the registry-file spelling; `None` for anything else (exact, case-sensitive).
    pub fn from_name(name: &str) -> Option<EnvSource> {
        EnvSource::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One tool an MCP server advertises, from the entry's `[[tools]]` catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tool {
    /// Tool name as the server advertises it (`^[A-Za-z0-9_.-]{1,128}$`).
    pub name: &'static str,
    /// The tool is safe for an unattended reviewer to call without approval.
    pub unattended_safe: bool,
}

/// One kcap-owned MCP server: a validated registry entry, compiled into the binary.
///
/// Every field comes from `registry/<id>.toml`; see the README's rules table for what the
/// build guarantees about each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct McpServer {
    /// Canonical id: `^[a-z][a-z0-9-]*[a-z0-9]$`, ASCII, at most 64 bytes; equal to the file stem.
    pub id: &'static str,
    /// One line of 1 to 300 characters, no control or invisible characters.
    pub description: &'static str,
    /// Argv after the kcap binary; never empty, no empty element.
    pub args: &'static [&'static str],
    /// The server can start flows; the recursion guard strips it from every allowlist.
    pub starts_flows: bool,
    /// `false` for injection-only servers (the result channel): never materialized from an
    /// allowlist.
    pub allowlistable: bool,
    /// Every tool is free of side effects, so an unattended reviewer may auto-approve it.
    pub read_only: bool,
    /// Registration configs run the server in the project directory.
    pub needs_project_cwd: bool,
    /// Environment variables the launcher sets, in the order the registry file declares them.
    pub env: &'static [(&'static str, EnvSource)],
    /// The tools the server serves, in advertised order.
    pub tools: &'static [Tool],
}

/// Canonical id of the reserved result channel, injected by the launcher into every reviewer
/// and never allowlistable (registry rule `result-channel-allowlistable`).
pub const RESULT_CHANNEL_ID: &str = "kcap-flow-result";

/// Longest canonical id the registry accepts, in bytes (registry rule `id-canonical`).
pub const MAX_ID_LEN: usize = 64;
