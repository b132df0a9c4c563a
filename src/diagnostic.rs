//! A registry rule violation ([`Diagnostic`]) and its rustc-style rendering.
//!
//! `build.rs` compiles this file too (through `#[path]`), so a broken registry fails the build
//! with exactly the text `kcap-mcp-registry check` prints.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;

use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};

use crate::schema::Rule;

/// One violation of a registry rule, located in a registry file (or in the registry
/// directory, for rules about the directory as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule that was broken.
    pub rule: Rule,
    /// The file (or directory) as the caller named it, e.g. `registry/kcap-review.toml`.
    pub path: String,
    /// Byte range in [`Diagnostic::source`] of the offending key or value; `None` for
    /// diagnostics about the directory (`registry-empty`, `result-channel-missing`).
    pub span: Option<Range<usize>>,
    /// The file's text (after a leading UTF-8 BOM is removed), shared by all diagnostics of
    /// the file; `None` together with `span`.
    pub source: Option<Arc<str>>,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, in one sentence.
    pub help: String,
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

impl Diagnostic {
    /// The 1-based line and column range of [`Diagnostic::span`], or `None` when the
    /// diagnostic is about the directory.
    pub fn location(&self) -> Option<Location> {
        let (source, span) = (self.source.as_deref()?, self.span.as_ref()?);
        let (line, column) = line_column(source, span.start);
        let (end_line, end_column) = line_column(source, span.end);
        Some(Location {
            line,
            column,
            end_line,
            end_column,
        })
    }

    /// Renders this diagnostic as rustc does: `error[rule]: message`, `--> path:line:col`,
    /// the source line with a caret under the span, and a `help:` line. `color` adds ANSI
    /// styles. Ends with a newline.
    pub fn render(&self, color: bool) -> String {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        let title = Level::ERROR
            .primary_title(self.message.as_str())
            .id(self.rule.name());
        let group = match (&self.source, &self.span) {
            (Some(source), Some(span)) => title.element(
                Snippet::source(&**source)
                    .path(printable(&self.path))
                    .annotation(AnnotationKind::Primary.span(span.clone())),
            ),
            _ => title.element(Origin::path(printable(&self.path))),
        };
        let group: Group<'_> = group.element(Level::HELP.message(self.help.as_str()));
        let mut out = renderer.render(&[group]);
        out.push('\n');
        out
    }
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

/// 1-based line and character column of byte `offset` in `source` (clamped to its length).
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

/// `s` with every control character (and U+2028, U+2029) written as a `\u{…}` escape, so a
/// file name or key taken from user input cannot break a report line or forge one. Text
/// without such characters is returned as is.
pub fn printable(s: &str) -> Cow<'_, str> {
    let bad = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
