//! Text checks shared by the rules and the reports: which characters a one-line text may not
//! hold ([`is_forbidden_char`]), and how user input is shown so it cannot forge or reorder a
//! report line ([`printable`]).

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

/// What is wrong with `s` as one line of text, if anything: `"contains \u{…}, a control or
/// invisible character"` for its first [`is_forbidden_char`].
pub(crate) fn forbidden_char_problem(s: &str) -> Option<String> {
    s.chars().find(|&c| is_forbidden_char(c)).map(|c| {
        format!(
            "contains {}, a control or invisible character",
            c.escape_unicode()
        )
    })
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
