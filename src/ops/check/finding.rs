//! What a drift is ([`Drift`], [`DriftKind`]) and how it is reported: its rule name and the
//! finding's message and help, worded from the client's [`RegistrationFormat`]
//! (`crate::clients::registration::RegistrationFormat`) data, never from its name.

use super::client_name;
use crate::clients::Client;
use crate::diagnostic::Location;
use crate::report::Finding;

/// How a registration file differs from the registry for one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftKind {
    /// The client refuses the file or one scope of it.
    Rejected {
        /// What is refused (`the file`, `the user scope`, …).
        scope: String,
        /// The client's reason.
        reason: String,
    },
    /// The client skips the registry server's entry.
    Skipped {
        /// The client's reason.
        reason: String,
    },
    /// The client lists the server but does not start it (Codex `enabled = false`).
    Disabled,
    /// The client connects to a URL instead of running the command.
    Remote {
        /// The URL.
        url: String,
    },
    /// The registry lists the server; the client does not know it.
    Missing {
        /// The expected command.
        command: String,
        /// The expected args.
        args: Vec<String>,
    },
    /// The client starts a server that is not one of the registry's registrations.
    Extra {
        /// Set when the name is a registry entry that is not allowlistable (injection-only).
        injection_only: bool,
    },
    /// The client runs another command.
    Command {
        /// The expected command.
        expected: String,
        /// What the client runs.
        found: String,
    },
    /// The client passes other args.
    Args {
        /// The registry's args.
        expected: Vec<String>,
        /// What the client passes.
        found: Vec<String>,
    },
    /// The client starts the server but hides tools the registry lists.
    Tools {
        /// The hidden tools, in registry order.
        hidden: Vec<String>,
        /// The setting responsible, e.g. `enabled_tools = []`.
        setting: String,
    },
    /// The server is named twice in one scope: this earlier entry is shadowed by the later
    /// one, which the client runs.
    Duplicate {
        /// The scope (`the file`, `the user scope`, `the local scope of /p`).
        scope: String,
    },
    /// The client expands `${…}` in a value of the server.
    Expansion {
        /// The fields, e.g. `command`, `args[1]`.
        fields: Vec<String>,
    },
}

/// One difference between the registry and what a client does with a registration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    /// The file, as the user named it (a Codex profile file for a value from there).
    pub file: String,
    /// The client.
    pub client: Client,
    /// The `~/.claude.json` project whose view this is, if any.
    pub project: Option<String>,
    /// The server's name (empty for a rejected file or scope).
    pub server: String,
    /// How it differs.
    pub kind: DriftKind,
    /// Where in `file`.
    pub location: Location,
}

