//! Antigravity's registration file: `mcpServers` in `~/.gemini/config/mcp_config.json`
//! (`kcap-mcp-registry export antigravity`, `install --client antigravity`).

use crate::clients::Client;
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, Syntax, home_path, stdio_pairs,
};
use crate::schema::RegistryEntry;

/// Antigravity's registration format (facts "Registration", \[K\] only, measured there on
/// 1.1.10/1.1.13; `agy` is not installable here):
///
/// - file: `~/.gemini/config/mcp_config.json`, strict JSON; a 0-byte file counts as `{}`;
/// - block: `mcpServers`;
/// - entry: `command`, `args`, `env` when set; permissions live in another file
///   (`.gemini/antigravity-cli/settings.json`), so no trust knob here; the flow-starting
///   server's args end with `--driver antigravity`;
/// - whether Antigravity expands `${…}` is not established: `${` is refused, as for every
///   client that might.
pub const FORMAT: RegistrationFormat = RegistrationFormat {
    client: Client::Antigravity,
    syntax: Syntax::Json {
        comments: false,
        trailing_commas: false,
    },
    block: "mcpServers",
    entry,
    expanded_fields: &["command", "args", "env"],
    expands: &["${"],
    empty_file_is_empty: true,
    default_config: |var| home_path(var, &[".gemini", "config", "mcp_config.json"]),
    default_config_var: None,
    project_files: &PROJECT_FILES,
    entry_keys: None,
    disabled_setting: None,
    file_names: &[("", "mcp_config.json")],
    claims_extension: None,
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes))],
    project_blocks: None,
    takes_project: false,
    profile_file: None,
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
    writes_project_dir: false,
};

/// The project file Antigravity is reported to read servers from (facts "Reported upstream",
/// not measured): `.agents/mcp_config.json`, read as the user's `mcp_config.json`
/// ([`super::loader`]).
pub const PROJECT_FILES: [ProjectFile; 1] = [ProjectFile {
    path: ".agents/mcp_config.json",
    load: |path, bytes, _, _| super::loader::load(path, bytes),
}];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    Node::Object(stdio_pairs(e, opts, Client::Antigravity))
}
