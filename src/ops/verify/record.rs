//! `verify`'s record of its passes on this machine: what lets the strict policy launch a
//! client version this crate's tests do not prove ([`ClientVersion::verified_here`]).
//!
//! When `verify <client>` holds in every scenario, it records the pass in
//! `$XDG_STATE_HOME/kcap-mcp-registry/verified/<client>.json` (`$HOME/.local/state/…` when
//! `XDG_STATE_HOME` is unset or not absolute): one entry per client version, naming the
//! binary it ran (its canonical path: symlinks, such as npm's `node_modules/.bin/<client>`,
//! followed to the file actually executed), that file's SHA-256 (for a script launcher, the
//! script), this crate's version and the time. The file is written whole and renamed into
//! place (mode 0600); the folder is made mode 0700, and a folder or file not owned by this
//! user, or writable by its group or others, is refused, never read.
//!
//! An entry counts for a launch of that version only while the binary is the same path with
//! the same SHA-256 and this crate is the same version: an update of either needs `verify`
//! again.

use std::fmt;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::clients::Client;
use crate::clients::version::ClientVersion;

/// This crate's version, which an entry names: another one does not count.
pub const KCAP_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The largest record file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One recorded pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Pass {
    /// The client version (`2.1.332`).
    pub version: String,
    /// The file executed, canonical.
    pub binary: PathBuf,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// The crate version that verified it ([`KCAP_VERSION`]).
    pub kcap_version: String,
    /// When, in seconds since the Unix epoch.
    pub recorded_at: u64,
}

/// A record file: the client's passes, one per version.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordFile {
    client: String,
    passes: Vec<Pass>,
}

/// The file a launch runs for a client binary: its canonical path and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binary {
    /// The file executed, canonical (a bare name found on `PATH`, symlinks followed).
    pub path: PathBuf,
    /// Its SHA-256, hex.
    pub sha256: String,
}

impl Binary {
    /// `bin` (a path, or a bare name looked up on `PATH`), followed to the file executed,
    /// and hashed.
    ///
    /// # Errors
    /// [`RecordError::Io`] when it cannot be found or read.
    pub fn identify(bin: &Path) -> Result<Binary, RecordError> {
        let found = on_path(bin);
        let path = std::fs::canonicalize(&found).map_err(RecordError::io(&found))?;
        let mut file = std::fs::File::open(&path).map_err(RecordError::io(&path))?;
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = file.read(&mut buf).map_err(RecordError::io(&path))?;
            if n == 0 {
                break;
            }
            hash.update(&buf[..n]);
        }
        let sha256 = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(Binary { path, sha256 })
    }
}

/// `bin` as given, or for a bare name the first executable of that name on `PATH`.
fn on_path(bin: &Path) -> PathBuf {
    if bin.components().count() != 1 || bin.is_absolute() {
        return bin.to_owned();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(bin))
        .find(|p| p.is_file())
        .unwrap_or_else(|| bin.to_owned())
}

/// Why the record cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordError {
    /// Neither `XDG_STATE_HOME` (absolute) nor `HOME` is set.
    NoStateDir,
    /// The folder or the file is not this user's, or others may write it.
    Insecure {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// It cannot be read or written.
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a record.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        source: serde_json::Error,
    },
}

impl RecordError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError {
        let path = path.to_owned();
        move |source| RecordError::Io { path, source }
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::text::ShownPath;
        match self {
            RecordError::NoStateDir => {
                f.write_str("no folder for verify's record: set XDG_STATE_HOME (absolute) or HOME")
            }
            RecordError::Insecure { path, problem } => write!(
                f,
                "verify's record {} {problem}, so another user could forge a pass; make it \
                 yours and not writable by its group or others, or remove it",
                ShownPath(path)
            ),
            RecordError::Io { path, .. } => write!(f, "verify's record {}", ShownPath(path)),
            RecordError::Malformed { path, .. } => write!(
                f,
                "verify's record {} is not one (remove it; the next verify writes it anew)",
                ShownPath(path)
            ),
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordError::Io { source, .. } => Some(source),
            RecordError::Malformed { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The record folder: `$XDG_STATE_HOME/kcap-mcp-registry/verified` (when absolute), else
/// `$HOME/.local/state/kcap-mcp-registry/verified`.
///
/// # Errors
/// [`RecordError::NoStateDir`].
pub fn default_dir() -> Result<PathBuf, RecordError> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            let home = PathBuf::from(std::env::var_os("HOME")?);
            home.is_absolute().then(|| home.join(".local/state"))
        })
        .ok_or(RecordError::NoStateDir)?;
    Ok(state.join("kcap-mcp-registry/verified"))
}

