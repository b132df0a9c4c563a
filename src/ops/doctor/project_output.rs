//! How `doctor --project` prints its [`ProjectReport`] in the three formats of `check` and
//! `doctor`, every item at `file:line:column`:
//!
//! - human: one line per project file and one per server entry on stdout (the client, the
//!   position, what the client does with the entry, whether the launch plan neutralizes
//!   it); the findings (a server the plan leaves to the reviewer, a file that cannot be
//!   read) on stderr, rustc style ([`crate::report::human`]);
//! - JSON: one array of every server entry, refused file and unreadable file, each
//!   `{file, line, column, end_line, end_column, rule, severity, message, help}` (the shape
//!   of [`crate::report::json`]) plus `client`, `server`, `neutralized` and
//!   `neutralized_by`; `severity` is `"error"` for a finding and `"note"` for the rest;
//! - GitHub Actions workflow commands: `::error` for a finding, `::notice` for the rest.

use serde::Serialize;

use super::positions::START;
use super::project::{FileState, ProjectReport, Verdict};
use crate::clients::Client;
use crate::diagnostic::Location;
use crate::report::{Finding, escape_data, escape_property};
use crate::text::{ShownPath, printable};

/// `doctor-project-server`: a server entry of a project file.
pub const SERVER_RULE: &str = "doctor-project-server";
/// `doctor-project-rejected`: a project file the client refuses as a whole.
pub const REJECTED_RULE: &str = "doctor-project-rejected";
/// `doctor-unreadable`: a project file that cannot be read.
pub const UNREADABLE_RULE: &str = "doctor-unreadable";

/// One item of the report: a finding (`error`) or a note, with what the JSON form adds.
struct Item<'a> {
    finding: Finding,
    error: bool,
    client: Client,
    server: Option<&'a str>,
    verdict: &'a Verdict,
}

fn items(report: &ProjectReport) -> Vec<Item<'_>> {
    let mut out = Vec::new();
    for file in &report.files {
        let display = file.client.display_name();
        let verdict = file.verdict.describe(file.client);
        let (location, rule, message, help, error) = match &file.state {
            FileState::NoFile | FileState::Read(_) => continue,
            FileState::Unreadable(e) => (
                START,
                UNREADABLE_RULE,
                format!("cannot read {display}'s project file: {}", printable(e)),
                "make it readable, so doctor can tell which MCP servers it holds".to_string(),
                true,
            ),
            FileState::Rejected { reason, location } => (
                *location,
                REJECTED_RULE,
                format!(
                    "{display} refuses the file as a whole ({}), so none of its servers start; \
                     {verdict}",
                    printable(reason)
                ),
                format!("nothing to do: {display} starts no server from it"),
                false,
            ),
        };
        out.push(Item {
            finding: finding(&file.path, location, rule, message, help),
            error,
            client: file.client,
            server: None,
            verdict: &file.verdict,
        });
    }
    let mut servers: Vec<Item<'_>> = report
        .servers
        .iter()
        .map(|s| {
            let display = s.client.display_name();
            let message = format!(
                "{display}: MCP server `{}` {}; {}",
                s.name.escape_debug(),
                s.entry.describe(),
                s.verdict.describe(s.client)
            );
            let relative = report
                .files
                .iter()
                .find(|f| f.path == s.path && f.client == s.client)
                .map_or("", |f| f.relative);
            let help = if s.is_finding() {
                format!(
                    "remove it from `{relative}`, or keep reviewers out of this repository, \
                     until the {} launch plan removes the file from the worktree",
                    s.client
                )
            } else if s.entry.runs() {
                "nothing to do: the daemon removes the file before the client starts".into()
            } else {
                format!("nothing to do: {display} does not start it")
            };
            Item {
                finding: finding(&s.path, s.location, SERVER_RULE, message, help),
                error: s.is_finding(),
                client: s.client,
                server: Some(&s.name),
                verdict: &s.verdict,
            }
        })
        .collect();
    // Each file's items together (a file two clients read is two files here), in report
    // order, the file's own item first; the sort is stable.
    let order = |i: &Item<'_>| {
        report
            .files
            .iter()
            .position(|f| f.client == i.client && f.path.to_string_lossy() == i.finding.file)
    };
    out.append(&mut servers);
    out.sort_by_key(|i| (order(i), i.server.is_some()));
    out
}

