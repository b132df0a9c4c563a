//! How text from outside is shown: which characters a one-line text may not hold
//! ([`is_forbidden_char`]), and the one escaping every report, error and warning of this
//! crate uses for user input ([`printable`], and [`ShownPath`] for paths), so a file name,
//! key or value cannot forge or reorder a report line or send terminal escapes.
//!
//! Always compiled (the lean library's errors show paths through it too), and compiled into
//! `build.rs` through `#[path]`, as the registry rules use it. It depends on `std` alone.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` may not appear in a one-line text: a Unicode control character (C0, DEL, C1),
/// a line/paragraph separator (U+2028, U+2029), or an invisible character that can make text
/// read other than it is: every `Default_Ignorable_Code_Point` of Unicode 16's
/// `DerivedCoreProperties.txt` (zero-width characters, joiners, bidirectional controls,
/// variation selectors, Hangul fillers, tag characters, …) and every other format character
/// (general category `Cf`).
pub fn is_forbidden_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c as u32,
            // Default_Ignorable_Code_Point
            0x00AD
                | 0x034F
                | 0x061C
                | 0x115F..=0x1160
                | 0x17B4..=0x17B5
                | 0x180B..=0x180F
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x206F
                | 0x3164
                | 0xFE00..=0xFE0F
                | 0xFEFF
                | 0xFFA0
                | 0xFFF0..=0xFFF8
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE0FFF
                // Other format characters (Cf), and the line and paragraph separators
                | 0x0600..=0x0605
                | 0x06DD
                | 0x070F
                | 0x0890..=0x0891
                | 0x08E2
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0xFFF9..=0xFFFB
                | 0x2028..=0x2029
        )
}

/// What is wrong with `s` as one line of text, if anything: `"contains <name>"` for its first
/// [`is_forbidden_char`], named in words ([`char_name`]).
#[cfg_attr(not(feature = "validate"), allow(dead_code))]
pub(crate) fn forbidden_char_problem(s: &str) -> Option<String> {
    s.chars()
        .find(|&c| is_forbidden_char(c))
        .map(|c| format!("contains {}", char_name(c)))
}

/// `c` named in words for a message, with its code point: `a line break (U+000A)`, `a tab
/// (U+0009)`, `a zero width space (U+200B)`, `a right-to-left override (U+202E)`; a
/// character without a common name is `a control character (U+0085)` or `an invisible
/// character (U+E0001)`. Names follow the Unicode character names, in lower case.
pub fn char_name(c: char) -> String {
    let name = match c as u32 {
        0x00 => "a null character",
        0x07 => "a bell character",
        0x08 => "a backspace",
        0x09 => "a tab",
        0x0A => "a line break",
        0x0B => "a vertical tab",
        0x0C => "a form feed",
        0x0D => "a carriage return",
        0x1B => "an escape character",
        0x7F => "a delete character",
        0x85 => "a next line control",
        0xAD => "a soft hyphen",
        0x200B => "a zero width space",
        0x200C => "a zero width non-joiner",
        0x200D => "a zero width joiner",
        0x200E => "a left-to-right mark",
        0x200F => "a right-to-left mark",
        0x202A => "a left-to-right embedding",
        0x202B => "a right-to-left embedding",
        0x202C => "a pop directional formatting",
        0x202D => "a left-to-right override",
        0x202E => "a right-to-left override",
        0x2028 => "a line separator",
        0x2029 => "a paragraph separator",
        0x2060 => "a word joiner",
        0x2066 => "a left-to-right isolate",
        0x2067 => "a right-to-left isolate",
        0x2068 => "a first strong isolate",
        0x2069 => "a pop directional isolate",
        0xFEFF => "a zero width no-break space (byte order mark)",
        _ if c.is_control() => "a control character",
        _ => "an invisible character",
    };
    format!("{name} (U+{:04X})", c as u32)
}

