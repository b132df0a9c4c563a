//! Qwen Code's registration file: `mcpServers` in `~/.qwen/settings.json`
//! (`kcap-mcp-registry export qwen`, `install --client qwen`).

use crate::clients::Client;
use crate::clients::gemini_family::{self, registration::Facts};
use crate::clients::registration::{
    Node, ProjectFile, RegistrationFormat, RegistrationOptions, home_path, set_var,
};
use crate::schema::RegistryEntry;

/// Qwen Code's registration format (Qwen Code 0.24.4, measured with `qwen mcp add` and
/// `qwen mcp list`, `docs/isolation/qwen.md`):
///
/// - file: `~/.qwen/settings.json` (`$QWEN_HOME/settings.json`), read with comments
///   stripped and a byte order mark skipped; trailing commas are an error;
/// - block: `mcpServers`, Gemini CLI's shape (`command`, `args`, `env`, `cwd`, `url`,
///   `httpUrl`, `headers`, `timeout`, `trust`, `includeTools`, `excludeTools`) plus Qwen's
///   own keys (`description`, `discoveryTimeoutMs`, `alwaysLoadTools`, …); user and project
///   `mcpServers` merge by name (project wins), system settings win over both;
/// - entry: `command`, `args`, `env` when set, and `trust: true` on read-only servers; the
///   flow-starting server's args end with `--driver qwen`;
/// - no per-server `disabled` key: a server is switched off by `mcp.excluded` or by leaving
///   it out of `mcp.allowed`;
/// - Qwen expands `$VAR` and `${VAR}` in every string of the file at load
///   ([`super::loader`]), so any `$` in `command`, `args` and `env` is refused.
pub const FORMAT: RegistrationFormat = gemini_family::registration::format(Facts {
    client: Client::Qwen,
    entry,
    // `QWEN_HOME` is the `.qwen` directory itself (`Storage.getGlobalQwenDir`).
    default_config: |var| match set_var(var, "QWEN_HOME") {
        Some(dir) => Ok(std::path::PathBuf::from(dir).join("settings.json")),
        None => home_path(var, &[".qwen", "settings.json"]),
    },
    default_config_var: Some("QWEN_HOME"),
    project_files: &PROJECT_FILES,
    file_names: &[(".qwen", "settings.json")],
    load: |f| vec![(None, super::loader::load(f.shown, f.bytes, f.env))],
    export: |e, o| crate::clients::registration::registration_file(&FORMAT, e, o),
});

/// The project files Qwen Code 0.24.4 reads servers from: the workspace's
/// `.qwen/settings.json` (read as the user's settings file is) and `.mcp.json` (Claude
/// Code's shape, started over ACP without approval; read here with Claude Code's model).
/// The reviewer's launch plan removes both.
pub const PROJECT_FILES: [ProjectFile; 2] = [
    ProjectFile {
        path: ".qwen/settings.json",
        load: |path, bytes, _, env| super::loader::load(path, bytes, env),
    },
    ProjectFile {
        path: ".mcp.json",
        load: |path, bytes, dir, env| {
            crate::clients::claude::loader::load(
                path,
                bytes,
                crate::clients::claude::loader::ClaudeFile::ProjectMcpJson,
                Some(dir),
                env,
            )
        },
    },
];

fn entry(e: &RegistryEntry, opts: &RegistrationOptions) -> Node {
    crate::clients::gemini_family::registration::trusted_stdio_entry(e, opts, Client::Qwen)
}
