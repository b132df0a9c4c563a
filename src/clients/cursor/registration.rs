//! Cursor's registration file: `mcpServers` in `~/.cursor/mcp.json`
//! (`kcap-mcp-registry export cursor`, `install --client cursor`).

use crate::clients::Client;
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, Syntax, home_path, stdio_pairs,
};
use crate::schema::RegistryEntry;

/// Cursor's registration format (facts "Registration", \[K\] only: Cursor is not installable
/// here, so nothing below is measured by this crate):
///
/// - file: `~/.cursor/mcp.json`, read as strict JSON (the lenient reading is not
///   established, so `install` refuses comments rather than guess);
/// - block: `mcpServers`;
/// - entry: `command`, `args`, `env` when set; no trust knob in the file; the flow-starting
///   server's args end with `--driver cursor`;
/// - Cursor documents `${env:NAME}`, `${userHome}` and `${workspaceFolder}` interpolation in
///   these values, so `${` is refused.
pub const FORMAT: RegistrationFormat = RegistrationFormat {
    client: Client::Cursor,
    syntax: Syntax::Json {
        comments: false,
        trailing_commas: false,
    },
    block: "mcpServers",
    entry,
    expanded_fields: &["command", "args", "env"],
    expands: &["${"],
    empty_file_is_empty: false,
    default_config: |var| home_path(var, &[".cursor", "mcp.json"]),
    default_config_var: None,
    project_files: &PROJECT_FILES,
    entry_keys: None,
    disabled_setting: None,
    file_names: &[(".cursor", "mcp.json")],
    claims_extension: None,
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes))],
    project_blocks: None,
    takes_project: false,
    profile_file: None,
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
    writes_project_dir: false,
};

/// The project file Cursor reads servers from (\[K\] only, not measured): the project's
/// `.cursor/mcp.json`, read as `~/.cursor/mcp.json` ([`super::loader`]).
pub const PROJECT_FILES: [ProjectFile; 1] = [ProjectFile {
    path: ".cursor/mcp.json",
    load: |path, bytes, _, _| super::loader::load(path, bytes),
}];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    Node::Object(stdio_pairs(e, opts, Client::Cursor))
}
