//! Writing a config safely: the atomic write that keeps its permissions, the lock beside it,
//! and whether this user may write it.

use std::fs;
use std::io::{self, Write as _};
use std::path::Path;

use super::{InstallError, error};

/// Whether the mode bits of `perms` let this process write `path`: the owner's write bit
/// when we own it, else the group's when we are in its group, else the others'. Mode bits,
/// not `access(2)`: for root `access` says yes to every file, but a 0444 file is its
/// owner's way of saying "do not change", which the atomic rename would otherwise ignore.
#[cfg(unix)]
pub(super) fn writable_by_us(path: &Path, perms: &fs::Permissions) -> bool {
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
pub(super) fn writable_by_us(_path: &Path, perms: &fs::Permissions) -> bool {
    !perms.readonly()
}

/// Writes `bytes` to `path` by a rename from a synced temporary file in the same directory,
/// with `perms` (the replaced file's) when given.
pub(super) fn write_atomic(
    path: &Path,
    bytes: &[u8],
    perms: Option<&fs::Permissions>,
) -> io::Result<()> {
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
pub(super) struct Lock(Option<fs::File>);

impl Lock {
    pub(super) fn take(config: &Path) -> Result<Lock, InstallError> {
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
