//! `install` and `uninstall`: kcap's MCP servers merged into a client's own registration file,
//! and taken out again, without touching anything a person wrote.
//!
//! The file's format (syntax, block key, entry shape, default location) comes from the
//! client's room ([`RegistrationFormat`]); this module is the one engine for all of them.
//!
//! - **Edits preserve the file.** JSON files are edited on `jsonc-parser`'s concrete syntax
//!   tree, TOML files with `toml_edit`: other servers, other keys, their order, comments,
//!   indentation and a leading byte order mark stay as they were. Only the entries of the
//!   block ([`RegistrationFormat::block`]) named like a registry server are ever touched.
//! - **Ownership ledger.** Beside the config, `<file name>.kcap-ledger.json` records, for
//!   each entry kcap wrote, a fingerprint: `sha256:` and the SHA-256 (lower-case hex) of the
//!   entry as compact JSON with object keys sorted ([`fingerprint`]; a TOML table is read as
//!   the JSON it maps to). Beside the config, not under a data directory, because every
//!   client's home variable (`CODEX_HOME`, `COPILOT_HOME`, `KIRO_HOME`, `XDG_CONFIG_HOME`,
//!   `CLAUDE_CONFIG_DIR`, a throwaway `HOME`) moves the config, and the ledger must move
//!   with it: a ledger elsewhere would claim entries of a file it never saw. No client reads
//!   a file of that name (facts "Registration": each reads its own named file).
//! - **Register** ([`install`]), per registry server: missing → added; present and written
//!   by kcap (its fingerprint is the ledger's) → healed to the registry's entry; present,
//!   not recorded, but identical → adopted; otherwise → divergent, left alone and reported.
//!   "Identical" is as the client runs it ([`crate::ops::check::same_to_client`], through the
//!   client's loader model): keys the client ignores and spellings it reads the same way
//!   (Claude Code: no `description`, `"type": "stdio"`, `"env": {}`) do not count; an
//!   adopted entry is recorded with the fingerprint of the entry as written.
//!   An owned entry of a server the registry no longer registers is removed.
//! - **Unregister** ([`uninstall`]) removes only owned entries whose fingerprint still
//!   matches; an edited one is kept and reported. An entry no ledger records (the ledger was
//!   deleted) is removed when it is identical to the entry `install` registers (`install`
//!   would adopt it, so it is kcap's), and otherwise left in place and reported. A block that becomes empty is dropped,
//!   unless it was already there, empty, when kcap first wrote into it (so install then
//!   uninstall gives the original bytes back).
//! - **Refusals.** A file that is not valid in the client's syntax, whose top level or block
//!   is not a table/object, or whose block names a server twice is refused, and nothing is
//!   written. So is a ledger that cannot be read.
//! - **Writes.** The config is written to a temporary file in its directory, synced, given
//!   the original file's permissions, and renamed over it; then the ledger the same way (or
//!   removed when it records nothing). A crash between the two leaves a config whose new
//!   entries the next run finds identical and adopts: nothing is duplicated or lost. An
//!   advisory lock (`flock`, through `fs4`) on the config's directory serializes concurrent
//!   `install`/`uninstall` runs (Unix; elsewhere opening a directory fails and so does the
//!   command, with that error).
//! - **`--dry-run`** computes the same result, writes nothing and takes no lock;
//!   [`Outcome::diff`] is the unified diff of the config.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod doc;
mod file;
mod ledger;

use doc::Doc;
use file::{Lock, writable_by_us, write_atomic};
use ledger::{Ledger, read_ledger};
pub use ledger::{fingerprint, ledger_entries, ledger_path};

use crate::clients::Client;
use crate::clients::registration::{Node, RegistrationFormat};
use crate::decode::BOM;

