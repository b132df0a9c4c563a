//! Copilot CLI's registration file: `mcpServers` in `$COPILOT_HOME/mcp-config.json`
//! (`kcap-mcp-registry export copilot`, `install --client copilot`).

use crate::clients::Client;
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, Syntax, home_path, set_var,
    stdio_pairs,
};
use crate::schema::RegistryEntry;

/// Copilot CLI's registration format (Copilot CLI 1.0.102; facts "Registration" and the
/// reviewer launch section):
///
/// - file: `$COPILOT_HOME/mcp-config.json` (`COPILOT_HOME` is the `.copilot` directory
///   itself; `~/.copilot/mcp-config.json` when unset or empty), strict JSON;
/// - block: `mcpServers`; an invalid entry vanishes silently from `copilot mcp list`;
/// - entry: `type: "stdio"` first, then `command`, `args`, `env` when set; no trust knob in
///   the file (tools are allowed per launch); the flow-starting server's args end with
///   `--driver copilot`;
/// - Copilot expands `${VAR}` in `args` and `env` at spawn (an unset one stays literal), so
///   `${` there is refused.
pub const FORMAT: RegistrationFormat = RegistrationFormat {
    client: Client::Copilot,
    syntax: Syntax::Json {
        comments: false,
        trailing_commas: false,
    },
    block: "mcpServers",
    entry,
    expanded_fields: &["args", "env"],
    expands: &["${"],
    empty_file_is_empty: false,
    default_config: |var| match set_var(var, "COPILOT_HOME") {
        Some(dir) => Ok(std::path::PathBuf::from(dir).join("mcp-config.json")),
        None => home_path(var, &[".copilot", "mcp-config.json"]),
    },
    default_config_var: Some("COPILOT_HOME"),
    project_files: &PROJECT_FILES,
    entry_keys: None,
    disabled_setting: Some("\"disabled\": true"),
    file_names: &[("", "mcp-config.json")],
    claims_extension: None,
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes, f.env))],
    project_blocks: None,
    takes_project: false,
    profile_file: None,
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
    writes_project_dir: false,
};

/// The project files Copilot CLI 1.0.102 reads servers from in a trusted folder (facts
/// "Verified against public reports", `docs/isolation/copilot.md`): `.mcp.json`, else
/// `.github/mcp.json`; never `.vscode/mcp.json`, `.github/mcp-config.json`,
/// `.github/copilot/mcp.json` or `.copilot/mcp-config.json`. Read here with the model of
/// `mcp-config.json` ([`super::loader`]); the workspace files' own reading is not measured.
pub const PROJECT_FILES: [ProjectFile; 2] = [
    ProjectFile {
        path: ".mcp.json",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
    ProjectFile {
        path: ".github/mcp.json",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    let mut pairs = vec![("type".into(), Node::string("stdio"))];
    pairs.extend(stdio_pairs(e, opts, Client::Copilot));
    Node::Object(pairs)
}
