//! `doctor`: what is wrong with kcap's registrations across every client's own file.
//!
//! [`diagnose`] is pure: it takes each client's file (and ledger) as bytes already read
//! ([`ClientFile`]), the registry, the options `install` would be given, and a way to tell
//! what a command runs ([`Input::resolve`]); the CLI gathers those and prints the result
//! with [`crate::report`], as `check` does, each finding at a `line:column` of its file
//! (the server's name, found with the loader models' parsers). What an entry should be
//! comes from each client's room ([`crate::clients::registration::RegistrationFormat::entry`], through
//! [`crate::clients::registration::registration_entries`]) and is compared by [`install::fingerprint`],
//! so `doctor`, `install` and `export` agree on every entry shape.
//!
//! Findings, each a [`Rule`]:
//!
//! - `doctor-unreadable`: a config or ledger that cannot be read (or a `--config` file that
//!   does not exist);
//! - `doctor-malformed`: a config the client would refuse (the sentence `install` refuses it
//!   with), a ledger that is not one, a Claude Code project scope whose `mcpServers` is not
//!   an object;
//! - `doctor-duplicate`: in Claude Code's `~/.claude.json`, a project's local scope
//!   (`projects.<dir>.mcpServers`) holds an entry named like a registry server that is
//!   identical to both the user scope's (`mcpServers`) entry and the entry kcap registers:
//!   removable without changing what runs (`doctor --fix`);
//! - `doctor-conflict`: such a same-named local entry that differs from the user scope's
//!   or from kcap's: Claude Code runs it in that project instead; kept;
//! - `doctor-stale-command`: a kcap entry runs an absolute command path that does not exist;
//! - `doctor-outdated-command`: a kcap entry runs another command than the kcap binary
//!   given (`--kcap-bin`, default `kcap` on `PATH`), and the two do not resolve to the same
//!   file;
//! - `doctor-divergent`: a kcap entry (user scope) differs from the entry kcap registers in
//!   more than its command (other args, env, trust knob);
//! - `doctor-missing`: a registry server missing from a client where kcap is installed (its
//!   file holds at least one entry named like a registry server, or it has a ledger).
//!
//! A "kcap entry" is an entry named like one of the registry's `registered` servers. The
//! command of an entry is found where the client's entry shape puts the binary (`command`,
//! or OpenCode's `command[0]`), located by building the entry with a marker binary.

use std::path::{Path, PathBuf};

use crate::clients::Client;
use crate::clients::registration::{RegistrationError, RegistrationOptions};
use crate::diagnostic::Location;
use crate::ops::install::{self, ProjectDuplicate};
use crate::report::Finding;
use crate::schema::RegistryEntry;

/// One file as read from disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRead {
    /// There is no such file.
    Missing,
    /// It exists but cannot be read: the I/O error's text.
    Unreadable(String),
    /// Its bytes.
    Bytes(Vec<u8>),
}

impl FileRead {
    /// Reads `path`: [`FileRead::Missing`] when it does not exist.
    pub fn read(path: &Path) -> FileRead {
        match crate::decode::read_regular(path) {
            Ok(b) => FileRead::Bytes(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileRead::Missing,
            Err(e) => FileRead::Unreadable(e.to_string()),
        }
    }
}

/// One client's registration file and its ledger ([`install::ledger_path`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientFile {
    /// The client.
    pub client: Client,
    /// The config's path (shown in findings).
    pub path: PathBuf,
    /// Named by the user (`--config`), so its absence is a problem, not "not installed".
    pub explicit: bool,
    /// The config.
    pub config: FileRead,
    /// The ledger beside it.
    pub ledger: FileRead,
}

impl ClientFile {
    /// Reads `path` and its ledger.
    pub fn read(client: Client, path: PathBuf, explicit: bool) -> ClientFile {
        ClientFile {
            client,
            config: FileRead::read(&path),
            ledger: FileRead::read(&install::ledger_path(&path)),
            path,
            explicit,
        }
    }
}

/// Everything [`diagnose`] looks at.
pub struct Input<'a> {
    /// The registry.
    pub entries: &'a [RegistryEntry],
    /// What `install` would be given (`--kcap-bin`, `--server-url`); `project_dir` unused.
    pub opts: &'a RegistrationOptions,
    /// The files, one per client checked.
    pub files: &'a [ClientFile],
    /// The file a command runs, canonical (symbolic links resolved): an absolute command
    /// when it exists, a bare name as found on `PATH`; `None` when there is none.
    pub resolve: &'a dyn Fn(&str) -> Option<PathBuf>,
}