impl Drift {
    /// The stable rule name (see the module docs).
    pub const fn rule(&self) -> &'static str {
        match self.kind {
            DriftKind::Rejected { .. } => "drift-rejected",
            DriftKind::Skipped { .. } => "drift-skipped",
            DriftKind::Disabled => "drift-disabled",
            DriftKind::Remote { .. } => "drift-remote",
            DriftKind::Missing { .. } => "drift-missing",
            DriftKind::Extra { .. } => "drift-extra",
            DriftKind::Command { .. } => "drift-command",
            DriftKind::Args { .. } => "drift-args",
            DriftKind::Tools { .. } => "drift-tools",
            DriftKind::Expansion { .. } => "drift-expansion",
            DriftKind::Duplicate { .. } => "drift-duplicate",
        }
    }

    /// This drift as a [`Finding`] at its location, with a message saying what the client
    /// does and a help saying how to fix it.
    #[allow(
        clippy::too_many_lines,
        reason = "one message and help per drift kind, each worded for its client"
    )]
    pub fn finding(&self) -> Finding {
        let server = crate::text::printable(&self.server);
        let client = client_name(self.client);
        let file = crate::text::printable(&self.file);
        let file = match &self.project {
            Some(p) => format!("{file} (project {})", crate::text::printable(p)),
            None => file.into_owned(),
        };
        let export = self.client.name();
        let regenerate = format!("regenerate it with `kcap-mcp-registry export {export}`");
        let (message, help) = match &self.kind {
            DriftKind::Rejected { scope, reason } => (
                if scope == "the file" || scope == "the configuration" {
                    format!("{client} rejects this file, {file}: {reason}")
                } else {
                    format!("{client} rejects {scope} of {file}: {reason}")
                },
                format!("fix it: until then {client} starts none of the servers in {scope}"),
            ),
            DriftKind::Duplicate { scope } => (
                format!(
                    "MCP server `{server}` is named twice in {scope} of {file}: {client} runs \
                     the later entry, and this earlier one, which a reader may take for it, is \
                     ignored"
                ),
                "remove one of the two entries (doctor reports the file as malformed and install \
                 refuses it until then)"
                    .into(),
            ),
            DriftKind::Skipped { reason } => (
                format!("skipped by {client}: MCP server `{server}` in {file}: {reason}"),
                format!("write the entry as the export does, or {regenerate}"),
            ),
            DriftKind::Disabled => {
                // Only a client with an off switch reports a server as disabled.
                let off = self.client.registration().disabled_setting.unwrap_or("disabled");
                (
                    format!("not started by {client}: MCP server `{server}` in {file} has `{off}`"),
                    format!("remove `{off}`, or {regenerate}"),
                )
            }
            DriftKind::Remote { url } => (
                format!(
                    "{client} connects MCP server `{server}` in {file} to {} instead of running the kcap command",
                    json(url)
                ),
                "remove `url` and `type` from it: kcap's MCP servers run as the kcap command".into(),
            ),
            DriftKind::Missing { command, args } => (
                format!("MCP server `{server}` is in the registry but {client} does not load it from {file}"),
                format!(
                    "register it with command {} and args {}, or {regenerate}",
                    json(command),
                    json(args)
                ),
            ),
            DriftKind::Extra { injection_only: true } => (
                format!("{client} starts `{server}` from {file}, an injection-only registry entry"),
                "remove it: the launcher injects it into reviewers with their agent id, and no client registers it".into(),
            ),
            DriftKind::Extra { injection_only: false } => (
                format!("{client} starts MCP server `{server}` from {file}, which is not in the registry"),
                format!("remove it, or add `registry/{server}.toml` if it is a kcap MCP server"),
            ),
            DriftKind::Command { expected, found } => (
                format!(
                    "{client} runs MCP server `{server}` in {file} as {}, not {}",
                    json(found),
                    json(expected)
                ),
                format!(
                    "set its `command` to {} (or pass `--kcap-bin` with the kcap binary this file uses)",
                    json(expected)
                ),
            ),
            DriftKind::Args { expected, found } => (
                format!(
                    "{client} passes MCP server `{server}` in {file} the args {}; the registry has {}",
                    json(found),
                    json(expected)
                ),
                format!("set its `args` to {}", json(expected)),
            ),
            DriftKind::Tools { hidden, setting } => (
                format!(
                    "{client} starts MCP server `{server}` in {file} but hides its tools {} (`{setting}`)",
                    json(hidden)
                ),
                format!("remove `enabled_tools` and `disabled_tools` from it, or {regenerate}"),
            ),
            DriftKind::Expansion { fields } => {
                // Only a client that expands something reports an expansion.
                let start = self.client.registration().expands.first().copied().unwrap_or("$");
                let end = if start.contains('{') { "}" } else { "" };
                let what = format!("`{start}…{end}`");
                let how = format!("without `{start}`: {}", self.client.display_name());
                (
                    format!(
                        "{client} expands {what} in MCP server `{server}` in {file} ({}), so what runs depends on each session's environment",
                        fields.join(", ")
                    ),
                    format!("write the values {how} offers no escape"),
                )
            }
        };
        Finding {
            file: self.file.clone(),
            location: Some(self.location),
            rule: self.rule(),
            message,
            help,
        }
    }
}

/// A value for messages, shaped like compact JSON (strings quoted, arrays bracketed), with
/// each string escaped by the crate's one adapter ([`crate::text::printable`]: `\u{1b}`), as
/// every other report line shows user input.
pub(super) fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    fn shown(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::String(s) => {
                out.push('"');
                out.push_str(&crate::text::printable(s));
                out.push('"');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    shown(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    shown(
        &serde_json::to_value(value).expect("strings serialize"),
        &mut out,
    );
    out
}
