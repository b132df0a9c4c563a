//! How `check` reports what it found: registry rule violations ([`Diagnostic`]s) and drift
//! between the registry and a client's registration file, as one list of [`Finding`]s in
//! three formats:
//!
//! - human: rustc style (`error[rule]: message`, `--> file:line:col`, `= help: …`), with
//!   colour only on a terminal and never when `NO_COLOR` is set ([`color_enabled`]);
//! - JSON ([`json`]): an array of `{file, line, column, end_line, end_column, rule, severity,
//!   message, help}`;
//! - GitHub Actions workflow commands ([`github`]): one `::error …::message` line each.

use std::ffi::OsStr;

use annotate_snippets::{Group, Level, Origin, Renderer};
use serde::Serialize;

use crate::diagnostic::{self, Diagnostic, Location};

/// The output format of `check` and `doctor` (`--format`), the same in the
/// `kcap-mcp-registry` CLI and the standalone registry checker (`checker/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// rustc style, on stderr (`human`, `diagnostic::render_all`).
    #[value(help = "rustc style, on stderr")]
    Human,
    /// A JSON array on stdout (`json`).
    #[value(help = "A JSON array on stdout")]
    Json,
    /// GitHub Actions workflow commands on stdout (`github`).
    #[value(help = "GitHub Actions workflow commands on stdout")]
    Github,
}

/// Text for the two output streams.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// What goes to standard output.
    pub stdout: String,
    /// What goes to standard error.
    pub stderr: String,
}

/// The report of registry rule violations in `format`: human (the rustc-style diagnostics
/// of [`crate::diagnostic::render_all`]) on stderr, json or github on stdout. `color` applies to human only. The one rendering of a broken registry, in
/// `kcap-mcp-registry check` and in the standalone checker alike.
pub fn violations(diags: &[Diagnostic], format: Format, color: bool) -> Output {
    let findings = || diags.iter().map(Finding::from).collect::<Vec<_>>();
    match format {
        Format::Human => Output {
            stdout: String::new(),
            stderr: diagnostic::render_all(diags, color),
        },
        Format::Json => Output {
            stdout: json(&findings()),
            stderr: String::new(),
        },
        Format::Github => Output {
            stdout: github(&findings()),
            stderr: String::new(),
        },
    }
}

/// The line `check` prints (human format) for a clean registry of `n` entries at `shown`:
/// `ok: 9 registry entries in registry`.
///
/// ```
/// assert_eq!(kcap_mcp_registry::report::ok_line(1, "r"), "ok: 1 registry entry in r");
/// ```
pub fn ok_line(n: usize, shown: &str) -> String {
    format!(
        "ok: {n} registry entr{} in {shown}",
        if n == 1 { "y" } else { "ies" }
    )
}

/// One problem `check` reports: a rule violation or a drift finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The file (or directory) the finding is about, as the user named it.
    pub file: String,
    /// Where in `file`, 1-based; `None` for findings about a whole directory or file.
    pub location: Option<Location>,
    /// The stable kebab-case rule name, e.g. `unknown-key` or `drift-missing`.
    pub rule: &'static str,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, in one sentence.
    pub help: String,
}

impl From<&Diagnostic> for Finding {
    fn from(d: &Diagnostic) -> Self {
        Finding {
            file: d.path.clone(),
            location: d.location(),
            rule: d.rule.name(),
            message: d.message.clone(),
            help: d.help.clone(),
        }
    }
}

/// Whether `--format human` uses colour: only when the output `is_terminal`, and never when
/// the `NO_COLOR` environment variable is set to a non-empty value (<https://no-color.org>).
///
/// ```
/// use std::ffi::OsStr;
/// use kcap_mcp_registry::report::color_enabled;
///
/// assert!(color_enabled(true, None));
/// assert!(color_enabled(true, Some(OsStr::new(""))));
/// assert!(!color_enabled(true, Some(OsStr::new("1"))));
/// assert!(!color_enabled(false, None));
/// ```
pub fn color_enabled(is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    is_terminal && no_color.is_none_or(OsStr::is_empty)
}

