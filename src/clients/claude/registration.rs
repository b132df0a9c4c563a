//! The file a person registers kcap's MCP servers with Claude Code in: a project
//! `.mcp.json`, generated from the registry (`kcap-mcp-registry export claude`), and the
//! same entries `install --client claude` merges into `~/.claude.json` (user scope).
//! [`super::loader`] models how Claude Code 2.1.197 reads them back.

use crate::export::{
    Node, ProjectFile, RegistrationError, RegistrationFormat, RegistrationOptions, Syntax,
    home_path, registration_file, set_var, stdio_pairs,
};
use crate::schema::RegistryEntry;

use crate::clients::Client;

/// Claude Code's registration format (Claude Code 2.1.197, facts "Registration"):
///
/// - file: a project `.mcp.json`, or `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`
///   when that variable is set: with it, `$HOME/.claude.json` is not read at all, measured
///   in [`super::preflight`]), strict JSON;
/// - block: `mcpServers` (in `~/.claude.json` the user scope; a project's
///   `projects.<abs path>.mcpServers` local scope wins for that project);
/// - entry: `command`, `args`, `env` when set, and `description` (ignored by Claude Code, kept
///   for the reader). No trust knob; no `--driver` stamp.
/// - Claude Code expands `${NAME}` and `${NAME:-default}` in `command`, `args` and `env`
///   with no escape: such values are refused.
pub const FORMAT: RegistrationFormat = RegistrationFormat {
    client: Client::Claude,
    syntax: Syntax::Json {
        comments: false,
        trailing_commas: false,
    },
    block: "mcpServers",
    entry,
    expanded_fields: &["command", "args", "env"],
    expands: &["${"],
    empty_file_is_empty: false,
    default_config: |var| match set_var(var, "CLAUDE_CONFIG_DIR") {
        Some(dir) => Ok(std::path::PathBuf::from(dir).join(".claude.json")),
        None => home_path(var, &[".claude.json"]),
    },
    project_files: &PROJECT_FILES,
    entry_keys: Some(&super::loader::ENTRY_KEYS),
    disabled_setting: None,
};

/// The project file Claude Code 2.1.197 reads servers from (facts "Registration"; measured in
/// [`super::loader`]): the project scope, `.mcp.json` in the directory it starts in.
pub const PROJECT_FILES: [ProjectFile; 1] = [ProjectFile {
    path: ".mcp.json",
    load: |path, bytes, dir, env| {
        super::loader::load(
            path,
            bytes,
            super::loader::ClaudeFile::ProjectMcpJson,
            Some(dir),
            env,
        )
    },
}];

/// The entry of one server: `{"command", "args", "env"?, "description"}`.
fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    let mut pairs = stdio_pairs(e, opts, Client::Claude);
    pairs.push(("description".into(), Node::string(&e.description)));
    Node::Object(pairs)
}

/// A project `.mcp.json` for Claude Code, registering every one of
/// [`registrations`](crate::export::registrations) (see [`crate::export`]):
///
/// ```json
/// {
///   "mcpServers": {
///     "kcap-review": {
///       "command": "kcap",
///       "args": ["mcp", "review"],
///       "description": "Read-only view of the pull request under review: …"
///     }
///   }
/// }
/// ```
///
/// (pretty-printed with two-space indent, one array element per line). `env` follows `args`
/// when [`RegistrationOptions::server_url`] is set. Claude Code ignores `description` (and
/// `cwd`) in `.mcp.json` and starts project servers in the project directory, so
/// `needs_project_cwd` holds without a key. [`RegistrationOptions::project_dir`] is not used.
///
/// Format: [`FORMAT`], as [`super::loader`] reads it.
///
/// # Errors
/// [`RegistrationError::Expansion`] when the command, an arg or an env value holds `${`:
/// Claude Code would expand it (`/opt/${X_DIR:-bin}/kcap` runs `/opt/bin/kcap`) and offers
/// no escape.
pub fn claude_mcp_json(
    entries: &[RegistryEntry],
    opts: &RegistrationOptions,
) -> Result<String, RegistrationError> {
    registration_file(&FORMAT, entries, opts)
}
