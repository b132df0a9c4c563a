//! The rule catalog ([`Rule`]), the documented keys ([`EntryKey`], [`ToolKey`]) with their
//! types, and the patterns values must match.

use std::fmt;

use crate::model::MAX_ID_LEN;

/// A registry rule. Each has a stable kebab-case [`Rule::name`] used in diagnostics
/// (`error[id-canonical]: …`), in `check --format json`, and in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// The file is valid UTF-8 (a leading UTF-8 BOM is accepted).
    TomlUtf8,
    /// The file is valid TOML.
    TomlSyntax,
    /// Only the documented keys appear.
    UnknownKey,
    /// Every key has its documented type.
    WrongType,
    /// Every required key is present (a required boolean such as `starts_flows` must be
    /// explicit).
    MissingKey,
    /// `id` is `^[a-z][a-z0-9-]*[a-z0-9]$`, ASCII, at most 64 bytes.
    IdCanonical,
    /// `id` equals the file stem exactly.
    IdFileStem,
    /// Ids are unique across the directory, ignoring ASCII case.
    IdUnique,
    /// `alias` matches the id pattern and is shorter than the id.
    AliasFormat,
    /// An `alias` equals no other entry's id or alias, ignoring ASCII case, so no two
    /// servers of one launch share a wire name.
    AliasUnique,
    /// `description` is one line of 1 to 300 characters without control or invisible
    /// characters ([`is_forbidden_char`](super::is_forbidden_char)).
    DescriptionFormat,
    /// `args` is non-empty; no element is empty, holds a control or invisible character
    /// ([`is_forbidden_char`](super::is_forbidden_char)), or holds `${`.
    ArgsFormat,
    /// Env names match `^[A-Z][A-Z0-9_]*$`.
    EnvName,
    /// Env sources are `"server_url"`, `"agent_id"`, `"result_capability_url"`,
    /// `"review_context_url"` or a constant `{ value = "…" }`.
    EnvSource,
    /// A constant env value (`{ value = "…" }`) is non-empty, holds no control or invisible
    /// character ([`is_forbidden_char`](super::is_forbidden_char)) and no `${` (Claude Code
    /// would expand it).
    EnvConstant,
    /// Tool names match `^[A-Za-z0-9_-]+$`. No `.`: OpenAI function names, which Codex sends
    /// MCP tools as, allow `^[a-zA-Z0-9_-]{1,64}$` only.
    ToolName,
    /// Tool names are unique within an entry.
    ToolUnique,
    /// `mcp__<id>__<tool>` is at most [`MAX_QUALIFIED_TOOL_NAME_LEN`] (64) bytes for every
    /// tool. Claude Code (2.1.197) names an MCP tool `mcp__<server>__<tool>` to the model, and
    /// the model APIs behind the clients cap a tool name at 64 characters: the Anthropic
    /// Messages API's `tools[].name` and the OpenAI function `name` (`^[a-zA-Z0-9_-]{1,64}$`,
    /// the OpenAI API reference). And for every client that aliases server names
    /// ([`ALIASING_CLIENTS`](crate::model::ALIASING_CLIENTS)), the longest qualified name it
    /// builds with any launch id is within its limit: on Gemini CLI 0.61.0
    /// `mcp_<stem>-<16 hex>_<tool>` at most 63 bytes, the stem being the `alias` or the id.
    ToolNameLength,
    /// `inject` is `"always"` or `"borrowed-snapshot"`.
    InjectValue,
    /// `kcap-flow-result.toml` exists.
    ResultChannelMissing,
    /// `kcap-flow-result` has `allowlistable = false`.
    ResultChannelAllowlistable,
    /// `kcap-flow-result` has `starts_flows = false`.
    ResultChannelStartsFlows,
    /// `inject` is set on exactly the `allowlistable = false` entries.
    InjectScope,
    /// `inject = "always"` is the result channel's alone, and the result channel has it: so
    /// exactly one entry is injected into every reviewer.
    InjectAlways,
    /// An injection-only entry other than the result channel has `starts_flows = false`.
    InjectionOnlyStartsFlows,
    /// The `agent_id` env source appears only on entries with `allowlistable = false`.
    AgentIdInjectionOnly,
    /// `"result_capability_url"` appears only on the `inject = "always"` entry, and
    /// `"review_context_url"` only on `inject = "borrowed-snapshot"` entries.
    EnvSourceScope,
    /// An entry with a `"result_capability_url"` variable also has a `"server_url"` one: the
    /// launch sets exactly one of them, by result delivery mode.
    CapabilityUrlServerUrl,
    /// An `inject = "borrowed-snapshot"` entry has no `"server_url"` variable: the reviewer
    /// of a borrowed snapshot must not reach the kcap server directly through it.
    BorrowedSnapshotServerUrl,
    /// `registered = true` only on allowlistable entries.
    RegisteredScope,
    /// `driver_stamp = true` only on `starts_flows = true` entries.
    DriverStampScope,
    /// `starts_flows = true` requires `read_only = false`.
    StartsFlowsReadOnly,
    /// `starts_flows = true` forbids `unattended_safe = true` tools.
    StartsFlowsUnattendedSafe,
    /// `unattended_safe = true` tools appear only on `read_only` or non-allowlistable entries.
    UnattendedSafeScope,
    /// The directory holds at least one `.toml` file.
    RegistryEmpty,
    /// The directory holds nothing but `*.toml` files, `README*` files and dotfiles, and no
    /// subdirectory holds `.toml` files (they would be ignored).
    StrayFile,
}

