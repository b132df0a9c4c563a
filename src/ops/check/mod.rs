//! Drift between the registry and a client's registration file (`check --against FILE`).
//!
//! The registry's side is [`registrations`] (every allowlistable entry), each expected to run
//! `command` (the kcap binary, `kcap` unless told otherwise) with its `args`: exactly what the
//! registration exports write. The file's side is not guessed here: each client's loader
//! model says what that client does with the file ([`crate::clients::claude::loader`],
//! [`crate::clients::codex::loader`]): which servers it starts, with which command and args,
//! which entries it skips, and whether it refuses the file (or one scope of it) as a whole.
//! Drift is the difference, and each finding is named by what the client will do, at the
//! `line:column` of the value responsible:
//!
//! - `drift-rejected`: the client refuses the file or a scope of it (none of its servers
//!   start);
//! - `drift-skipped`: the client skips a registry server's entry;
//! - `drift-disabled`: the client lists a registry server but does not start it;
//! - `drift-remote`: the client connects to a URL instead of running the kcap command;
//! - `drift-command`, `drift-args`: it runs another command or other args;
//! - `drift-tools`: it starts the server but hides some of its tools;
//! - `drift-expansion`: it expands `${…}` in the server's values, so what runs depends on
//!   each session's environment;
//! - `drift-missing`, `drift-extra`: a registry server it does not know of, or a server it
//!   starts that is not one of the registry's registrations;
//! - `drift-duplicate`: a server named twice in one scope of a JSON file; the client runs the
//!   later entry, so the earlier one (reported) hides what runs from a reader of the file.

use std::fmt;
use std::path::PathBuf;

use crate::clients::Client;
use crate::clients::loaded::{Loaded, Span};
use crate::clients::registration::registrations;
use crate::diagnostic::{Location, SourceText};
use crate::schema::RegistryEntry;
use crate::text::ShownPath;

mod files;
mod finding;

pub use files::{check_against, detect_client, same_to_client};
use finding::json;
pub use finding::{Drift, DriftKind};

/// The client's display name in findings: `Claude Code`, `Codex CLI`.
pub const fn client_name(client: Client) -> &'static str {
    client.display_name()
}

/// What `check --against` needs besides the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgainstOptions {
    /// Claude Code: the project directory a session runs in. For a `~/.claude.json`, the
    /// local scope of this project is merged over the user scope; without it, each project
    /// the file holds a local scope for is checked in turn (and the user scope alone when
    /// there is none), and the user scope alone as well when it registers any server. For a
    /// `.mcp.json`, servers run in it.
    pub project: Option<String>,
    /// Codex CLI: the profile (`--profile NAME`), read from `NAME.config.toml` next to the
    /// file and merged over it.
    pub codex_profile: Option<String>,
    /// The client that reads the file; `None` tells it from the file ([`detect_client`]).
    pub client: Option<Client>,
}

/// One effective server set checked: a file, or one project's view of a `~/.claude.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The file, as the user named it.
    pub path: String,
    /// The client that reads it.
    pub client: Client,
    /// The project whose view this is (`~/.claude.json` local scopes), if any.
    pub project: Option<String>,
    /// What the client's loader model says.
    pub loaded: Loaded,
    /// The differences from the registry.
    pub drift: Vec<Drift>,
}

/// A registration file that could not be read, or whose client cannot be told.
///
/// `Display` names the file and what went wrong with it; an I/O error is returned from
/// [`source`](std::error::Error::source), not displayed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The file (or a Codex profile file next to it) cannot be read.
    Read {
        /// The path as the user gave it (or the profile file's).
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Which client reads the file cannot be told ([`detect_client`]).
    UnknownClient {
        /// The path as the user gave it.
        path: PathBuf,
        /// Why neither client's format fits.
        why: String,
    },
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistrationError::Read { path, .. } => write!(f, "cannot read {}", ShownPath(path)),
            RegistrationError::UnknownClient { path, why } => {
                write!(f, "{}: {why}", ShownPath(path))
            }
        }
    }
}

impl std::error::Error for RegistrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegistrationError::Read { source, .. } => Some(source),
            RegistrationError::UnknownClient { .. } => None,
        }
    }
}

/// Every difference between the registry `entries` (as [`registrations`], each expected to
/// run `command`) and what `client` does according to `loaded`: refusals first, then
/// registry servers in registry order, then extra ones sorted by name.
pub fn drift(
    entries: &[RegistryEntry],
    command: &str,
    client: Client,
    project: Option<&str>,
    loaded: &Loaded,
) -> Vec<Drift> {
    drift_in(
        entries,
        command,
        client,
        project,
        loaded,
        &source_texts(loaded),
    )
}

/// The line index of each of `loaded`'s sources.
fn source_texts(loaded: &Loaded) -> Vec<SourceText> {
    loaded
        .sources
        .iter()
        .map(|s| SourceText::new(s.text.to_string()))
        .collect()
}

