//! The shape of one compiled registry entry: [`McpServer`], its [`EnvSource`]s and [`Tool`]s.
//!
//! These types hold only `&'static` data: `build.rs` writes every registry entry as a
//! `const`-constructible literal of them, and the library hands out `&'static McpServer`.
//! `build.rs` compiles this file too (through `#[path]`), so the generator and the library
//! agree on one definition.

/// Where the launcher takes the value of an environment variable it sets on an MCP server.
///
/// Spelled in registry files as a source name (`"server_url"`, `"agent_id"`,
/// `"result_capability_url"`, `"review_context_url"`; see [`EnvSource::from_name`]) or as a
/// constant, `{ value = "1" }`. `S` is the constant's string type: `&'static str` in the
/// compiled table, `String` in an entry read at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EnvSource<S = &'static str> {
    /// The kcap server URL the daemon talks to (`LaunchContext::server_url`). On an entry
    /// that also has [`EnvSource::ResultCapabilityUrl`], set only in direct result delivery.
    ServerUrl,
    /// The reviewer's agent id. Registry rule `agent-id-injection-only` allows it only on
    /// entries with `allowlistable = false`, so it never reaches an allowlisted server.
    AgentId,
    /// The per-launch capability URL of brokered result delivery (the reviewer's HOME is not
    /// the daemon user's). Set instead of the entry's [`EnvSource::ServerUrl`] variables, never
    /// with them. Rule `env-source-scope`: only on the `inject = "always"` entry.
    ResultCapabilityUrl,
    /// The review-context bridge URL of a borrowed-snapshot review. Rule `env-source-scope`:
    /// only on `inject = "borrowed-snapshot"` entries.
    ReviewContextUrl,
    /// A constant value, set as is (rule `env-constant`: printable, non-empty, no `${`).
    Constant(S),
}

impl EnvSource {
    /// Every named source, in the order registry files document them (a constant has no name).
    pub const ALL: [EnvSource; 4] = [
        EnvSource::ServerUrl,
        EnvSource::AgentId,
        EnvSource::ResultCapabilityUrl,
        EnvSource::ReviewContextUrl,
    ];

    /// Parses the registry-file spelling of a named source; `None` for anything else (exact,
    /// case-sensitive).
    pub fn from_name(name: &str) -> Option<EnvSource> {
        EnvSource::ALL.into_iter().find(|s| s.name() == Some(name))
    }
}

impl<S> EnvSource<S> {
    /// The same source, with a constant's string mapped by `f`.
    pub fn map<T>(self, f: impl FnOnce(S) -> T) -> EnvSource<T> {
        match self {
            EnvSource::ServerUrl => EnvSource::ServerUrl,
            EnvSource::AgentId => EnvSource::AgentId,
            EnvSource::ResultCapabilityUrl => EnvSource::ResultCapabilityUrl,
            EnvSource::ReviewContextUrl => EnvSource::ReviewContextUrl,
            EnvSource::Constant(c) => EnvSource::Constant(f(c)),
        }
    }

    /// The spelling used in registry files, e.g. `"server_url"`; `None` for a constant.
    pub const fn name(&self) -> Option<&'static str> {
        match self {
            EnvSource::ServerUrl => Some("server_url"),
            EnvSource::AgentId => Some("agent_id"),
            EnvSource::ResultCapabilityUrl => Some("result_capability_url"),
            EnvSource::ReviewContextUrl => Some("review_context_url"),
            EnvSource::Constant(_) => None,
        }
    }
}

/// When the launcher injects a reserved (`allowlistable = false`) server into a reviewer.
/// Spelled in registry files as `inject = "always"` or `inject = "borrowed-snapshot"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Inject {
    /// Into every reviewer, first: the result channel (rule `inject-always`: it alone).
    Always,
    /// Into reviews of a borrowed snapshot only (the reviewer's worktree is another user's
    /// checkout), after the allowlisted servers.
    BorrowedSnapshot,
}

impl Inject {
    /// Every condition, in documentation order.
    pub const ALL: [Inject; 2] = [Inject::Always, Inject::BorrowedSnapshot];

    /// The registry-file spelling: `"always"` or `"borrowed-snapshot"`.
    pub const fn name(self) -> &'static str {
        match self {
            Inject::Always => "always",
            Inject::BorrowedSnapshot => "borrowed-snapshot",
        }
    }

    /// Parses [`Inject::name`] (exact, case-sensitive).
    pub fn from_name(name: &str) -> Option<Inject> {
        Inject::ALL.into_iter().find(|i| i.name() == name)
    }
}

/// One tool an MCP server advertises, from the entry's `[[tools]]` catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tool {
    /// Tool name as the server advertises it (`^[A-Za-z0-9_-]+$`; with the id, at most 64
    /// bytes as `mcp__<id>__<tool>`, and within every [`ALIASING_CLIENTS`] limit with the
    /// server's alias stem and any launch id).
    pub name: &'static str,
    /// The tool is safe for an unattended reviewer to call without approval.
    pub unattended_safe: bool,
}

