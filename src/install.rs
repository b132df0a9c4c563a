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
//!   "Identical" is as the client runs it ([`crate::drift::same_to_client`], through the
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

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::clients::Client;
use crate::decode::BOM;
use crate::export::{Node, RegistrationFormat, Syntax};

/// The environment variable that makes the writer abort between the config write and the
/// ledger write: a test hook for crash safety (`tests/install.rs`). Nothing else reads it.
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

/// The ledger's path for `config`: `<dir>/<file name>.kcap-ledger.json`.
pub fn ledger_path(config: &Path) -> PathBuf {
    sibling(config, ".kcap-ledger.json")
}

fn sibling(config: &Path, suffix: &str) -> PathBuf {
    let mut name = config.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    config.with_file_name(name)
}

/// `sha256:<hex>` of `value` as compact JSON with object keys sorted (at every depth).
pub fn fingerprint(value: &Value) -> String {
    let mut canonical = String::new();
    canonical_json(value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    let mut out = String::from("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The ledger file: which entries of the config kcap wrote, by fingerprint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ledger {
    /// The ledger format's version: 1.
    #[serde(rename = "kcap-mcp-registry-ledger")]
    version: u32,
    /// The client whose file this is.
    client: String,
    /// The block was there and empty when kcap first wrote into it: keep it when emptied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    block_was_empty: bool,
    /// The config did not exist before kcap wrote it: remove it when nothing is left in it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    file_created: bool,
    /// Entry name → fingerprint of the entry kcap wrote.
    entries: BTreeMap<String, String>,
}

/// Registers `servers` (from [`crate::export::registration_entries`]) in `config`.
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
                        || crate::drift::same_to_client(format.client, name, value, &node.to_json())
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
                if crate::drift::same_to_client(format.client, name, value, &node.to_json()) {
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

/// Whether the mode bits of `perms` let this process write `path`: the owner's write bit
/// when we own it, else the group's when we are in its group, else the others'. Mode bits,
/// not `access(2)`: for root `access` says yes to every file, but a 0444 file is its
/// owner's way of saying "do not change", which the atomic rename would otherwise ignore.
#[cfg(unix)]
fn writable_by_us(path: &Path, perms: &fs::Permissions) -> bool {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let mode = perms.mode();
    let Ok(meta) = fs::metadata(path) else {
        return mode & 0o222 != 0;
    };
    // The process's own uid and gid, as the owner of a file it creates: no libc needed.
    let me = tempfile::tempfile().and_then(|f| f.metadata());
    match me {
        Ok(me) if me.uid() == meta.uid() => mode & 0o200 != 0,
        Ok(me) if me.uid() == 0 => mode & 0o222 != 0,
        Ok(me) if me.gid() == meta.gid() => mode & 0o020 != 0,
        Ok(_) => mode & 0o002 != 0,
        Err(_) => mode & 0o222 != 0,
    }
}

#[cfg(not(unix))]
fn writable_by_us(_path: &Path, perms: &fs::Permissions) -> bool {
    !perms.readonly()
}

fn read_ledger(path: &Path, client: Client) -> Result<Option<Ledger>, InstallError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(error(path, format!("cannot read the ledger: {e}"))),
    };
    parse_ledger(&text, client)
        .map(Some)
        .map_err(|p| error(path, p))
}

fn parse_ledger(text: &str, client: Client) -> Result<Ledger, String> {
    let ledger: Ledger = serde_json::from_str(text).map_err(|e| {
        format!(
            "is not a kcap ledger ({e}); it records which entries kcap wrote: restore it, \
             or remove it to have identical entries adopted and the rest left alone"
        )
    })?;
    if ledger.version != 1 || ledger.client != client.name() {
        return Err(format!(
            "is a ledger of version {} for client `{}`, not version 1 for `{}`; use the \
             matching --client, or remove it",
            ledger.version,
            ledger.client.escape_debug(),
            client.name()
        ));
    }
    Ok(ledger)
}

/// The entries a ledger's `text` records for `client`: name → fingerprint.
///
/// # Errors
/// A sentence (the one `install` refuses the ledger with) when `text` is not a version 1
/// ledger of `client`.
pub fn ledger_entries(text: &str, client: Client) -> Result<BTreeMap<String, String>, String> {
    parse_ledger(text, client).map(|l| l.entries)
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

/// Writes `bytes` to `path` by a rename from a synced temporary file in the same directory,
/// with `perms` (the replaced file's) when given.
fn write_atomic(path: &Path, bytes: &[u8], perms: Option<&fs::Permissions>) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".kcap-tmp-");
    // A new file gets the mode any new file would (0666 less the umask), not tempfile's 0600.
    #[cfg(unix)]
    if perms.is_none() {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    if let Some(perms) = perms {
        tmp.as_file().set_permissions(perms.clone())?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// An exclusive advisory lock (`flock`) on the config's directory, released on drop: the
/// directory's inode survives the renames that replace the config and the ledger, so every
/// writer locks the same thing, and no lock file is left behind. A missing directory is
/// created first (install) or means there is nothing to lock.
struct Lock(Option<fs::File>);

impl Lock {
    fn take(config: &Path) -> Result<Lock, InstallError> {
        let dir = match config.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let file = match fs::File::open(dir) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lock(None)),
            Err(e) => {
                return Err(error(
                    dir,
                    format!("cannot open the directory to lock it: {e}"),
                ));
            }
        };
        fs4::FileExt::lock(&file)
            .map_err(|e| error(dir, format!("cannot lock the directory: {e}")))?;
        Ok(Lock(Some(file)))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            let _ = fs4::FileExt::unlock(f);
        }
    }
}

