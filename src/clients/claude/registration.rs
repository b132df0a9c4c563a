//! The file a person registers kcap's MCP servers with Claude Code in: a project
//! `.mcp.json`, generated from the registry (`kcap-mcp-registry export claude-mcp-json`).
//! [`super::loader`] models how Claude Code 2.1.197 reads it back.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::Ordered;
use crate::clients::RenderError;
use crate::export::{RegistrationOptions, pretty, registrations};
use crate::schema::RegistryEntry;

/// A project `.mcp.json` for Claude Code, registering every one of [`registrations`] (see [`crate::export`]):
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
/// Format: Claude Code's project MCP configuration (`.mcp.json`, Claude Code 2.1.197), as
/// [`super::loader`] reads it.
///
/// # Errors
/// [`RenderError::ClaudeExpansion`], the reviewer renderer's error, when the command, an
/// arg or an env value holds `${`: Claude Code would expand it (`/opt/${X_DIR:-bin}/kcap`
/// runs `/opt/bin/kcap`) and offers no escape.
pub fn claude_mcp_json(
    entries: &[RegistryEntry],
    opts: &RegistrationOptions,
) -> Result<String, RenderError> {
    for entry in registrations(entries) {
        let refuse = |field: String| RenderError::ClaudeExpansion {
            server: entry.id.clone(),
            field,
        };
        if opts.command.contains("${") {
            return Err(refuse("command".into()));
        }
        if let Some(i) = entry.args.iter().position(|a| a.contains("${")) {
            return Err(refuse(format!("args[{i}]")));
        }
        if let Some((name, _)) = opts.env(entry).iter().find(|(_, v)| v.contains("${")) {
            return Err(refuse(format!("env.{name}")));
        }
    }
    struct Server<'a> {
        entry: &'a RegistryEntry,
        opts: &'a RegistrationOptions,
    }
    impl Serialize for Server<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let env = self.opts.env(self.entry);
            let mut map = s.serialize_map(None)?;
            map.serialize_entry("command", &self.opts.command)?;
            map.serialize_entry("args", &self.entry.args)?;
            if !env.is_empty() {
                map.serialize_entry("env", &Ordered(&env))?;
            }
            map.serialize_entry("description", &self.entry.description)?;
            map.end()
        }
    }
    struct Root<'a>(Vec<(&'a str, Server<'a>)>);
    impl Serialize for Root<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("mcpServers", &Ordered(&self.0))?;
            map.end()
        }
    }
    let servers = registrations(entries)
        .map(|entry| (entry.id.as_str(), Server { entry, opts }))
        .collect();
    Ok(pretty(&Root(servers)))
}
