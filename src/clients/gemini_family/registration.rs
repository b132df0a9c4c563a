//! The registration format Gemini CLI and Qwen Code read alike, and its entry (their rooms'
//! `registration`).

use crate::clients::Client;
use crate::clients::registration::{
    DefaultConfig, FileLoader, Node, ProjectFile, RegistrationError, RegistrationFormat,
    RegistrationOptions, Syntax,
};
use crate::schema::RegistryEntry;

/// A registration entry both clients read alike: the stdio server (`command`, `args`, `env`
/// when set) and `trust: true` on a read-only server, whose tool calls are then not
/// confirmed.
pub fn trusted_stdio_entry(e: &RegistryEntry, opts: &RegistrationOptions, client: Client) -> Node {
    use crate::clients::registration::stdio_pairs;
    let mut pairs = stdio_pairs(e, opts, client);
    if e.read_only {
        pairs.push(("trust".into(), Node::Bool(true)));
    }
    Node::Object(pairs)
}

/// A Gemini-family room's own registration facts ([`format()`]).
pub struct Facts {
    /// The client.
    pub client: Client,
    /// The room's entry ([`trusted_stdio_entry`] for its client).
    pub entry: fn(&RegistryEntry, &RegistrationOptions) -> Node,
    /// Where the user's settings file is.
    pub default_config: DefaultConfig,
    /// The variable that moves it, if any.
    pub default_config_var: Option<&'static str>,
    /// The project files the client reads servers from.
    pub project_files: &'static [ProjectFile],
    /// (folder, file) names of its settings file.
    pub file_names: &'static [(&'static str, &'static str)],
    /// The room's loader model of its settings file.
    pub load: FileLoader,
    /// The room's export ([`registration_file`](crate::clients::registration::registration_file)
    /// of its format).
    pub export: fn(&[RegistryEntry], &RegistrationOptions) -> Result<String, RegistrationError>,
}

/// The registration format both clients read alike (Gemini CLI 0.61.0 and Qwen Code 0.24.4,
/// each measured in its room): `mcpServers` in a JSON settings file read with `//` and `/* */`
/// comments stripped and trailing commas an error; `$VAR` and `${VAR}` expanded in every
/// string at load, so any `$` in `command`, `args` and `env` is refused; no per-server
/// `disabled` key; an empty file is not an empty settings file. The rest is the room's
/// [`Facts`].
pub const fn format(facts: Facts) -> RegistrationFormat {
    RegistrationFormat {
        client: facts.client,
        syntax: Syntax::Json {
            comments: true,
            trailing_commas: false,
        },
        block: "mcpServers",
        entry: facts.entry,
        expanded_fields: &["command", "args", "env"],
        expands: &["$"],
        empty_file_is_empty: false,
        default_config: facts.default_config,
        default_config_var: facts.default_config_var,
        project_files: facts.project_files,
        entry_keys: None,
        disabled_setting: None,
        file_names: facts.file_names,
        claims_extension: None,
        load: facts.load,
        project_blocks: None,
        takes_project: false,
        profile_file: None,
        export: facts.export,
        writes_project_dir: false,
    }
}