impl Rule {
    /// Every rule, in the order the rules table of docs/registry-format.md lists them.
    pub const ALL: [Rule; 36] = [
        Rule::TomlUtf8,
        Rule::TomlSyntax,
        Rule::UnknownKey,
        Rule::WrongType,
        Rule::MissingKey,
        Rule::IdCanonical,
        Rule::IdFileStem,
        Rule::IdUnique,
        Rule::AliasFormat,
        Rule::AliasUnique,
        Rule::DescriptionFormat,
        Rule::ArgsFormat,
        Rule::EnvName,
        Rule::EnvSource,
        Rule::EnvConstant,
        Rule::ToolName,
        Rule::ToolUnique,
        Rule::ToolNameLength,
        Rule::InjectValue,
        Rule::ResultChannelMissing,
        Rule::ResultChannelAllowlistable,
        Rule::ResultChannelStartsFlows,
        Rule::InjectScope,
        Rule::InjectAlways,
        Rule::InjectionOnlyStartsFlows,
        Rule::AgentIdInjectionOnly,
        Rule::EnvSourceScope,
        Rule::CapabilityUrlServerUrl,
        Rule::BorrowedSnapshotServerUrl,
        Rule::RegisteredScope,
        Rule::DriverStampScope,
        Rule::StartsFlowsReadOnly,
        Rule::StartsFlowsUnattendedSafe,
        Rule::UnattendedSafeScope,
        Rule::RegistryEmpty,
        Rule::StrayFile,
    ];

    /// The stable kebab-case name, e.g. `"id-canonical"`.
    pub const fn name(self) -> &'static str {
        match self {
            Rule::TomlUtf8 => "toml-utf8",
            Rule::TomlSyntax => "toml-syntax",
            Rule::UnknownKey => "unknown-key",
            Rule::WrongType => "wrong-type",
            Rule::MissingKey => "missing-key",
            Rule::IdCanonical => "id-canonical",
            Rule::IdFileStem => "id-file-stem",
            Rule::IdUnique => "id-unique",
            Rule::AliasFormat => "alias-format",
            Rule::AliasUnique => "alias-unique",
            Rule::DescriptionFormat => "description-format",
            Rule::ArgsFormat => "args-format",
            Rule::EnvName => "env-name",
            Rule::EnvSource => "env-source",
            Rule::EnvConstant => "env-constant",
            Rule::ToolName => "tool-name",
            Rule::ToolUnique => "tool-unique",
            Rule::ToolNameLength => "tool-name-length",
            Rule::InjectValue => "inject-value",
            Rule::ResultChannelMissing => "result-channel-missing",
            Rule::ResultChannelAllowlistable => "result-channel-allowlistable",
            Rule::ResultChannelStartsFlows => "result-channel-starts-flows",
            Rule::InjectScope => "inject-scope",
            Rule::InjectAlways => "inject-always",
            Rule::InjectionOnlyStartsFlows => "injection-only-starts-flows",
            Rule::AgentIdInjectionOnly => "agent-id-injection-only",
            Rule::EnvSourceScope => "env-source-scope",
            Rule::CapabilityUrlServerUrl => "capability-url-server-url",
            Rule::BorrowedSnapshotServerUrl => "borrowed-snapshot-server-url",
            Rule::RegisteredScope => "registered-scope",
            Rule::DriverStampScope => "driver-stamp-scope",
            Rule::StartsFlowsReadOnly => "starts-flows-read-only",
            Rule::StartsFlowsUnattendedSafe => "starts-flows-unattended-safe",
            Rule::UnattendedSafeScope => "unattended-safe-scope",
            Rule::RegistryEmpty => "registry-empty",
            Rule::StrayFile => "stray-file",
        }
    }

    /// The rule from its [`Rule::name`]; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The TOML type a registry key must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A TOML string.
    String,
    /// A TOML boolean.
    Bool,
    /// An array of TOML strings.
    StringArray,
    /// A table whose values are env sources (`NAME = "server_url"` or
    /// `NAME = { value = "1" }`).
    EnvTable,
    /// An array of tables (`[[tools]]`).
    ToolArray,
}