/// The environment variable that makes the writer abort between the config write and the
/// ledger write: a test hook for crash safety (`tests/suite/install.rs`). Nothing else reads it.
pub const CRASH_BEFORE_LEDGER_VAR: &str = "KCAP_MCP_REGISTRY_TEST_CRASH_BEFORE_LEDGER";

/// What happened (or, with `--dry-run`, would happen) to one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Not in the file: added.
    Added,
    /// Written by kcap, and the entry kcap registers differs from it now (the registry's
    /// entry, `--kcap-bin` or `--server-url` changed): rewritten.
    Healed,
    /// Already there, identical, but not recorded: now recorded as kcap's.
    Adopted,
    /// Already there, kcap's and identical: nothing to do.
    Unchanged,
    /// There, differing from the registry's entry, and not kcap's (or edited since): left
    /// alone. A problem: the client runs that entry, not the registry's.
    Divergent,
    /// kcap's, unchanged since written: removed (uninstall, or a server the registry no
    /// longer registers).
    Removed,
    /// kcap wrote it but it was edited since: kept, and no longer recorded as kcap's.
    KeptEdited,
    /// Recorded as kcap's but no longer in the file: forgotten.
    Forgotten,
    /// Uninstall: not recorded (the ledger was lost, or never written), but identical to the
    /// entry `install` registers, which `install` would adopt: adopted, then removed.
    RemovedUnrecorded,
    /// Uninstall: named like a registry server, not recorded, and different from the entry
    /// `install` registers: not kcap's to remove, so left in place and reported.
    LeftUnowned,
    /// `doctor --fix`: a Claude Code project-scope entry identical to the user scope's and
    /// to kcap's: removed (the project runs the user-scope entry).
    RemovedDuplicate,
}

impl Action {
    /// Lower-case verb for output, e.g. `added`.
    pub const fn name(self) -> &'static str {
        match self {
            Action::Added => "added",
            Action::Healed => "healed",
            Action::Adopted => "adopted",
            Action::Unchanged => "unchanged",
            Action::Divergent => "divergent",
            Action::Removed => "removed",
            Action::KeptEdited => "kept",
            Action::Forgotten => "forgotten",
            Action::RemovedUnrecorded => "removed",
            Action::LeftUnowned => "left",
            Action::RemovedDuplicate => "removed",
        }
    }

    /// Whether this outcome leaves the client running something other than the registry
    /// says (so the command exits 1).
    pub const fn is_problem(self) -> bool {
        matches!(self, Action::Divergent | Action::KeptEdited)
    }

    fn explain(self) -> &'static str {
        match self {
            Action::Added => "was missing",
            Action::Healed => {
                "rewritten: kcap wrote it, and the entry kcap registers differs from it now (the \
                 registry's entry, --kcap-bin or --server-url changed)"
            }
            Action::Adopted => "already registered identically; now recorded as kcap's",
            Action::Unchanged => "already registered",
            Action::Divergent => {
                "left alone: it differs from the registry's entry and kcap did not write it \
                 (or it was edited since); remove or fix it, then run install again"
            }
            Action::Removed => "kcap wrote it and it was not edited since",
            Action::KeptEdited => {
                "kept: edited since kcap wrote it, so it is yours now; remove it by hand if \
                 you no longer want it"
            }
            Action::Forgotten => "already gone from the file; forgotten",
            Action::RemovedUnrecorded => {
                "no ledger records it, but it is identical to the entry kcap registers, so it \
                 is kcap's: adopted, then removed"
            }
            Action::RemovedDuplicate => {
                "identical to the user scope's entry and to kcap's; the project now runs the \
                 user-scope entry"
            }
            Action::LeftUnowned => {
                "left in place: no ledger records it and it differs from the entry kcap \
                 registers, so it is not kcap's to remove; if kcap wrote it with another \
                 --kcap-bin or --server-url, run uninstall with those, or remove it by hand"
            }
        }
    }
}

