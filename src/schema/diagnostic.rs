//! A registry rule violation ([`Diagnostic`]) and its rustc-style rendering.
//!
//! `build.rs` compiles this file too (through `#[path]`), so a broken registry fails the build
//! with exactly the text `kcap-mcp-registry check` prints.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};

use super::rules::Rule;
use crate::text::is_forbidden_char;
pub use crate::text::{ShownPath, printable};

/// One violation of a registry rule, located in a registry file (or in the registry
/// directory, for rules about the directory as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule that was broken.
    pub rule: Rule,
    /// The file (or directory) as the caller named it, e.g. `registry/kcap-review.toml`.
    pub path: String,
    /// Where in the file; `None` for diagnostics about the directory or a whole file
    /// (`registry-empty`, `result-channel-missing`, `stray-file`).
    pub span: Option<SourceSpan>,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, in one sentence.
    pub help: String,
}

/// The offending key or value of a [`Diagnostic`]: a byte range in its file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSpan {
    /// Byte range in [`SourceSpan::source`].
    pub range: Range<usize>,
    /// The file's text (after a leading UTF-8 BOM is removed) with its line index, shared by
    /// all diagnostics of the file.
    pub source: Arc<SourceText>,
}

/// A 1-based position range in a file: `line`/`column` of the first character and
/// `end_line`/`end_column` just past the last one. Columns count Unicode scalar values, as
/// rustc does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Line of the first offending character, from 1.
    pub line: usize,
    /// Column of the first offending character, from 1.
    pub column: usize,
    /// Line just past the last offending character, from 1.
    pub end_line: usize,
    /// Column just past the last offending character, from 1 (exclusive end).
    pub end_column: usize,
}

/// A registry file's text and the byte offset of each line start, so a diagnostic finds its
/// line and column in O(log n) whatever the number of diagnostics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceText {
    text: String,
    line_starts: Vec<usize>,
    /// Whether each line is ASCII, where a column is a byte count.
    ascii_lines: Vec<bool>,
}

impl SourceText {
    /// Indexes `text`.
    pub fn new(text: String) -> Self {
        let line_starts: Vec<usize> = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let ascii_lines = line_starts
            .iter()
            .zip(line_starts.iter().skip(1).chain([&text.len()]))
            .map(|(&start, &end)| text.as_bytes()[start..end].is_ascii())
            .collect();
        SourceText {
            text,
            line_starts,
            ascii_lines,
        }
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// 1-based line and character column of byte `offset` (clamped to the text, moved back
    /// to a character boundary).
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let column = if self.ascii_lines[line - 1] {
            offset - start
        } else {
            self.text[start..offset].chars().count()
        };
        (line, column + 1)
    }

    /// The 1-based [`Location`] of the byte range `range` (each end as [`Self::line_column`]).
    pub fn location(&self, range: Range<usize>) -> Location {
        let (line, column) = self.line_column(range.start);
        let (end_line, end_column) = self.line_column(range.end);
        Location {
            line,
            column,
            end_line,
            end_column,
        }
    }

    /// Byte range of 1-based `line`, without its line break.
    fn line_range(&self, line: usize) -> Range<usize> {
        let start = self.line_starts[line - 1];
        let end = self
            .line_starts
            .get(line)
            .map_or(self.text.len(), |&next| next - 1);
        start..end.max(start)
    }
}

/// Longest stretch of source lines a rendered diagnostic quotes, in bytes; a longer one (a
/// minified or generated file) is named by position only.
const MAX_QUOTED_BYTES: usize = 4096;

impl Diagnostic {
    /// The 1-based line and column range of [`Diagnostic::span`], or `None` when the
    /// diagnostic is about the directory.
    pub fn location(&self) -> Option<Location> {
        let SourceSpan { range, source } = self.span.as_ref()?;
        Some(source.location(range.clone()))
    }

    /// Renders this diagnostic as rustc does: `error[rule]: message`, `--> path:line:col`,
    /// the source line with a caret under the span, and a `help:` line. `color` adds ANSI
    /// styles. Ends with a newline. Control characters in the path are escaped
    /// ([`printable`]); only the lines of the span are quoted, and none when they exceed
    /// 4 KiB. In the quoted lines, an invisible or non-ASCII control character is shown as
    /// U+FFFD, one for one (columns and carets stay the file's), and `annotate-snippets`
    /// shows ASCII controls as their control pictures (`␛`), so neither reaches the terminal
    /// raw.
    pub fn render(&self, color: bool) -> String {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        let title = Level::ERROR
            .primary_title(self.message.as_str())
            .id(self.rule.name());
        let path = printable(&self.path);
        let group = match (&self.span, self.location()) {
            (
                Some(SourceSpan {
                    range: span,
                    source,
                }),
                Some(loc),
            ) => {
                let last_line = if span.end > span.start {
                    source.line_column(span.end - 1).0
                } else {
                    loc.line
                };
                let quoted = source.line_range(loc.line).start..source.line_range(last_line).end;
                if quoted.len() <= MAX_QUOTED_BYTES {
                    let shifted =
                        span.start - quoted.start..span.end.min(quoted.end) - quoted.start;
                    let (text, shifted) = visible(&source.text()[quoted], shifted);
                    title.element(
                        Snippet::source(text)
                            .line_start(loc.line)
                            .path(path)
                            .annotation(AnnotationKind::Primary.span(shifted)),
                    )
                } else {
                    title.element(Origin::path(path).line(loc.line).char_column(loc.column))
                }
            }
            _ => title.element(Origin::path(path)),
        };
        let group: Group<'_> = group.element(Level::HELP.message(self.help.as_str()));
        let mut out = renderer.render(&[group]);
        out.push('\n');
        out
    }
}

/// `text` (quoted source lines) with each [`is_forbidden_char`] other than an ASCII control
/// replaced by U+FFFD, and `span` (a byte range in `text`) moved to match.
///
/// `annotate-snippets` 0.12 replaces ASCII controls (with control pictures, `␛`) and the
/// bidirectional embeddings and isolates (with U+FFFD) itself, but shows a zero-width space,
/// a byte order mark, a C1 control, a direction mark and the other invisible characters
/// raw. One character for one keeps every column, so the caret and the `line:column` it
/// prints stay those of the file.
fn visible(text: &str, span: Range<usize>) -> (Cow<'_, str>, Range<usize>) {
    let hidden = |c: char| is_forbidden_char(c) && !c.is_ascii_control();
    if !text.chars().any(hidden) {
        return (Cow::Borrowed(text), span);
    }
    let mut out = String::with_capacity(text.len());
    let (mut start, mut end) = (None, None);
    for (i, c) in text.char_indices() {
        if start.is_none() && i >= span.start {
            start = Some(out.len());
        }
        if end.is_none() && i >= span.end {
            end = Some(out.len());
        }
        out.push(if hidden(c) { '\u{fffd}' } else { c });
    }
    let start = start.unwrap_or(out.len());
    let end = end.unwrap_or(out.len()).max(start);
    (Cow::Owned(out), start..end)
}

/// Renders every diagnostic (see [`Diagnostic::render`]), a blank line between them, then a
/// summary line `error: N registry rule violation(s)`.
pub fn render_all(diagnostics: &[Diagnostic], color: bool) -> String {
    let mut out = String::new();
    for d in diagnostics {
        out.push_str(&d.render(color));
        out.push('\n');
    }
    let n = diagnostics.len();
    out.push_str(&format!(
        "error: {n} registry rule violation{}\n",
        if n == 1 { "" } else { "s" }
    ));
    out
}