/// [`drift`] with the line index of `loaded`'s sources built once by the caller (one
/// `~/.claude.json` is checked once per project, against the same text).
#[allow(
    clippy::too_many_lines,
    reason = "one comparison per registration field, in the order findings are reported"
)]
fn drift_in(
    entries: &[RegistryEntry],
    command: &str,
    client: Client,
    project: Option<&str>,
    loaded: &Loaded,
    texts: &[SourceText],
) -> Vec<Drift> {
    let file_of = |span: Option<&Span>| {
        let i = span.map_or(0, |s| s.source);
        loaded
            .sources
            .get(i)
            .map(|s| s.path.clone())
            .unwrap_or_default()
    };
    let locate = |span: Option<&Span>| match span.and_then(|s| Some((s, texts.get(s.source)?))) {
        Some((s, text)) => text.location(s.range.clone()),
        None => Location {
            line: 1,
            column: 1,
            end_line: 1,
            end_column: 1,
        },
    };
    let mut out = Vec::new();
    let mut make = |server: &str, kind, span: Option<&Span>| {
        out.push(Drift {
            file: file_of(span),
            client,
            project: project.map(String::from),
            server: server.into(),
            kind,
            location: locate(span),
        })
    };
    for r in &loaded.rejected {
        make(
            "",
            DriftKind::Rejected {
                scope: r.scope.clone(),
                reason: r.reason.clone(),
            },
            r.span.as_ref(),
        );
    }
    let whole_file_rejected = loaded
        .rejected
        .iter()
        .any(|r| r.scope == "the file" || r.scope == "the configuration");
    if whole_file_rejected {
        return out;
    }
    for entry in registrations(entries) {
        let expected_args = crate::clients::registration::registration_args(entry, client);
        if let Some(s) = loaded.started.iter().find(|s| s.name == entry.id) {
            let field = |f: &str| s.fields.get(f).or(Some(&s.span));
            if !s.expanded.is_empty() {
                make(
                    &entry.id,
                    DriftKind::Expansion {
                        fields: s.expanded.clone(),
                    },
                    Some(&s.span),
                );
            }
            if s.command != command {
                make(
                    &entry.id,
                    DriftKind::Command {
                        expected: command.into(),
                        found: s.command.clone(),
                    },
                    field("command"),
                );
            }
            if s.args != expected_args {
                make(
                    &entry.id,
                    DriftKind::Args {
                        expected: expected_args.clone(),
                        found: s.args.clone(),
                    },
                    field("args"),
                );
            }
            let tools: Vec<&str> = entry.tools.iter().map(|t| t.name.as_str()).collect();
            let mut hidden: Vec<String> = Vec::new();
            let mut setting = String::new();
            if let Some(enabled) = &s.enabled_tools {
                let h: Vec<String> = if enabled.is_empty() {
                    // No tool at all, whatever the registry lists.
                    vec!["*".into()]
                } else {
                    tools
                        .iter()
                        .filter(|t| !enabled.iter().any(|e| e == *t))
                        .map(|t| t.to_string())
                        .collect()
                };
                if !h.is_empty() {
                    setting = format!("enabled_tools = {}", json(enabled));
                    hidden = h;
                }
            }
            let disabled: Vec<String> = tools
                .iter()
                .filter(|t| s.disabled_tools.iter().any(|d| d == *t))
                .map(|t| t.to_string())
                .collect();
            if !disabled.is_empty() {
                if setting.is_empty() {
                    setting = format!("disabled_tools = {}", json(&s.disabled_tools));
                }
                hidden.extend(disabled);
            }
            if !hidden.is_empty() {
                let span = if setting.starts_with("enabled") {
                    field("enabled_tools")
                } else {
                    field("disabled_tools")
                };
                make(&entry.id, DriftKind::Tools { hidden, setting }, span);
            }
        } else if let Some(r) = loaded.remote.iter().find(|r| r.name == entry.id) {
            make(
                &entry.id,
                DriftKind::Remote { url: r.url.clone() },
                Some(&r.span),
            );
        } else if let Some(k) = loaded.skipped.iter().find(|k| k.name == entry.id) {
            let kind = if k.disabled {
                DriftKind::Disabled
            } else {
                DriftKind::Skipped {
                    reason: k.reason.clone(),
                }
            };
            make(&entry.id, kind, Some(&k.span));
        } else {
            make(
                &entry.id,
                DriftKind::Missing {
                    command: command.into(),
                    args: expected_args.clone(),
                },
                None,
            );
        }
    }
    let extras = loaded
        .started
        .iter()
        .map(|s| (&s.name, &s.span))
        .chain(loaded.remote.iter().map(|r| (&r.name, &r.span)));
    let mut extras: Vec<_> = extras
        .filter(|(name, _)| !registrations(entries).any(|e| &e.id == *name))
        .collect();
    extras.sort_by(|a, b| a.0.cmp(b.0));
    for (name, span) in extras {
        let injection_only = entries.iter().any(|e| &e.id == name);
        make(name, DriftKind::Extra { injection_only }, Some(span));
    }
    out
}