/// The result of [`install`] or [`uninstall`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The config file.
    pub config: PathBuf,
    /// The ledger beside it.
    pub ledger: PathBuf,
    /// Per entry name, in the order handled.
    pub actions: Vec<(String, Action)>,
    /// The config's text before (empty when the file did not exist).
    pub before: String,
    /// The config's text after.
    pub after: String,
    /// Whether the config or the ledger changed (with `dry_run`: would change).
    pub changed: bool,
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
    /// Whether the config existed before.
    pub existed: bool,
    /// Whether the config was removed (with `dry_run`: would be): kcap created it and
    /// nothing else is left in it.
    pub removed: bool,
}

impl Outcome {
    /// Whether an entry was left divergent or kept edited ([`Action::is_problem`]).
    pub fn has_problem(&self) -> bool {
        self.actions.iter().any(|(_, a)| a.is_problem())
    }

    /// A unified diff (3 lines of context) from [`Outcome::before`] to [`Outcome::after`],
    /// headed by the config's path; empty when the text does not change.
    pub fn diff(&self) -> String {
        if self.before == self.after {
            return String::new();
        }
        let path = self.config.display().to_string();
        similar::TextDiff::from_lines(&self.before, &self.after)
            .unified_diff()
            .context_radius(3)
            .header(&format!("{path} (before)"), &format!("{path} (after)"))
            .to_string()
    }

    /// One line per entry: `<action> <name>: <explanation>`.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for (name, action) in &self.actions {
            out.push_str(&format!(
                "{} {}: {}\n",
                action.name(),
                name.escape_debug(),
                action.explain()
            ));
        }
        out
    }
}

/// Why nothing was written.
#[derive(Debug)]
pub struct InstallError {
    /// The file concerned.
    pub path: PathBuf,
    /// What is wrong and how to fix it.
    pub problem: String,
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}; nothing was written",
            crate::text::printable(&self.path.to_string_lossy()),
            self.problem
        )
    }
}

impl std::error::Error for InstallError {}