/// A parsed config, edited in place.
enum Doc {
    Json(jsonc_parser::cst::CstRootNode),
    Toml(toml_edit::DocumentMut),
}

impl Doc {
    fn parse(format: &RegistrationFormat, text: &str, exists: bool) -> Result<Doc, String> {
        let client = format.client.display_name();
        let blank = text.trim().is_empty();
        match format.syntax {
            Syntax::Json {
                comments,
                trailing_commas,
            } => {
                let text = if !exists || (blank && format.empty_file_is_empty) {
                    "{}"
                } else if blank {
                    return Err(format!(
                        "is empty, which {client} does not read as a configuration; write `{{}}` \
                         into it or remove it"
                    ));
                } else {
                    text
                };
                let options = jsonc_parser::ParseOptions {
                    allow_comments: comments,
                    allow_loose_object_property_names: false,
                    allow_trailing_commas: trailing_commas,
                    allow_missing_commas: false,
                    allow_single_quoted_strings: false,
                    allow_hexadecimal_numbers: false,
                    allow_unary_plus_numbers: false,
                    allow_bare_decimal_point_numbers: false,
                    allow_non_finite_numbers: false,
                    allow_extended_string_escapes: false,
                };
                let invalid = |e: jsonc_parser::errors::ParseError| {
                    format!(
                        "is not valid {} ({e}), so {client} would not read it either: fix it \
                         first",
                        if comments {
                            "JSON with comments"
                        } else {
                            "JSON"
                        }
                    )
                };
                // The syntax tree's parser takes comments whatever the options say, so the
                // options are checked by a plain parse first.
                jsonc_parser::parse_to_ast(text, &Default::default(), &options).map_err(invalid)?;
                let root =
                    jsonc_parser::cst::CstRootNode::parse(text, &options).map_err(invalid)?;
                if root.object_value().is_none() {
                    return Err(format!(
                        "its top level is not a JSON object, which {client} needs: fix it first"
                    ));
                }
                Ok(Doc::Json(root))
            }
            Syntax::Toml => {
                let doc = text.parse::<toml_edit::DocumentMut>().map_err(|e| {
                    format!(
                        "is not valid TOML ({}), so {client} would not read it either: fix it \
                         first",
                        e.to_string().trim_end()
                    )
                })?;
                Ok(Doc::Toml(doc))
            }
        }
    }

