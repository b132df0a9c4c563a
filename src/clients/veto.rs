//! A setting in a client's own configuration that stops one of the servers a plan injects:
//! what a room's preflight finds (Claude Code's: [`claude::preflight`](super::claude::preflight))
//! and refuses or warns about ([`RenderError::Vetoed`](super::RenderError::Vetoed)).

use std::fmt;
use std::path::PathBuf;

use super::Client;
use crate::text::{ShownPath, printable};

/// How a setting vetoes a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VetoKind {
    /// Switched off where the reviewer runs (Claude Code: the project entry's
    /// `disabledMcpServers`).
    Disabled,
    /// Denied by name (Claude Code: a `deniedMcpServers` entry).
    DeniedByName,
    /// Its command line is denied (Claude Code: a `deniedMcpServers` `serverCommand` entry).
    DeniedByCommand,
    /// An allowlist of servers is in force and does not admit it (Claude Code:
    /// `allowedMcpServers`).
    NotAllowed,
    /// An administrator's file takes exclusive control of MCP servers (Claude Code:
    /// `managed-mcp.json`).
    ManagedMcp,
}

/// One injected server the reviewer's client would not start, and the setting that stops
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Veto {
    /// The client.
    pub client: Client,
    /// The server's name as the plan gives it to the client (Claude Code: in `--mcp-config`).
    pub server: &'static str,
    /// The file holding the setting.
    pub file: PathBuf,
    /// The setting's JSON path in that file, e.g. `projects["/w"].disabledMcpServers[0]`.
    pub json_path: String,
    /// How it vetoes.
    pub kind: VetoKind,
}

impl fmt::Display for Veto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.kind {
            VetoKind::Disabled => "disables it",
            VetoKind::DeniedByName => "denies it by name",
            VetoKind::DeniedByCommand => "denies its command line",
            VetoKind::NotAllowed => "is an allowlist that does not admit it",
            VetoKind::ManagedMcp => "takes exclusive control of MCP servers",
        };
        write!(
            f,
            "{} would not start MCP server `{}`: `{}` in {} {why}",
            self.client.display_name(),
            self.server,
            printable(&self.json_path),
            ShownPath(&self.file)
        )
    }
}

/// [`RenderError::Vetoed`]'s message: every veto, then what it means and how to fix it.
pub(super) fn fmt_vetoes(vetoes: &[Veto], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let result_channel = crate::model::RESULT_CHANNEL_ID;
    for (i, veto) in vetoes.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        fmt::Display::fmt(veto, f)?;
    }
    if vetoes.iter().any(|v| v.server == result_channel) {
        f.write_str(
            "; without its result channel the reviewer could never report, so it is not \
             launched",
        )?;
    } else {
        f.write_str("; the strict policy launches no reviewer without them")?;
    }
    f.write_str(
        "; remove those entries (or the file), or launch the reviewer with a HOME, \
         CLAUDE_CONFIG_DIR and worktree that do not carry them",
    )
}
