//! Kiro's registration file: `mcpServers` in `$KIRO_HOME/settings/mcp.json`
//! (`kcap-mcp-registry export kiro`, `install --client kiro`).

use crate::clients::Client;
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, Syntax, home_path, set_var,
    stdio_pairs,
};
use crate::schema::RegistryEntry;

/// Kiro's registration format (facts "Registration", \[K\] only, measured there on
/// 2.15.2/2.16.0; Kiro is not installable here):
///
/// - file: `$KIRO_HOME/settings/mcp.json` (`~/.kiro/settings/mcp.json` when unset or
///   empty), read as strict JSON here;
/// - block: `mcpServers`;
/// - entry: `command`, `args`, `env` when set; the flow-starting server's args end with
///   `--driver kiro`;
/// - whether Kiro expands `${…}` is not established: `${` is refused, as for every client
///   that might.
pub const FORMAT: RegistrationFormat = RegistrationFormat {
    client: Client::Kiro,
    syntax: Syntax::Json {
        comments: false,
        trailing_commas: false,
    },
    block: "mcpServers",
    entry,
    expanded_fields: &["command", "args", "env"],
    expands: &["${"],
    empty_file_is_empty: false,
    default_config: |var| match set_var(var, "KIRO_HOME") {
        Some(dir) => Ok(std::path::PathBuf::from(dir)
            .join("settings")
            .join("mcp.json")),
        None => home_path(var, &[".kiro", "settings", "mcp.json"]),
    },
    default_config_var: Some("KIRO_HOME"),
    project_files: &PROJECT_FILES,
    entry_keys: None,
    disabled_setting: None,
    file_names: &[("settings", "mcp.json")],
    claims_extension: None,
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes))],
    project_blocks: None,
    takes_project: false,
    profile_file: None,
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
    writes_project_dir: false,
};

/// The project file Kiro reads servers from (\[K\], measured there on 2.15.2/2.16.0: it
/// starts at session setup): the workspace's `.kiro/settings/mcp.json`, read as the global
/// one ([`super::loader`]).
pub const PROJECT_FILES: [ProjectFile; 1] = [ProjectFile {
    path: ".kiro/settings/mcp.json",
    load: |path, bytes, _, _| super::loader::load(path, bytes),
}];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    Node::Object(stdio_pairs(e, opts, Client::Kiro))
}