fn finding(
    path: &std::path::Path,
    location: Location,
    rule: &'static str,
    message: String,
    help: String,
) -> Finding {
    Finding {
        file: path.to_string_lossy().into_owned(),
        location: Some(location),
        rule,
        message,
        help,
    }
}

/// The findings only (servers the plans leave to the reviewer, unreadable files), for
/// [`crate::report::human`] on stderr.
pub fn findings(report: &ProjectReport) -> Vec<Finding> {
    items(report)
        .into_iter()
        .filter(|i| i.error)
        .map(|i| i.finding)
        .collect()
}

/// The human form's stdout: per project file `client: path: state`, then per server entry
/// `client: path:line:column: MCP server `name` <what the client does>; <verdict>`; last,
/// when there is no finding, an `ok:` line.
pub fn human(report: &ProjectReport) -> String {
    let mut out = String::new();
    for file in &report.files {
        let client = file.client;
        let path = ShownPath(&file.path);
        match &file.state {
            FileState::NoFile => out.push_str(&format!("{client}: {path}: no file\n")),
            FileState::Unreadable(_) => {
                out.push_str(&format!("{client}: {path}: cannot be read (see below)\n"));
            }
            FileState::Rejected { reason, location } => out.push_str(&format!(
                "{client}: {path}:{}:{}: {} refuses the file ({}), so none of its servers \
                 start; {}\n",
                location.line,
                location.column,
                client.display_name(),
                printable(reason),
                file.verdict.describe(client)
            )),
            FileState::Read(n) => {
                out.push_str(&format!(
                    "{client}: {path}: {n} MCP server{}\n",
                    if *n == 1 { "" } else { "s" }
                ));
                for s in report
                    .servers
                    .iter()
                    .filter(|s| s.path == file.path && s.client == client)
                {
                    out.push_str(&format!(
                        "{client}: {path}:{}:{}: MCP server `{}` {}; {}\n",
                        s.location.line,
                        s.location.column,
                        s.name.escape_debug(),
                        s.entry.describe(),
                        s.verdict.describe(client)
                    ));
                }
            }
        }
    }
    if !report.has_findings() {
        let running = report.servers.iter().filter(|s| s.entry.runs()).count();
        out.push_str(&format!(
            "ok: the launch plans neutralize every MCP server these files would start \
             ({running} found)\n"
        ));
    }
    out
}

#[derive(Serialize)]
struct ItemJson<'a> {
    file: std::borrow::Cow<'a, str>,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    rule: &'a str,
    severity: &'a str,
    message: &'a str,
    help: &'a str,
    client: &'a str,
    server: Option<&'a str>,
    neutralized: bool,
    neutralized_by: Option<&'a str>,
}

/// The JSON form: every item, pretty-printed, with a trailing newline (see the module
/// documentation).
pub fn json(report: &ProjectReport) -> String {
    let items = items(report);
    let json: Vec<ItemJson<'_>> = items
        .iter()
        .map(|i| {
            let l = i.finding.location.unwrap_or(START);
            ItemJson {
                file: printable(&i.finding.file),
                line: l.line,
                column: l.column,
                end_line: l.end_line,
                end_column: l.end_column,
                rule: i.finding.rule,
                severity: if i.error { "error" } else { "note" },
                message: &i.finding.message,
                help: &i.finding.help,
                client: i.client.name(),
                server: i.server,
                neutralized: i.verdict.neutralized(),
                neutralized_by: match i.verdict {
                    Verdict::Removed { by } => Some(by),
                    _ => None,
                },
            }
        })
        .collect();
    let mut out =
        serde_json::to_string_pretty(&json).expect("serializing strings and integers cannot fail");
    out.push('\n');
    out
}

/// The GitHub Actions form: one `::error` (finding) or `::notice` line per item, with its
/// position, escaped as [`crate::report::github`] escapes.
pub fn github(report: &ProjectReport) -> String {
    let mut out = String::new();
    for i in items(report) {
        let l = i.finding.location.unwrap_or(START);
        out.push_str(&format!(
            "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
            if i.error { "error" } else { "notice" },
            escape_property(&printable(&i.finding.file)),
            l.line,
            l.column,
            l.end_line,
            l.end_column,
            escape_property(i.finding.rule),
            escape_data(&format!("{}\nhelp: {}", i.finding.message, i.finding.help))
        ));
    }
    out
}