/// One kcap-owned MCP server: a validated registry entry, compiled into the binary.
///
/// Every field comes from `registry/<id>.toml`; see the rules table of docs/registry-format.md for what the
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
    /// When the launcher injects this server: set exactly on `allowlistable = false` entries.
    pub inject: Option<Inject>,
    /// Registration exports register it with clients (default `true` for allowlistable
    /// entries; always `false` for injection-only ones).
    pub registered: bool,
    /// Every tool is free of side effects, so an unattended reviewer may auto-approve it.
    pub read_only: bool,
    /// Registration configs run the server in the project directory.
    pub needs_project_cwd: bool,
    /// Registrations for clients that need it append `--driver <client>` to its args (the
    /// server's only way to learn which client drives it). Only on `starts_flows` entries.
    pub driver_stamp: bool,
    /// A shorter stem for the server's per-launch wire name on clients that alias server
    /// names (`<stem>-<launch id>`, [`ALIASING_CLIENTS`]), so that every qualified tool name
    /// fits their limit; `None` uses the id. Canonical like an id, shorter than the id, unique
    /// among every id and alias of the registry (rules `alias-format`, `alias-unique`).
    pub alias: Option<&'static str>,
    /// Environment variables the launcher sets, in the order the registry file declares them.
    pub env: &'static [(&'static str, EnvSource)],
    /// The tools the server serves, in advertised order.
    pub tools: &'static [Tool],
}

impl McpServer {
    /// The stem of the server's per-launch wire name on an aliasing client: its
    /// [`alias`](McpServer::alias) when it has one, else its id.
    pub fn alias_stem(&self) -> &'static str {
        self.alias.unwrap_or(self.id)
    }
}

/// Hex digits of the per-launch suffix of an aliased wire name (`<stem>-<16 hex>`): 64 bits
/// from the OS CSPRNG (the launch id of `clients::plan::LaunchId`).
pub const LAUNCH_ID_HEX_LEN: usize = 16;

/// How a client that aliases server names (`<stem>-<launch id>`) names an MCP tool to the
/// model, and the longest such name it passes on uncut. Registry rule `tool-name-length`
/// bounds every tool of every server by each of [`ALIASING_CLIENTS`], so the limit holds for
/// every launch id. The evidence for each client's values is in its room (`src/clients/…`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AliasedToolNames {
    /// The client's name (`gemini`).
    pub client: &'static str,
    /// What comes before the wire name, e.g. `mcp_`.
    pub prefix: &'static str,
    /// What comes between the wire name and the tool name, e.g. `_`.
    pub separator: &'static str,
    /// The longest qualified name the client passes on unchanged, in bytes.
    pub max_len: usize,
}

impl AliasedToolNames {
    /// The qualified name of tool `tool` of the server named `wire_name`.
    pub fn qualified(&self, wire_name: &str, tool: &str) -> String {
        format!("{}{wire_name}{}{tool}", self.prefix, self.separator)
    }

    /// The length of the qualified name of `tool` of a server whose wire name is
    /// `<stem>-<16 hex>`, whatever the launch id.
    pub const fn aliased_len(&self, stem: &str, tool: &str) -> usize {
        self.prefix.len() + stem.len() + 1 + LAUNCH_ID_HEX_LEN + self.separator.len() + tool.len()
    }
}

/// Gemini CLI 0.61.0: `mcp_<wire name>_<tool>`, cut over 63 characters (`clients::gemini`).
pub const GEMINI_TOOL_NAMES: AliasedToolNames = AliasedToolNames {
    client: "gemini",
    prefix: "mcp_",
    separator: "_",
    max_len: 63,
};

/// Qwen Code 0.24.4: `mcp__<wire name>__<tool>`, cut and suffixed `_<hash>` over 63
/// characters (`clients::qwen`).
pub const QWEN_TOOL_NAMES: AliasedToolNames = AliasedToolNames {
    client: "qwen",
    prefix: "mcp__",
    separator: "__",
    max_len: 63,
};

/// Every client that aliases server names, with how it qualifies tool names. A client that
/// aliases joins with one row here.
pub const ALIASING_CLIENTS: &[AliasedToolNames] = &[GEMINI_TOOL_NAMES, QWEN_TOOL_NAMES];

/// Canonical id of the reserved result channel, injected by the launcher into every reviewer
/// and never allowlistable (registry rule `result-channel-allowlistable`).
pub const RESULT_CHANNEL_ID: &str = "kcap-flow-result";

/// Longest canonical id the registry accepts, in bytes (registry rule `id-canonical`).
pub const MAX_ID_LEN: usize = 64;