/// Renders findings that have no source location (drift findings, directory-level
/// problems) the way [`Diagnostic::render`] renders a directory-level diagnostic, a blank
/// line after each, then `error: N <noun>` (`noun` singular; an `s` is added for N ≠ 1).
/// Findings with a location are rendered the same way, their position appended to the path.
pub fn human(findings: &[Finding], noun: &str, color: bool) -> String {
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let mut out = String::new();
    for f in findings {
        // The file as the user named it, escaped: a hostile name cannot forge a line.
        let file = crate::text::printable(&f.file);
        let origin = match f.location {
            Some(l) => Origin::path(file.as_ref())
                .line(l.line)
                .char_column(l.column),
            None => Origin::path(file.as_ref()),
        };
        let group: Group<'_> = Level::ERROR
            .primary_title(f.message.as_str())
            .id(f.rule)
            .element(origin)
            .element(Level::HELP.message(f.help.as_str()));
        out.push_str(&renderer.render(&[group]));
        out.push_str("\n\n");
    }
    let n = findings.len();
    out.push_str(&format!(
        "error: {n} {noun}{}\n",
        if n == 1 { "" } else { "s" }
    ));
    out
}

#[derive(Serialize)]
struct FindingJson<'a> {
    file: std::borrow::Cow<'a, str>,
    line: Option<usize>,
    column: Option<usize>,
    end_line: Option<usize>,
    end_column: Option<usize>,
    rule: &'a str,
    severity: &'a str,
    message: &'a str,
    help: &'a str,
}

/// The findings as a pretty-printed JSON array (two-space indent, trailing newline), each
/// `{"file", "line", "column", "end_line", "end_column", "rule", "severity", "message",
/// "help"}` in that key order. `file` is escaped as every shown path is
/// ([`crate::text::printable`]). Positions are 1-based, columns count Unicode scalar values,
/// `end_column` is just past the last character; all four are `null` for findings without a
/// location. `severity` is always `"error"`. No findings give `[]`.
pub fn json(findings: &[Finding]) -> String {
    let items: Vec<FindingJson<'_>> = findings
        .iter()
        .map(|f| FindingJson {
            file: crate::text::printable(&f.file),
            line: f.location.map(|l| l.line),
            column: f.location.map(|l| l.column),
            end_line: f.location.map(|l| l.end_line),
            end_column: f.location.map(|l| l.end_column),
            rule: f.rule,
            severity: "error",
            message: &f.message,
            help: &f.help,
        })
        .collect();
    let mut out =
        serde_json::to_string_pretty(&items).expect("serializing strings and integers cannot fail");
    out.push('\n');
    out
}

/// The findings as GitHub Actions workflow commands, one line each:
/// `::error file=F,line=L,col=C,endLine=EL,endColumn=EC,title=RULE::MESSAGE%0Ahelp: HELP`
/// (the position properties only when the finding has a location; `endColumn` is just past
/// the last character, as in [`json`]).
///
/// Escaping follows GitHub's workflow-command syntax (as `@actions/core` implements it): in
/// the message [`escape_data`]; in property values [`escape_property`].
pub fn github(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        out.push_str("::error file=");
        out.push_str(&escape_property(&crate::text::printable(&f.file)));
        if let Some(l) = f.location {
            out.push_str(&format!(
                ",line={},col={},endLine={},endColumn={}",
                l.line, l.column, l.end_line, l.end_column
            ));
        }
        out.push_str(",title=");
        out.push_str(&escape_property(f.rule));
        out.push_str("::");
        out.push_str(&escape_data(&format!("{}\nhelp: {}", f.message, f.help)));
        out.push('\n');
    }
    out
}

/// Escapes a workflow command's message: `%` → `%25`, `\r` → `%0D`, `\n` → `%0A`.
///
/// ```
/// assert_eq!(kcap_mcp_registry::report::escape_data("100%\r\na:b,c"), "100%25%0D%0Aa:b,c");
/// ```
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command's property value: as [`escape_data`], and also `:` → `%3A`
/// and `,` → `%2C`.
///
/// ```
/// assert_eq!(kcap_mcp_registry::report::escape_property("C:\\a,b%\n"), "C%3A\\a%2Cb%25%0A");
/// ```
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}