    /// The block's entries as JSON values, or `None` when there is no block.
    fn entries(&self, block: &str) -> Result<Option<Vec<(String, Value)>>, String> {
        let mut out: Vec<(String, Value)> = Vec::new();
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                let Some(prop) = root.get(block) else {
                    return Ok(None);
                };
                let Some(obj) = prop.object_value() else {
                    return Err(format!(
                        "`{block}` is not an object: fix it first (every MCP server is a key in it)"
                    ));
                };
                for p in obj.properties() {
                    let name = p.decoded_name().unwrap_or_default();
                    let value = p
                        .value()
                        .and_then(|v| v.to_serde_value())
                        .unwrap_or(Value::Null);
                    if out.iter().any(|(n, _)| *n == name) {
                        return Err(duplicate(block, &name));
                    }
                    out.push((name, value));
                }
            }
            Doc::Toml(doc) => {
                let Some(item) = doc.get(block) else {
                    return Ok(None);
                };
                let Some(table) = item.as_table_like() else {
                    return Err(format!(
                        "`{block}` is not a table: fix it first (every MCP server is a table in it)"
                    ));
                };
                for (name, item) in table.iter() {
                    out.push((name.to_string(), toml_item_json(item)));
                }
            }
        }
        Ok(Some(out))
    }

    fn set(&mut self, block: &str, name: &str, node: &Node) {
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                let obj = root.object_value_or_set(block);
                match obj.get(name) {
                    Some(prop) => prop.set_value(cst_value(node)),
                    None => {
                        obj.append(name, cst_value(node));
                    }
                }
            }
            Doc::Toml(doc) => {
                if doc.get(block).is_none() {
                    let mut t = toml_edit::Table::new();
                    t.set_implicit(true);
                    doc.insert(block, toml_edit::Item::Table(t));
                }
                let Some(item) = doc.get_mut(block) else {
                    return;
                };
                match item {
                    toml_edit::Item::Table(t) => match t.get_mut(name) {
                        Some(toml_edit::Item::Table(existing)) => {
                            existing.clear();
                            fill_table(existing, node);
                        }
                        _ => {
                            let mut table = toml_edit::Table::new();
                            fill_table(&mut table, node);
                            t.insert(name, toml_edit::Item::Table(table));
                        }
                    },
                    other => {
                        if let Some(t) = other.as_table_like_mut() {
                            t.insert(name, toml_edit::value(toml_inline(node)));
                        }
                    }
                }
            }
        }
    }

    fn remove(&mut self, block: &str, name: &str) {
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                if let Some(prop) = root.object_value(block).and_then(|o| o.get(name)) {
                    prop.remove();
                }
            }
            Doc::Toml(doc) => {
                if let Some(t) = doc.get_mut(block).and_then(|i| i.as_table_like_mut()) {
                    t.remove(name);
                }
            }
        }
    }

    fn remove_block_if_empty(&mut self, block: &str) {
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                if let Some(prop) = root.get(block)
                    && prop
                        .object_value()
                        .is_some_and(|o| o.properties().is_empty())
                {
                    prop.remove();
                }
            }
            Doc::Toml(doc) => {
                if doc
                    .get(block)
                    .and_then(|i| i.as_table_like())
                    .is_some_and(|t| t.is_empty())
                {
                    doc.remove(block);
                }
            }
        }
    }

    /// The text; a new file (`created`) ends with a newline.
    fn render(&self, created: bool) -> String {
        let mut text = match self {
            Doc::Json(root) => root.to_string(),
            Doc::Toml(doc) => doc.to_string(),
        };
        if created && !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

fn duplicate(block: &str, name: &str) -> String {
    format!(
        "`{block}` names MCP server `{}` twice, so which one the client uses is unclear: \
         remove one",
        name.escape_debug()
    )
}

fn cst_value(node: &Node) -> jsonc_parser::cst::CstInputValue {
    use jsonc_parser::cst::CstInputValue as V;
    match node {
        Node::String(s) => V::String(s.clone()),
        Node::Bool(b) => V::Bool(*b),
        Node::Array(items) => V::Array(items.iter().map(cst_value).collect()),
        Node::Object(pairs) => V::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.clone(), cst_value(v)))
                .collect(),
        ),
    }
}

fn fill_table(table: &mut toml_edit::Table, node: &Node) {
    if let Node::Object(pairs) = node {
        for (k, v) in pairs {
            table.insert(k, toml_edit::value(toml_inline(v)));
        }
    }
}

fn toml_inline(node: &Node) -> toml_edit::Value {
    match node {
        Node::String(s) => s.as_str().into(),
        Node::Bool(b) => (*b).into(),
        Node::Array(items) => {
            let mut a = toml_edit::Array::new();
            for item in items {
                a.push(toml_inline(item));
            }
            toml_edit::Value::Array(a)
        }
        Node::Object(pairs) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in pairs {
                t.insert(k, toml_inline(v));
            }
            toml_edit::Value::InlineTable(t)
        }
    }
}

/// A TOML item as the JSON value it maps to (datetimes as their TOML text).
fn toml_item_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::None => Value::Null,
        toml_edit::Item::Value(v) => toml_value_json(v),
        toml_edit::Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_item_json(v)))
                .collect(),
        ),
        toml_edit::Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| {
                    Value::Object(
                        t.iter()
                            .map(|(k, v)| (k.to_string(), toml_item_json(v)))
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}

fn toml_value_json(v: &toml_edit::Value) -> Value {
    match v {
        toml_edit::Value::String(s) => Value::String(s.value().clone()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => serde_json::Number::from_f64(*f.value())
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.value().to_string())),
        toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => Value::String(d.value().to_string()),
        toml_edit::Value::Array(a) => Value::Array(a.iter().map(toml_value_json).collect()),
        toml_edit::Value::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value_json(v)))
                .collect(),
        ),
    }
}