fn error(path: &Path, problem: impl Into<String>) -> InstallError {
    InstallError {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

/// Registers `servers` (from [`crate::clients::registration::registration_entries`]) in `config`.
///
/// # Errors
/// [`InstallError`] when the config or ledger cannot be read, understood or written; then
/// nothing is written.
pub fn install(
    format: &RegistrationFormat,
    config: &Path,
    servers: &[(String, Node)],
    dry_run: bool,
) -> Result<Outcome, InstallError> {
    run(format, config, dry_run, true, |doc, ledger, actions| {
        let existing = doc.entries(format.block)?;
        if ledger.entries.is_empty() && existing.as_ref().is_some_and(|e| e.is_empty()) {
            ledger.block_was_empty = true;
        }
        let existing = existing.unwrap_or_default();
        for (name, node) in servers {
            let want = fingerprint(&node.to_json());
            let mut recorded = want.clone();
            let owned = ledger.entries.get(name).cloned();
            let action = match existing.iter().find(|(n, _)| n == name) {
                None => {
                    doc.set(format.block, name, node);
                    Action::Added
                }
                Some((_, value)) => {
                    let have = fingerprint(value);
                    // An entry the client runs exactly as kcap's (through its loader model:
                    // `"type": "stdio"`, `"env": {}`, no `description` for Claude Code) is
                    // kcap's, recorded as it is written.
                    if have == want
                        || crate::ops::check::same_to_client(
                            format.client,
                            name,
                            value,
                            &node.to_json(),
                        )
                    {
                        recorded = have.clone();
                        if owned.as_deref() == Some(have.as_str()) {
                            Action::Unchanged
                        } else {
                            Action::Adopted
                        }
                    } else if owned.as_deref() == Some(have.as_str()) {
                        doc.set(format.block, name, node);
                        Action::Healed
                    } else {
                        Action::Divergent
                    }
                }
            };
            if action == Action::Divergent {
                ledger.entries.remove(name);
            } else {
                ledger.entries.insert(name.clone(), recorded);
            }
            actions.push((name.clone(), action));
        }
        // Owned entries of servers the registry no longer registers.
        let stale: Vec<String> = ledger
            .entries
            .keys()
            .filter(|n| !servers.iter().any(|(s, _)| s == *n))
            .cloned()
            .collect();
        if remove_owned(doc, format, &existing, ledger, &stale, actions) && !ledger.block_was_empty
        {
            doc.remove_block_if_empty(format.block);
        }
        Ok(())
    })
}

/// Removes from `config` the entries kcap wrote whose fingerprint still matches, and the
/// entries of `servers` (as for [`install`]) that no ledger records but that are identical
/// to the entry `install` registers ([`Action::RemovedUnrecorded`]): `install` would adopt
/// them, so they are kcap's even when the ledger was deleted. An entry named like one of
/// `servers`, not recorded and different is left in place and reported
/// ([`Action::LeftUnowned`]).
///
/// # Errors
/// As [`install`].
pub fn uninstall(
    format: &RegistrationFormat,
    config: &Path,
    servers: &[(String, Node)],
    dry_run: bool,
) -> Result<Outcome, InstallError> {
    run(format, config, dry_run, false, |doc, ledger, actions| {
        let existing = doc.entries(format.block)?.unwrap_or_default();
        let owned: Vec<String> = ledger.entries.keys().cloned().collect();
        let mut unrecorded = Vec::new();
        for (name, node) in servers {
            if ledger.entries.contains_key(name) {
                continue;
            }
            if let Some((_, value)) = existing.iter().find(|(n, _)| n == name) {
                if crate::ops::check::same_to_client(format.client, name, value, &node.to_json()) {
                    unrecorded.push(name.clone());
                } else {
                    actions.push((name.clone(), Action::LeftUnowned));
                }
            }
        }
        let mut removed = remove_owned(doc, format, &existing, ledger, &owned, actions);
        for name in unrecorded {
            doc.remove(format.block, &name);
            removed = true;
            actions.push((name, Action::RemovedUnrecorded));
        }
        if removed && !ledger.block_was_empty {
            doc.remove_block_if_empty(format.block);
        }
        Ok(())
    })
}

/// Removes the entries `names` of `ledger` whose fingerprint still matches; returns whether
/// one was removed from the file.
fn remove_owned(
    doc: &mut Doc,
    format: &RegistrationFormat,
    existing: &[(String, Value)],
    ledger: &mut Ledger,
    names: &[String],
    actions: &mut Vec<(String, Action)>,
) -> bool {
    let mut removed = false;
    for name in names {
        let Some(recorded) = ledger.entries.remove(name) else {
            continue;
        };
        let action = match existing.iter().find(|(n, _)| n == name) {
            None => Action::Forgotten,
            Some((_, value)) if fingerprint(value) == recorded => {
                doc.remove(format.block, name);
                removed = true;
                Action::Removed
            }
            Some(_) => Action::KeptEdited,
        };
        actions.push((name.clone(), action));
    }
    removed
}

/// Reads, edits with `edit`, and writes back (unless `dry_run`), under the lock; `create_dir`:
/// create the config's directory first (install).
#[allow(
    clippy::too_many_lines,
    reason = "the lock, read, edit, atomic write and ledger steps must stay visibly in this order for crash safety"
)]
fn run(
    format: &RegistrationFormat,
    config: &Path,
    dry_run: bool,
    create_dir: bool,
    edit: impl FnOnce(&mut Doc, &mut Ledger, &mut Vec<(String, Action)>) -> Result<(), String>,
) -> Result<Outcome, InstallError> {
    // A config that is a symbolic link (a dotfile manager's `~/.claude.json`) is edited where
    // it points, and the link stays: the atomic rename would otherwise replace the link with
    // a file and leave its target unchanged. A link to nothing is refused.
    let target;
    let config = match fs::symlink_metadata(config) {
        Ok(m) if m.file_type().is_symlink() => {
            target = fs::canonicalize(config).map_err(|e| {
                error(
                    config,
                    format!(
                        "is a symbolic link whose target cannot be reached ({e}); create the \
                         target first, or give the target's own path with --config"
                    ),
                )
            })?;
            target.as_path()
        }
        _ => config,
    };
    let ledger_path = ledger_path(config);
    if create_dir && !dry_run {
        if let Some(dir) = config.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| error(config, format!("cannot create its directory: {e}")))?;
        }
    }
    let _lock = if dry_run {
        None
    } else {
        Some(Lock::take(config)?)
    };
    let (bytes, mode) = match crate::decode::read_regular(config) {
        Ok(b) => {
            let perms = fs::metadata(config).map(|m| m.permissions()).ok();
            (Some(b), perms)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (None, None),
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            return Err(error(config, e.to_string()));
        }
        Err(e) => return Err(error(config, format!("cannot read it: {e}"))),
    };
    let before = match &bytes {
        None => String::new(),
        Some(b) => String::from_utf8(b.clone()).map_err(|e| {
            error(
                config,
                format!(
                    "is not UTF-8 (invalid byte at offset {}); {} cannot read it either: fix \
                     the file",
                    e.utf8_error().valid_up_to(),
                    format.client.display_name()
                ),
            )
        })?,
    };
    let old_ledger = read_ledger(&ledger_path, format.client)?;
    let mut ledger = old_ledger.clone().unwrap_or(Ledger {
        version: 1,
        client: format.client.name().to_string(),
        ..Ledger::default()
    });
    let (bom, text) = match before.strip_prefix(BOM) {
        Some(rest) => (true, rest),
        None => (false, before.as_str()),
    };
    let mut doc = Doc::parse(format, text, bytes.is_some()).map_err(|p| error(config, p))?;
    if bytes.is_none() && old_ledger.is_none() {
        ledger.file_created = true;
    }
    let mut actions = Vec::new();
    edit(&mut doc, &mut ledger, &mut actions).map_err(|p| error(config, p))?;
    let mut after = doc.render(bytes.is_none());
    if bom {
        after.insert(0, BOM);
    }
    // Only install creates a config: with no file there is nothing to take out of it (a
    // ledger left without its file is still cleaned up).
    if bytes.is_none() && !create_dir {
        after.clear();
    }
    // A file kcap created and has emptied again goes away (so uninstall restores "no file").
    let remove_config = ledger.entries.is_empty()
        && ledger.file_created
        && bytes.is_some()
        && matches!(after.trim(), "" | "{}");
    if remove_config {
        after.clear();
    }
    let new_ledger = (!ledger.entries.is_empty()).then_some(ledger);
    let config_changed = after != before || remove_config;
    let ledger_changed = new_ledger != old_ledger;
    if config_changed
        && !remove_config
        && let Some(perms) = &mode
        && !writable_by_us(config, perms)
    {
        return Err(error(
            config,
            "is read-only (no write permission for you): its write protection says it must not \
             change; make it writable (`chmod u+w`) if kcap may edit it",
        ));
    }
    if !dry_run {
        if remove_config {
            fs::remove_file(config)
                .map_err(|e| error(config, format!("cannot remove the emptied file: {e}")))?;
        } else if config_changed {
            write_atomic(config, after.as_bytes(), mode.as_ref())
                .map_err(|e| error(config, format!("cannot write it: {e}")))?;
        }
        if ledger_changed {
            if config_changed && std::env::var_os(CRASH_BEFORE_LEDGER_VAR).is_some() {
                std::process::abort();
            }
            match &new_ledger {
                Some(l) => {
                    let mut text = serde_json::to_string_pretty(l).expect("the ledger serializes");
                    text.push('\n');
                    write_atomic(&ledger_path, text.as_bytes(), None).map_err(|e| {
                        error(&ledger_path, format!("cannot write the ledger: {e}"))
                    })?;
                }
                None => match fs::remove_file(&ledger_path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(error(
                            &ledger_path,
                            format!("cannot remove the emptied ledger: {e}"),
                        ));
                    }
                },
            }
        }
    }
    Ok(Outcome {
        config: config.to_path_buf(),
        ledger: ledger_path,
        actions,
        before,
        after,
        changed: config_changed || ledger_changed,
        dry_run,
        existed: bytes.is_some(),
        removed: remove_config,
    })
}