/// The kind of a [`Problem`]; [`Rule::name`] is its stable name in output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `doctor-unreadable`.
    Unreadable,
    /// `doctor-malformed`.
    Malformed,
    /// `doctor-duplicate` (removable).
    Duplicate,
    /// `doctor-conflict` (kept).
    Conflict,
    /// `doctor-stale-command`.
    StaleCommand,
    /// `doctor-outdated-command`.
    OutdatedCommand,
    /// `doctor-divergent`.
    Divergent,
    /// `doctor-missing`.
    Missing,
}

impl Rule {
    /// The rule's name, e.g. `doctor-stale-command`.
    pub const fn name(self) -> &'static str {
        match self {
            Rule::Unreadable => "doctor-unreadable",
            Rule::Malformed => "doctor-malformed",
            Rule::Duplicate => "doctor-duplicate",
            Rule::Conflict => "doctor-conflict",
            Rule::StaleCommand => "doctor-stale-command",
            Rule::OutdatedCommand => "doctor-outdated-command",
            Rule::Divergent => "doctor-divergent",
            Rule::Missing => "doctor-missing",
        }
    }
}

/// One thing `doctor` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The client whose file it is.
    pub client: Client,
    /// The file (config or ledger).
    pub path: PathBuf,
    /// Where in [`Problem::path`] (1-based; see [`Problem::finding`]).
    pub location: Location,
    /// What kind of problem.
    pub rule: Rule,
    /// The server concerned, if any.
    pub server: Option<String>,
    /// Claude Code: the project whose local scope it is in, if any.
    pub project: Option<String>,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, in one sentence.
    pub help: String,
}

impl Problem {
    /// As a [`Finding`] for [`crate::report`], always with a location: the name of the
    /// server concerned; for a missing server, the key of the block it belongs in; for a
    /// file the client would refuse, where its parser stops (or the value of the wrong
    /// type, or the first byte that is not UTF-8); 1:1 when there is nothing to point at
    /// (a file that cannot be read).
    pub fn finding(&self) -> Finding {
        Finding {
            file: self.path.to_string_lossy().into_owned(),
            location: Some(self.location),
            rule: self.rule.name(),
            message: self.message.clone(),
            help: self.help.clone(),
        }
    }
}

/// How a client's registration stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// No config and no ledger: the client is not set up with kcap.
    NoFile,
    /// A config without kcap entries and no ledger.
    NotInstalled,
    /// kcap is installed: `registered` of the registry's `of` servers are in the file.
    Installed {
        /// Registry servers present (by name) in the user-level block.
        registered: usize,
        /// Registry servers to register.
        of: usize,
    },
    /// The config (or its ledger) could not be read or understood.
    Unusable,
}

/// One client's line of the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientStatus {
    /// The client.
    pub client: Client,
    /// Its config's path.
    pub path: PathBuf,
    /// How it stands.
    pub status: Status,
}

/// What [`diagnose`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One per file checked, in input order.
    pub clients: Vec<ClientStatus>,
    /// Every problem, per file in input order.
    pub problems: Vec<Problem>,
    /// The [`Rule::Duplicate`] problems as what `doctor --fix` removes
    /// ([`install::remove_project_duplicates`]), with the config they are in.
    pub removable: Vec<(PathBuf, ProjectDuplicate)>,
}

impl Report {
    /// The problems as findings, in order.
    pub fn findings(&self) -> Vec<Finding> {
        self.problems.iter().map(Problem::finding).collect()
    }

    /// Whether a file could not be read at all ([`Rule::Unreadable`]): the CLI exits 2.
    pub fn has_unreadable(&self) -> bool {
        self.problems.iter().any(|p| p.rule == Rule::Unreadable)
    }
}

/// Diagnoses every file of `input` (see the module documentation).
///
/// # Errors
/// [`RegistrationError`] when a client cannot register the registry's servers with
/// [`Input::opts`] at all (a `--kcap-bin` or `--server-url` it would expand), as `install`
/// refuses them.
pub fn diagnose(input: &Input<'_>) -> Result<Report, RegistrationError> {
    let mut report = Report::default();
    for file in input.files {
        check::diagnose_file(input, file, &mut report)?;
    }
    Ok(report)
}

mod check;
mod positions;
pub mod project;
pub mod project_output;

#[cfg(test)]
mod project_tests;
#[cfg(test)]
mod tests;