impl ValueKind {
    /// How a message names the type, e.g. "a boolean".
    pub const fn describe(self) -> &'static str {
        match self {
            ValueKind::String => "a string",
            ValueKind::Bool => "a boolean",
            ValueKind::StringArray => "an array of strings",
            ValueKind::EnvTable => "a table of NAME = source (a source name, or { value = \"…\" })",
            ValueKind::ToolArray => "an array of [[tools]] tables",
        }
    }
}

/// A set of documented keys: those of a registry file ([`EntryKey`]) or of one `[[tools]]`
/// table ([`ToolKey`]). Every property is an exhaustive `match`, so a new key does not
/// compile until it has each.
pub trait Key: Copy + Eq + 'static {
    /// Every key, in documentation order.
    const ALL: &'static [Self];
    /// The key as written in TOML.
    fn name(self) -> &'static str;
    /// The type its value must have.
    fn kind(self) -> ValueKind;
    /// Whether the key must be present.
    fn required(self) -> bool;
    /// What the key means, one sentence (used in the JSON Schema export).
    fn meaning(self) -> &'static str;

    /// The key spelled `name` exactly; `None` for an unknown key.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

/// A key of a registry file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKey {
    /// `id`: the canonical id.
    Id,
    /// `description`: one line.
    Description,
    /// `args`: argv after the kcap binary.
    Args,
    /// `starts_flows`: the server can start flows.
    StartsFlows,
    /// `allowlistable`: `false` for injection-only servers.
    Allowlistable,
    /// `inject`: when the launcher injects an injection-only server.
    Inject,
    /// `registered`: registration exports register it.
    Registered,
    /// `read_only`: every tool is side-effect free.
    ReadOnly,
    /// `needs_project_cwd`: registration configs run it in the project directory.
    NeedsProjectCwd,
    /// `driver_stamp`: registrations append `--driver <client>` for clients that need it.
    DriverStamp,
    /// `alias`: a shorter stem for per-launch wire names on clients that alias server names.
    Alias,
    /// `env`: env vars the launcher sets.
    Env,
    /// `tools`: the `[[tools]]` catalog.
    Tools,
}