/// The entries of `format`'s block in the config `text` (a leading byte order mark
/// allowed), read as `install` reads them: `None` when there is no block.
///
/// # Errors
/// The sentence `install` refuses the file with: not valid in the client's syntax, a top
/// level or block that is not an object/table, a server named twice, an empty file the
/// client does not accept.
pub fn block_entries(
    format: &RegistrationFormat,
    text: &str,
) -> Result<Option<Vec<(String, Value)>>, String> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    Doc::parse(format, text, true)?.entries(format.block)
}

/// A same-named entry in a Claude Code project's local scope (`projects.<dir>.mcpServers`
/// of `~/.claude.json`) to remove, because it duplicates the user scope's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectDuplicate {
    /// The project directory, the key under `projects`.
    pub project: String,
    /// The server's name.
    pub name: String,
    /// The [`fingerprint`] both the local and the user-scope entry must still have.
    pub fingerprint: String,
}

/// Removes `duplicates` from the per-project blocks of `client`'s `config` (its
/// [`RegistrationFormat::project_blocks`]: Claude Code's `~/.claude.json` `projects`; used
/// by `doctor --fix`), with `install`'s lock, atomic write and refusals. A client whose file
/// has no per-project blocks has none to remove. Under the lock, each is
/// checked again: it is removed only when both the local-scope entry and the user scope's
/// entry of that name still have its fingerprint (so the project then runs the identical
/// user-scope entry, [`Action::RemovedDuplicate`]), and otherwise left alone
/// ([`Action::Divergent`]). An emptied local
/// `mcpServers` stays (Claude Code writes one, empty, for every project). The ledger, which
/// records user-scope entries only, is not touched. Each action is named
/// `<name> (project <dir>)`.
///
/// # Errors
/// As [`install`].
pub fn remove_project_duplicates(
    client: Client,
    config: &Path,
    duplicates: &[ProjectDuplicate],
    dry_run: bool,
) -> Result<Outcome, InstallError> {
    let format = client.registration();
    let projects = format.project_blocks.unwrap_or_default();
    let duplicates = if projects.is_empty() {
        &[][..]
    } else {
        duplicates
    };
    run(format, config, dry_run, false, |doc, _ledger, actions| {
        let user = doc.entries(format.block).ok().flatten().unwrap_or_default();
        let Doc::Json(root) = doc else {
            return Ok(());
        };
        let root = root.object_value().expect("checked at parse");
        for dup in duplicates {
            let user_matches = user
                .iter()
                .any(|(n, v)| *n == dup.name && fingerprint(v) == dup.fingerprint);
            let prop = root
                .object_value(projects)
                .and_then(|p| p.object_value(&dup.project))
                .and_then(|p| p.object_value(format.block))
                .and_then(|s| s.get(&dup.name));
            let local_matches = prop.as_ref().is_some_and(|p| {
                p.value()
                    .and_then(|v| v.to_serde_value())
                    .is_some_and(|v| fingerprint(&v) == dup.fingerprint)
            });
            let action = match prop {
                Some(prop) if user_matches && local_matches => {
                    prop.remove();
                    Action::RemovedDuplicate
                }
                _ => Action::Divergent,
            };
            actions.push((format!("{} (project {})", dup.name, dup.project), action));
        }
        Ok(())
    })
}
