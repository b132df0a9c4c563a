//! The file a person registers kcap's MCP servers with Claude Code in: a project
//! `.mcp.json`, generated from the registry (`kcap-mcp-registry export claude`), and the
//! same entries `install --client claude` merges into `~/.claude.json` (user scope).
//! [`super::loader`] models how Claude Code 2.1.197 reads them back.

use crate::clients::registration::{
    Node, ProjectFile, RegistrationError, RegistrationFormat, RegistrationOptions, Syntax,
    home_path, registration_file, set_var, stdio_pairs,
};
use std::path::Path;

use super::loader::{self, ClaudeFile};
use crate::clients::Client;
use crate::clients::registration::{FileToLoad, Verdict};
use crate::schema::RegistryEntry;

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
    default_config_var: Some("CLAUDE_CONFIG_DIR"),
    project_files: &PROJECT_FILES,
    entry_keys: Some(&super::loader::ENTRY_KEYS),
    disabled_setting: None,
    file_names: &[],
    claims_extension: Some("json"),
    load: load_file,
    project_blocks: Some("projects"),
    takes_project: true,
    profile_file: None,
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
    writes_project_dir: false,
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
/// [`registrations`](crate::clients::registration::registrations) (see [`crate::clients::registration`]):
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

/// The verdicts on a Claude Code file (`check --against`): a project `.mcp.json` once; a
/// `~/.claude.json` for its user scope alone first (a project that overrides a broken
/// user-scope entry must not hide it: every other project runs it), then for each project
/// (or only `--project`). Each verdict comes with the project it is labelled with.
fn load_file(f: &FileToLoad<'_>) -> Vec<Verdict> {
    let (shown, bytes, env) = (f.shown, f.bytes, f.env);
    let text = String::from_utf8_lossy(bytes);
    let is_user = Path::new(shown)
        .file_name()
        .is_some_and(|n| n == ".claude.json")
        || ClaudeFile::detect(&text) == ClaudeFile::UserConfig;
    let file = if is_user {
        ClaudeFile::UserConfig
    } else {
        ClaudeFile::ProjectMcpJson
    };
    let projects = match (f.project, file) {
        (Some(p), _) => vec![Some(p.to_string())],
        (None, ClaudeFile::UserConfig) => std::iter::once(None)
            .chain(loader::local_scope_projects(bytes).into_iter().map(Some))
            .collect(),
        (None, ClaudeFile::ProjectMcpJson) => vec![None],
    };
    let dirs: Vec<Option<&str>> = projects.iter().map(Option::as_deref).collect();
    let verdicts = loader::load_many(shown, bytes, file, &dirs, env);
    let several = dirs.len() > 1;
    projects
        .into_iter()
        .zip(verdicts)
        .filter(|(project, loaded)| {
            // A user scope that registers nothing at all beside the local scopes is not
            // checked alone: kcap is then registered per project.
            let nothing = loaded.started.is_empty()
                && loaded.remote.is_empty()
                && loaded.skipped.is_empty()
                && loaded.rejected.is_empty();
            !(several && project.is_none() && nothing)
        })
        .map(|(project, loaded)| (project.filter(|_| file == ClaudeFile::UserConfig), loaded))
        .collect()
}