/// Refuses `path` when it is not this user's or its group or others may write it (or, for a
/// file, when it is not a regular file: a symlink is refused).
fn check_owned(path: &Path, dir: bool) -> Result<(), RecordError> {
    let meta = std::fs::symlink_metadata(path).map_err(RecordError::io(path))?;
    let me = rustix::process::geteuid().as_raw();
    let problem = if dir && !meta.is_dir() {
        "is not a folder".to_owned()
    } else if !dir && !meta.is_file() {
        "is not a regular file".to_owned()
    } else if meta.uid() != me {
        format!("belongs to user {}, not to this one ({me})", meta.uid())
    } else if meta.mode() & 0o022 != 0 {
        format!(
            "is writable by its group or others (mode {:o})",
            meta.mode() & 0o777
        )
    } else {
        return Ok(());
    };
    Err(RecordError::Insecure {
        path: path.to_owned(),
        problem,
    })
}

/// The passes recorded for `client` in `dir`; none when the file does not exist.
fn read(dir: &Path, client: Client) -> Result<RecordFile, RecordError> {
    let file = dir.join(format!("{}.json", client.name()));
    if std::fs::symlink_metadata(dir).is_err() || std::fs::symlink_metadata(&file).is_err() {
        return Ok(RecordFile {
            client: client.name().to_owned(),
            passes: Vec::new(),
        });
    }
    check_owned(dir, true)?;
    check_owned(&file, false)?;
    let mut text = String::new();
    std::fs::File::open(&file)
        .and_then(|f| f.take(MAX_FILE_BYTES).read_to_string(&mut text))
        .map_err(RecordError::io(&file))?;
    serde_json::from_str(&text).map_err(|source| RecordError::Malformed { path: file, source })
}

/// The pass recorded in `dir` for `client` at `version`, if one counts for `binary`: the
/// same file (path and SHA-256) and this crate's version.
///
/// # Errors
/// [`RecordError`] for a record that cannot be read or is not safe to trust.
pub fn lookup(
    dir: &Path,
    client: Client,
    binary: &Binary,
    version: &ClientVersion,
) -> Result<Option<Pass>, RecordError> {
    let Some(number) = version.number() else {
        return Ok(None);
    };
    Ok(read(dir, client)?.passes.into_iter().find(|p| {
        p.version == number
            && p.binary == binary.path
            && p.sha256 == binary.sha256
            && p.kcap_version == KCAP_VERSION
    }))
}

/// Records in `dir` that `verify` passed for `client` at `version` with `binary`, replacing
/// the entry of that version; returns the file.
///
/// # Errors
/// [`RecordError`] when the folder or file cannot be made or is not safe to trust, or when
/// `version` holds no version number.
pub fn record(
    dir: &Path,
    client: Client,
    binary: &Binary,
    version: &ClientVersion,
) -> Result<PathBuf, RecordError> {
    let Some(number) = version.number() else {
        return Err(RecordError::Io {
            path: binary.path.clone(),
            source: std::io::Error::other(format!(
                "`--version` printed no version number ({:?})",
                version.reported()
            )),
        });
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(RecordError::io(dir))?;
    check_owned(dir, true)?;
    let mut file = read(dir, client)?;
    file.client = client.name().to_owned();
    file.passes.retain(|p| p.version != number);
    file.passes.push(Pass {
        version: number.to_owned(),
        binary: binary.path.clone(),
        sha256: binary.sha256.clone(),
        kcap_version: KCAP_VERSION.to_owned(),
        recorded_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    });
    file.passes.sort_by(|a, b| a.version.cmp(&b.version));
    let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
    let path = dir.join(format!("{}.json", client.name()));
    // A new file of mode 0600 in the same folder, renamed over the old one.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(RecordError::io(dir))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(RecordError::io(tmp.path()))?;
    tmp.persist(&path)
        .map_err(|e| RecordError::io(&path)(e.error))?;
    Ok(path)
}
