//! Reading a registry directory: its `*.toml` files (in parallel for large registries) and
//! the stray files and subdirectories rule `stray-file` reports.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::text::printable;

/// The registry directory a checker run without one uses: `registry` in `cwd` or its
/// nearest ancestor that has one, as a path relative to `cwd` (`registry`,
/// `../registry`, …) so reports name files as the user would type them. `None` when no
/// ancestor has one.
pub fn find_registry_dir(cwd: &Path) -> Option<PathBuf> {
    let mut relative = PathBuf::new();
    for ancestor in cwd.ancestors() {
        if ancestor.join("registry").is_dir() {
            return Some(relative.join("registry"));
        }
        relative.push("..");
    }
    None
}

/// A registry file as read from disk, before validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The path as diagnostics show it, e.g. `registry/kcap-review.toml`.
    pub path: String,
    /// The file name without `.toml` (lossy UTF-8 for non-UTF-8 names).
    pub stem: String,
    /// The raw bytes.
    pub bytes: Vec<u8>,
}

/// Something in a registry directory that is not read as a registry entry, and is not a
/// `README*` file or a dotfile (rule `stray-file`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stray {
    /// The path as diagnostics show it, e.g. `registry/kcap-search.tml`.
    pub path: String,
    /// `true` for a subdirectory holding `.toml` files, `false` for a file.
    pub is_dir: bool,
}

/// The content of a registry directory: the registry files, sorted by path, and the
/// [`Stray`]s, sorted by path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryDir {
    /// Every `*.toml` file (extension in any case) directly in the directory.
    pub files: Vec<SourceFile>,
    /// Every other file and every subdirectory holding `.toml` files, except `README*`
    /// files and names starting with `.`.
    pub strays: Vec<Stray>,
}

/// Reading the registry directory failed; nothing was validated.
#[derive(Debug)]
pub struct LoadError {
    /// The directory or file that could not be read.
    pub path: PathBuf,
    /// The I/O error.
    pub source: io::Error,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The I/O error is the `source()`, not repeated here (each layer displays itself).
        let path = self.path.display().to_string();
        write!(f, "cannot read {}", printable(&path))
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn is_toml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

/// Reads every `*.toml` file (extension in any case) directly in `dir`, sorted by file name,
/// and lists the strays (see [`RegistryDir::strays`]). A `*.toml` entry that is not a
/// regular file (after following symlinks) is an error, not skipped. Diagnostic paths are
/// `dir` joined with the file name, as given.
///
/// # Errors
/// [`LoadError`] when `dir` or one of its `.toml` files cannot be read.
pub fn load_dir(dir: &Path) -> Result<RegistryDir, LoadError> {
    load(dir, dir)
}

/// [`load_dir`] reading `dir` and showing paths as `shown` joined with the file name.
pub(super) fn load(dir: &Path, shown: &Path) -> Result<RegistryDir, LoadError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError { path, source }
    };
    let mut paths = Vec::new();
    let mut strays = Vec::new();
    for item in std::fs::read_dir(dir).map_err(err(dir))? {
        let item = item.map_err(err(dir))?;
        let path = item.path();
        let name = item.file_name();
        let name_str = name.to_string_lossy();
        // The directory entry's type costs no system call; a symlink is followed.
        let (is_file, is_dir) = match item.file_type() {
            Ok(t) if !t.is_symlink() => (t.is_file(), t.is_dir()),
            _ => (path.is_file(), path.is_dir()),
        };
        if is_toml(&path) {
            if !is_file {
                // Never silently skipped, never opened (a FIFO would block).
                return Err(LoadError {
                    path,
                    source: io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "not a regular file (a directory, FIFO, socket, or a symlink that leads \
                         nowhere); registry entries must be regular `.toml` files",
                    ),
                });
            }
            paths.push(path);
        } else if name_str.starts_with('.') {
            // Dotfiles and dot-directories (`.gitkeep`, `.git`) are not the registry's.
        } else if is_dir {
            if holds_toml(&path) {
                strays.push(Stray {
                    path: shown.join(&name).display().to_string(),
                    is_dir: true,
                });
            }
        } else if !name_str.to_ascii_uppercase().starts_with("README") {
            strays.push(Stray {
                path: shown.join(&name).display().to_string(),
                is_dir: false,
            });
        }
    }
    let read = |path: &PathBuf| {
        let stem = path
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let bytes = read_file(path).map_err(err(path))?;
        let name = path.file_name().expect("read_dir yields named entries");
        Ok(SourceFile {
            path: shown.join(name).display().to_string(),
            stem,
            bytes,
        })
    };
    let mut files = parallel_map(&paths, read)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    strays.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(RegistryDir { files, strays })
}

/// Whether `dir` or a directory below it (not through symlinks or dot-directories) holds a
/// `.toml` file. An unreadable directory counts as holding none.
fn holds_toml(dir: &Path) -> bool {
    let Ok(items) = std::fs::read_dir(dir) else {
        return false;
    };
    items.flatten().any(|item| {
        let path = item.path();
        let hidden = item.file_name().to_string_lossy().starts_with('.');
        match item.file_type() {
            Ok(t) if t.is_dir() => !hidden && holds_toml(&path),
            Ok(_) => !hidden && is_toml(&path),
            Err(_) => false,
        }
    })
}

/// The most bytes a registry file may hold: 1 MiB, a thousand times a real entry (a few
/// hundred bytes). Checked while reading, so a huge file costs this much memory, not its size.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// `fs::read` without asking the file's size first (`fs::read` and `read_to_end` spend a
/// `statx`, and `read_to_end` an `lseek`, per file): open, read until end of file into a
/// stack buffer, close, and copy out exactly the bytes read. Reads at most
/// [`MAX_FILE_BYTES`] + 1 bytes.
///
/// # Errors
/// The OS error of `open` or `read`; [`io::ErrorKind::FileTooLarge`] when the file holds more
/// than [`MAX_FILE_BYTES`].
fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    use io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut buf = [0u8; 8192];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => return Ok(buf[..len].to_vec()),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Larger than any real registry file: read the rest as `fs::read` would, up to the bound.
    let mut bytes = buf.to_vec();
    let rest = MAX_FILE_BYTES + 1 - bytes.len() as u64;
    file.take(rest).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "larger than {} KiB, the most a registry file may hold (an entry is a few hundred \
                 bytes): move what is not one MCP server's entry out of the registry directory",
                MAX_FILE_BYTES / 1024
            ),
        ));
    }
    Ok(bytes)
}

/// Files one thread takes at least: below this, threads cost more than they save.
const FILES_PER_THREAD: usize = 256;

/// `items.iter().map(f).collect()`, on up to `available_parallelism` scoped threads for
/// large inputs. Results keep the order of `items`; a panic in `f` is re-raised.
pub(super) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads = cores.min(items.len() / FILES_PER_THREAD);
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|chunk| scope.spawn(move || chunk.iter().map(f).collect::<Vec<R>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