impl Key for EntryKey {
    const ALL: &'static [EntryKey] = &[
        EntryKey::Id,
        EntryKey::Description,
        EntryKey::Args,
        EntryKey::StartsFlows,
        EntryKey::Allowlistable,
        EntryKey::Inject,
        EntryKey::Registered,
        EntryKey::ReadOnly,
        EntryKey::NeedsProjectCwd,
        EntryKey::DriverStamp,
        EntryKey::Alias,
        EntryKey::Env,
        EntryKey::Tools,
    ];

    fn name(self) -> &'static str {
        match self {
            EntryKey::Id => "id",
            EntryKey::Description => "description",
            EntryKey::Args => "args",
            EntryKey::StartsFlows => "starts_flows",
            EntryKey::Allowlistable => "allowlistable",
            EntryKey::Inject => "inject",
            EntryKey::Registered => "registered",
            EntryKey::ReadOnly => "read_only",
            EntryKey::NeedsProjectCwd => "needs_project_cwd",
            EntryKey::DriverStamp => "driver_stamp",
            EntryKey::Alias => "alias",
            EntryKey::Env => "env",
            EntryKey::Tools => "tools",
        }
    }

    fn kind(self) -> ValueKind {
        match self {
            EntryKey::Id | EntryKey::Description | EntryKey::Inject | EntryKey::Alias => {
                ValueKind::String
            }
            EntryKey::Args => ValueKind::StringArray,
            EntryKey::StartsFlows
            | EntryKey::Allowlistable
            | EntryKey::Registered
            | EntryKey::ReadOnly
            | EntryKey::NeedsProjectCwd
            | EntryKey::DriverStamp => ValueKind::Bool,
            EntryKey::Env => ValueKind::EnvTable,
            EntryKey::Tools => ValueKind::ToolArray,
        }
    }

    fn required(self) -> bool {
        match self {
            EntryKey::Id | EntryKey::Description | EntryKey::Args | EntryKey::StartsFlows => true,
            // `inject` is required on injection-only entries only: rule `inject-scope`.
            EntryKey::Allowlistable
            | EntryKey::Inject
            | EntryKey::Registered
            | EntryKey::ReadOnly
            | EntryKey::NeedsProjectCwd
            | EntryKey::DriverStamp
            | EntryKey::Alias
            | EntryKey::Env
            | EntryKey::Tools => false,
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            EntryKey::Id => "Canonical id; equals the file stem.",
            EntryKey::Description => "One line of 1 to 300 characters.",
            EntryKey::Args => "Argv after the kcap binary.",
            EntryKey::StartsFlows => {
                "The server can start flows; the recursion guard strips it from every allowlist."
            }
            EntryKey::Allowlistable => {
                "Default true. false = injection-only, never materialized from an allowlist."
            }
            EntryKey::Inject => {
                "Required on and only on allowlistable = false entries: \"always\" (the result \
                 channel, injected into every reviewer) or \"borrowed-snapshot\" (injected into \
                 borrowed-snapshot reviews only)."
            }
            EntryKey::Registered => {
                "Default true for allowlistable entries, and must be false on injection-only \
                 ones. Registration exports register the server with clients."
            }
            EntryKey::ReadOnly => "Default false. Every tool is side-effect free.",
            EntryKey::NeedsProjectCwd => {
                "Default false. Registration configs run the server in the project directory."
            }
            EntryKey::DriverStamp => {
                "Default false; only where starts_flows = true. Registrations for clients that \
                 need it append --driver <client> to the args."
            }
            EntryKey::Alias => {
                "Optional. A shorter stem for the server's per-launch wire name \
                 (<stem>-<16 hex>) on clients that alias server names (Gemini CLI, Qwen Code), so \
                 every qualified tool name fits their limit; id pattern, shorter than the id, unique \
                 among the registry's ids and aliases. Default: the id."
            }
            EntryKey::Env => {
                "Env vars the launcher sets: NAME = \"server_url\" | \"agent_id\" | \
                 \"result_capability_url\" | \"review_context_url\" | { value = \"…\" }."
            }
            EntryKey::Tools => "Catalog of the tools the server serves, in advertised order.",
        }
    }
}

/// A key of one `[[tools]]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolKey {
    /// `name`: the tool name.
    Name,
    /// `unattended_safe`: safe for an unattended reviewer to call without approval.
    UnattendedSafe,
}

impl Key for ToolKey {
    const ALL: &'static [ToolKey] = &[ToolKey::Name, ToolKey::UnattendedSafe];

    fn name(self) -> &'static str {
        match self {
            ToolKey::Name => "name",
            ToolKey::UnattendedSafe => "unattended_safe",
        }
    }

    fn kind(self) -> ValueKind {
        match self {
            ToolKey::Name => ValueKind::String,
            ToolKey::UnattendedSafe => ValueKind::Bool,
        }
    }

    fn required(self) -> bool {
        match self {
            ToolKey::Name => true,
            ToolKey::UnattendedSafe => false,
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            ToolKey::Name => "Tool name.",
            ToolKey::UnattendedSafe => {
                "Default false. Safe for an unattended reviewer to call without approval."
            }
        }
    }
}

/// Pattern of a canonical id (rule `id-canonical`), as a regular expression.
pub const ID_PATTERN: &str = "^[a-z][a-z0-9-]*[a-z0-9]$";
/// Pattern of an env name (rule `env-name`).
pub const ENV_NAME_PATTERN: &str = "^[A-Z][A-Z0-9_]*$";
/// Pattern of a tool name (rule `tool-name`).
pub const TOOL_NAME_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// Longest `mcp__<id>__<tool>`, in bytes (rule `tool-name-length`).
pub const MAX_QUALIFIED_TOOL_NAME_LEN: usize = 64;

/// `mcp__<id>__<tool>`: how Claude Code names an MCP tool to the model (2.1.197), and the
/// name rule `tool-name-length` bounds.
pub fn qualified_tool_name(id: &str, tool: &str) -> String {
    format!("mcp__{id}__{tool}")
}
/// Longest description, in characters (rule `description-format`).
pub const MAX_DESCRIPTION_CHARS: usize = 300;

/// Whether `id` is canonical: `^[a-z][a-z0-9-]*[a-z0-9]$` and at most 64 bytes.
pub fn is_canonical_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() >= 2
        && b.len() <= MAX_ID_LEN
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// Whether `name` matches `^[A-Z][A-Z0-9_]*$`.
pub fn is_env_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_uppercase()
        && b.iter()
            .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

/// Whether `name` matches `^[A-Za-z0-9_-]+$`.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
}