/// `s` with every control or invisible character ([`is_forbidden_char`]) escaped — `\n`,
/// `\r`, `\t`, others as `\u{…}` — so a file name, key or value taken from user input
/// cannot break a report line, forge one, reorder it, or send terminal escapes. Other text is
/// returned as is.
pub fn printable(s: &str) -> Cow<'_, str> {
    let bad = is_forbidden_char;
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if bad(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The longest line [`OutputLines`] holds back waiting for its end, in bytes: a client that
/// never ends a line is shown in pieces of this size rather than held in memory.
pub const MAX_OUTPUT_LINE: usize = 16 * 1024;

/// A client's output shown to a person, line by line: split at `\n` and `\r`, blank lines
/// dropped, and every other control or invisible character escaped ([`printable`]: ESC as
/// `\u{1b}`, BEL as `\u{7}`, C1 controls, bidirectional overrides), so what a client (or a
/// model through it) prints cannot move the cursor, retitle or clear the operator's
/// terminal, or reorder a line. A UTF-8 sequence split between two chunks is decoded whole;
/// invalid bytes are shown as U+FFFD.
///
/// ```
/// use kcap_mcp_registry::text::OutputLines;
///
/// let mut lines = OutputLines::default();
/// assert_eq!(lines.feed(b"\x1b]0;x\x07title\r\n\xc3"), [r"\u{1b}]0;x\u{7}title"]);
/// assert_eq!(lines.feed(b"\xa9\x1b[2J\n\nend"), ["\u{e9}\\u{1b}[2J"]);
/// assert_eq!(lines.rest().as_deref(), Some("end"));
/// ```
#[derive(Debug, Default)]
pub struct OutputLines {
    /// The bytes after the last line break, not yet shown.
    partial: Vec<u8>,
}

impl OutputLines {
    /// The lines `bytes` completes, each escaped; a line longer than [`MAX_OUTPUT_LINE`] is
    /// shown in pieces.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut done = Vec::new();
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                done.extend(self.take(self.partial.len()));
            } else {
                self.partial.push(b);
                if self.partial.len() >= MAX_OUTPUT_LINE {
                    let cut = utf8_boundary(&self.partial);
                    done.extend(self.take(cut));
                }
            }
        }
        done
    }

    /// What is left after the last line break (at the end of the output), escaped, unless
    /// blank.
    pub fn rest(&mut self) -> Option<String> {
        self.take(self.partial.len())
    }

    /// The first `n` bytes of the partial line, shown, unless blank.
    fn take(&mut self, n: usize) -> Option<String> {
        let line: Vec<u8> = self.partial.drain(..n).collect();
        let text = String::from_utf8_lossy(&line);
        (!text.trim().is_empty()).then(|| printable(&text).into_owned())
    }
}

/// Where `bytes` may be cut without splitting a UTF-8 sequence at its end (at most 3 bytes
/// before the end; anywhere for bytes that are not UTF-8).
fn utf8_boundary(bytes: &[u8]) -> usize {
    let len = bytes.len();
    (len.saturating_sub(3)..len)
        .rev()
        .find(|&i| bytes[i] & 0xC0 == 0xC0)
        .filter(|&i| std::str::from_utf8(&bytes[i..]).is_err())
        .unwrap_or(len)
}

/// A path shown to a person, escaped as [`printable`] escapes text: the one way this crate
/// prints a file or directory name, in every output format, so a hostile name (one holding
/// a newline and a forged `error[…]:` line, a terminal escape, or a bidirectional control)
/// cannot break, forge or reorder a report line. Paths stay `Path`s until they are shown
/// through it. A name that is not UTF-8 is shown lossily (`U+FFFD` for each bad sequence).
///
/// ```
/// use std::path::Path;
/// use kcap_mcp_registry::text::ShownPath;
///
/// let hostile = Path::new("x\nerror[fake]: forged.json\u{202e}");
/// assert_eq!(ShownPath(hostile).to_string(), r"x\nerror[fake]: forged.json\u{202e}");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ShownPath<'a>(pub &'a std::path::Path);

impl std::fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&printable(&self.0.to_string_lossy()))
    }
}

/// `e` and each of its causes ([`std::error::Error::source`]), joined by `: `: the one line
/// a command prints for an error, since each layer displays itself only and leaves its cause
/// to `source()` (the convention of `std::error::Error`), e.g. `cannot read registry/x.toml:
/// Permission denied (os error 13)`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// `value` as pretty JSON (two-space indent, `serde_json`'s) with a trailing newline: the
/// form of every JSON file and output this crate writes.
pub(crate) fn pretty_json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    let mut out = serde_json::to_string_pretty(value).expect("JSON values serialize");
    out.push('\n');
    out
}
