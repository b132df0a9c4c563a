//! Input decoding shared by every file this crate reads (registry files, JSON launch
//! payloads, Codex inventories, Claude Code and Codex registration files).
//!
//! Exactly one leading UTF-8 byte order mark (U+FEFF, bytes `EF BB BF`) is dropped, as both
//! pinned clients do: Claude Code 2.1.197 loads a `.mcp.json` or `~/.claude.json` that starts
//! with one BOM, and Codex CLI 0.169.0 loads a `config.toml` that starts with one (measured
//! with `claude mcp list` and `codex mcp list --json`, 2026-11-30). A second BOM is left in
//! place, so the parser reports it as a syntax error, as both clients do ("MCP config is not a
//! valid JSON"; Codex: "key with no value, expected `=`" at 1:3).

/// The UTF-8 byte order mark.
pub const BOM: char = '\u{feff}';

/// `text` without one leading [`BOM`].
///
/// ```
/// use kcap_mcp_registry::decode::strip_bom;
///
/// assert_eq!(strip_bom("\u{feff}{}"), "{}");
/// assert_eq!(strip_bom("\u{feff}\u{feff}{}"), "\u{feff}{}");
/// assert_eq!(strip_bom("{}"), "{}");
/// ```
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// `bytes` as UTF-8 text without one leading [`BOM`].
///
/// # Errors
/// [`std::str::Utf8Error`] when `bytes` is not UTF-8 (its `valid_up_to` is the byte offset
/// of the first invalid byte).
pub fn decode_utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    std::str::from_utf8(bytes).map(strip_bom)
}

/// Reads the whole file at `path`, refusing anything that is not a regular file (after
/// following symbolic links) before opening it: a FIFO would block the reader forever, a
/// device could stream without end, and a directory cannot be read at all.
///
/// # Errors
/// The `fs::metadata` or `fs::read` error (a missing file is [`std::io::ErrorKind::NotFound`]),
/// or [`std::io::ErrorKind::InvalidInput`] naming what the path is instead.
pub fn read_regular(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if let Some(what) = not_regular(&meta) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {what}, not a regular file; give the path of a regular file"),
        ));
    }
    std::fs::read(path)
}

/// What `meta` describes when it is not a regular file (`a FIFO`, `a directory`, …).
pub fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    let ft = meta.file_type();
    if ft.is_file() {
        return None;
    }
    if ft.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if ft.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
        if ft.is_char_device() || ft.is_block_device() {
            return Some("a device");
        }
    }
    Some("a special file")
}
