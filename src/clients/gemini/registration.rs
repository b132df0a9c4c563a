//! Gemini CLI's registration file: `mcpServers` in `~/.gemini/settings.json`
//! (`kcap-mcp-registry export gemini`, `install --client gemini`).

use crate::clients::Client;
use crate::clients::gemini_family::{self, registration::Facts};
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, home_path,
};
use crate::schema::RegistryEntry;

/// Gemini CLI's registration format (Gemini CLI 0.61.0; facts "Registration" and "Verified
/// against public reports"):
///
/// - file: `~/.gemini/settings.json`, read with comments stripped (Gemini CLI's settings
///   loader strips `//` and `/* */` comments before `JSON.parse`; trailing commas are an
///   error);
/// - block: `mcpServers`; user and project `mcpServers` merge by name (project wins);
/// - entry: `command`, `args`, `env` when set, and the trust knob `trust: true` on read-only
///   servers (their tool calls are not confirmed); the flow-starting server's args end with
///   `--driver gemini`;
/// - Gemini expands `$VAR`, `${VAR}` and `${VAR:-d}` in `command`, `args` and `env`, so any
///   `$` there is refused. Measured on 0.61.0 with `gemini mcp list` and a recorder
///   (2026-11-30, [`super::loader`]): `"command": "$RECDIR/rec.sh"` and
///   `"command": "${RECDIR}/rec.sh"` both ran `/tmp/m/rec.sh` with `RECDIR=/tmp/m`; an unset
///   variable stays literal (`${UNSET}`, `$UNSET`), `${UNSET:-d}` becomes `d`.
pub const FORMAT: RegistrationFormat = gemini_family::registration::format(Facts {
    client: Client::Gemini,
    entry,
    default_config: |var| home_path(var, &[".gemini", "settings.json"]),
    default_config_var: None,
    project_files: &PROJECT_FILES,
    file_names: &[(".gemini", "settings.json")],
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes, f.env))],
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
});

/// The project file Gemini CLI 0.61.0 reads servers from (facts "Verified against public
/// reports": user and project `mcpServers` merge by name, the project's winning): the
/// workspace's `.gemini/settings.json`, read as the user's settings file is
/// ([`super::loader`]).
pub const PROJECT_FILES: [ProjectFile; 1] = [ProjectFile {
    path: ".gemini/settings.json",
    load: |path, bytes, _, env| super::loader::load(path, bytes, env),
}];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    crate::clients::gemini_family::registration::trusted_stdio_entry(e, opts, Client::Gemini)
}
