//! OpenCode's registration file: `mcp` in `$XDG_CONFIG_HOME/opencode/opencode.json`
//! (`kcap-mcp-registry export opencode`, `install --client opencode`).

use crate::clients::Client;
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, Syntax, env_node, home_path,
    registration_args, set_var,
};
use crate::schema::RegistryEntry;

/// OpenCode's registration format (OpenCode 1.18.33; facts "Registration" and "Verified
/// against public reports"):
///
/// - file: `$XDG_CONFIG_HOME/opencode/opencode.json` (`~/.config/opencode/opencode.json`
///   when unset or empty), JSONC (comments and trailing commas); a wrong type anywhere
///   refuses the whole file;
/// - block: `mcp`;
/// - entry: `type: "local"`, `command` as one argv array (the kcap binary, then the args),
///   `enabled: true`, and `environment` when set (an `env` key would be dropped silently);
///   no trust knob in the file (tools are allowed per launch); the flow-starting server's
///   args end with `--driver opencode`;
/// - OpenCode substitutes `{env:VAR}` (an unset one becomes `""`, no warning), so `{env:`
///   in `command` or `environment` is refused.
pub const FORMAT: RegistrationFormat = RegistrationFormat {
    client: Client::OpenCode,
    syntax: Syntax::Json {
        comments: true,
        trailing_commas: true,
    },
    block: "mcp",
    entry,
    expanded_fields: &["command", "environment"],
    expands: &["{env:"],
    empty_file_is_empty: false,
    default_config: |var| match set_var(var, "XDG_CONFIG_HOME") {
        Some(dir) => Ok(std::path::PathBuf::from(dir)
            .join("opencode")
            .join("opencode.json")),
        None => home_path(var, &[".config", "opencode", "opencode.json"]),
    },
    default_config_var: Some("XDG_CONFIG_HOME"),
    project_files: &PROJECT_FILES,
    entry_keys: None,
    disabled_setting: Some("\"enabled\": false"),
    file_names: &[("", "opencode.json"), ("", "opencode.jsonc")],
    claims_extension: None,
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes, f.env))],
    project_blocks: None,
    takes_project: false,
    profile_file: None,
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
    writes_project_dir: false,
};

/// The project files OpenCode 1.18.33 reads servers from (`docs/isolation/opencode.md`,
/// sources 3 and 5): `opencode.json(c)` in the session directory and in its `.opencode/`
/// config directory, read as the global config is ([`super::loader`]). OpenCode also reads
/// them in each parent up to the git top level, outside any worktree.
pub const PROJECT_FILES: [ProjectFile; 4] = [
    ProjectFile {
        path: "opencode.json",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
    ProjectFile {
        path: "opencode.jsonc",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
    ProjectFile {
        path: ".opencode/opencode.json",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
    ProjectFile {
        path: ".opencode/opencode.jsonc",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    let argv = std::iter::once(opts.command.clone()).chain(registration_args(e, Client::OpenCode));
    let mut pairs = vec![
        ("type".into(), Node::string("local")),
        ("command".into(), Node::strings(argv)),
        ("enabled".into(), Node::Bool(true)),
    ];
    if let Some(env) = env_node(e, opts) {
        pairs.push(("environment".into(), env));
    }
    Node::Object(pairs)
}
