//! `doctor --project` on files in memory: which files each client reads, the verdict read
//! from the plan, and the exact output of a server a plan leaves to the reviewer.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use super::FileRead;
use super::project::{self, Entry, FileState, ProjectInput, ProjectReport, Verdict};
use super::project_output;
use crate::clients::plan::LaunchPlan;
use crate::clients::{Client, LaunchError};

const MCP_JSON: &str = r#"{
  "mcpServers": {
    "lint": {"command": "npx", "args": ["lint-mcp"]},
    "docs": {"type": "http", "url": "https://d.example/mcp"}
  }
}
"#;

/// Scans `dir` holding `files` (relative path, text) for `clients`, with each client's real
/// plan passed through `edit`.
fn scan(
    clients: &[Client],
    files: &[(&str, &str)],
    edit: &dyn Fn(LaunchPlan) -> Result<LaunchPlan, LaunchError>,
) -> ProjectReport {
    let dir = Path::new("repo");
    let read = |path: &Path| {
        files.iter().find(|(rel, _)| dir.join(rel) == path).map_or(
            FileRead::Missing,
            |(_, text)| {
                if text.is_empty() {
                    FileRead::Unreadable("Permission denied (os error 13)".into())
                } else {
                    FileRead::Bytes(text.as_bytes().to_vec())
                }
            },
        )
    };
    project::scan(&ProjectInput {
        dir,
        worktree: "/work/repo",
        clients,
        read: &read,
        plan: &|c| edit(project::launch_plan(c, "/work/repo", "kcap")?),
        env: &|_| None,
    })
}

#[test]
fn every_client_has_project_files_and_its_plan_removes_each() {
    for client in Client::ALL {
        let files = client.registration().project_files;
        assert!(!files.is_empty(), "{client}");
        let plan = project::launch_plan(client, "/work/repo", "kcap").unwrap();
        for f in files {
            let report = scan(&[client], &[(f.path, "{}")], &Ok);
            let file = report.files.iter().find(|s| s.relative == f.path).unwrap();
            match &file.verdict {
                Verdict::Removed { by } => assert!(plan.worktree_remove.contains(by)),
                other => panic!("{client} {}: {other:?}", f.path),
            }
        }
    }
}

#[test]
fn a_folder_covers_its_files_and_nothing_else() {
    let only = |removed: &'static [&'static str]| {
        move |mut plan: LaunchPlan| {
            plan.worktree_remove = removed.iter().map(|s| s.to_string()).collect();
            Ok(plan)
        }
    };
    let text = r#"{"mcpServers": {"s": {"command": "x"}}}"#;
    let verdict = |client, rel, removed| {
        scan(&[client], &[(rel, text)], &only(removed)).files[0]
            .verdict
            .clone()
    };
    let by = |s: &str| Verdict::Removed { by: s.into() };
    assert_eq!(
        verdict(Client::Gemini, ".gemini/settings.json", &[".gemini"]),
        by(".gemini")
    );
    assert_eq!(
        verdict(Client::Gemini, ".gemini/settings.json", &[".gem"]),
        Verdict::Kept
    );
    assert_eq!(
        verdict(Client::Kiro, ".kiro/settings/mcp.json", &[".kiro/settings"]),
        by(".kiro/settings")
    );
    assert_eq!(
        verdict(Client::Claude, ".mcp.json", &[".mcp.json.bak"]),
        Verdict::Kept
    );
}

#[test]
fn no_file_renders_no_plan() {
    let rendered = Cell::new(0);
    let report = scan(&Client::ALL, &[], &|plan| {
        rendered.set(rendered.get() + 1);
        Ok(plan)
    });
    assert_eq!(rendered.get(), 0);
    assert!(report.files.iter().all(|f| f.state == FileState::NoFile));
    assert!(!report.has_findings());
    // Claude 1, Codex 1, Gemini 1, OpenCode 4, Copilot 2, Cursor 1, Kiro 1, Antigravity 1,
    // Qwen Code 2.
    assert_eq!(report.files.len(), 14);
}

#[test]
fn a_server_the_plan_leaves_is_a_finding_in_every_format() {
    let keep = |mut plan: LaunchPlan| {
        plan.worktree_remove.clear();
        Ok(plan)
    };
    let report = scan(&[Client::Claude], &[(".mcp.json", MCP_JSON)], &keep);
    assert_eq!(
        report
            .servers
            .iter()
            .map(|s| (&s.name, &s.entry))
            .collect::<Vec<_>>(),
        [
            (
                &"lint".to_string(),
                &Entry::Starts {
                    command: "npx".into()
                }
            ),
            (
                &"docs".to_string(),
                &Entry::Connects {
                    url: "https://d.example/mcp".into()
                }
            ),
        ]
    );
    assert!(report.has_findings() && !report.has_unreadable());
    assert_eq!(
        project_output::human(&report),
        "claude: repo/.mcp.json: 2 MCP servers\n\
         claude: repo/.mcp.json:3:5: MCP server `lint` starts `npx`; not neutralized: the claude \
         launch plan leaves the file in the worktree\n\
         claude: repo/.mcp.json:4:5: MCP server `docs` connects to `https://d.example/mcp`; not \
         neutralized: the claude launch plan leaves the file in the worktree\n"
    );
    let findings = project_output::findings(&report);
    assert_eq!(
        crate::report::human(&findings[..1], "doctor finding", false),
        "error[doctor-project-server]: Claude Code: MCP server `lint` starts `npx`; not \
         neutralized: the claude launch plan leaves the file in the worktree\n\
         --> repo/.mcp.json:3:5\n \
         = help: remove it from `.mcp.json`, or keep reviewers out of this repository, until \
         the claude launch plan removes the file from the worktree\n\n\
         error: 1 doctor finding\n"
    );
    assert_eq!(
        project_output::github(&report).lines().next().unwrap(),
        "::error file=repo/.mcp.json,line=3,col=5,endLine=3,endColumn=11,\
         title=doctor-project-server::Claude Code: MCP server `lint` starts `npx`; not \
         neutralized: the claude launch plan leaves the file in the worktree%0Ahelp: remove it \
         from `.mcp.json`, or keep reviewers out of this repository, until the claude launch \
         plan removes the file from the worktree"
    );
    let json: serde_json::Value = serde_json::from_str(&project_output::json(&report)).unwrap();
    assert_eq!(
        json[1],
        serde_json::json!({
            "file": "repo/.mcp.json", "line": 4, "column": 5, "end_line": 4, "end_column": 11,
            "rule": "doctor-project-server", "severity": "error",
            "message": "Claude Code: MCP server `docs` connects to `https://d.example/mcp`; not \
                        neutralized: the claude launch plan leaves the file in the worktree",
            "help": "remove it from `.mcp.json`, or keep reviewers out of this repository, \
                     until the claude launch plan removes the file from the worktree",
            "client": "claude", "server": "docs", "neutralized": false, "neutralized_by": null
        })
    );
}

#[test]
fn a_plan_that_cannot_be_rendered_neutralizes_nothing() {
    let refuse = |_| {
        Err(LaunchError::Render(
            crate::clients::RenderError::NeedsAbsolute {
                client: Client::Kiro,
                field: "launch_dir",
            },
        ))
    };
    let text = "{\"mcpServers\": {\"aws\": {\"command\": \"uvx\"}}}";
    let report = scan(
        &[Client::Kiro],
        &[(".kiro/settings/mcp.json", text)],
        &refuse,
    );
    let s = &report.servers[0];
    assert!(s.is_finding());
    let Verdict::NoPlan { why } = &s.verdict else {
        panic!("{:?}", s.verdict)
    };
    assert!(
        s.verdict.describe(Client::Kiro).starts_with(
            "not neutralized: no kiro launch plan can be rendered for this directory ("
        ),
        "{why}"
    );
}

#[test]
fn off_skipped_and_refused_entries_are_notes_even_when_kept() {
    let keep = |mut plan: LaunchPlan| {
        plan.worktree_remove.clear();
        Ok(plan)
    };
    let codex = "[mcp_servers.off]\ncommand = \"x\"\nenabled = false\n";
    let opencode = "{\"mcp\": {\"b\": {\"type\": \"local\", \"command\": \"x\"}}}";
    let report = scan(
        &[Client::Codex, Client::OpenCode],
        &[(".codex/config.toml", codex), ("opencode.json", opencode)],
        &keep,
    );
    assert!(!report.has_findings());
    assert!(matches!(report.servers[0].entry, Entry::Off { .. }));
    assert_eq!(
        report.files[1].state,
        FileState::Rejected {
            reason: "`mcp.b.command` is a string, not an array".into(),
            location: crate::diagnostic::Location {
                line: 1,
                column: 44,
                end_line: 1,
                end_column: 47
            }
        }
    );
    let json: serde_json::Value = serde_json::from_str(&project_output::json(&report)).unwrap();
    assert_eq!(json[0]["severity"], "note");
    assert_eq!(json[1]["rule"], "doctor-project-rejected");
    assert_eq!(json[1]["server"], serde_json::Value::Null);
}

#[test]
fn an_unreadable_file_is_a_finding_at_its_start() {
    let report = scan(&[Client::Gemini], &[(".gemini/settings.json", "")], &Ok);
    assert!(report.has_unreadable());
    assert_eq!(
        project_output::github(&report),
        "::error file=repo/.gemini/settings.json,line=1,col=1,endLine=1,endColumn=1,\
         title=doctor-unreadable::cannot read Gemini CLI's project file: Permission denied (os \
         error 13)%0Ahelp: make it readable, so doctor can tell which MCP servers it holds\n"
    );
    assert_eq!(
        report.files[0].path,
        PathBuf::from("repo/.gemini/settings.json")
    );
}

#[test]
fn hostile_names_cannot_forge_a_line() {
    let claude = "{\"mcpServers\": {\"a\\nclaude: ok\": {\"command\": \"x\\u001b[31m\"}}}";
    let opencode = "{\"mcp\": {\"b\\r\": {\"type\": \"local\", \"command\": 5}}}";
    let report = scan(
        &[Client::Claude, Client::OpenCode],
        &[(".mcp.json", claude), ("opencode.json", opencode)],
        &Ok,
    );
    let human = project_output::human(&report);
    assert!(
        human.contains(
            "claude: repo/.mcp.json:1:17: MCP server `a\\nclaude: ok` starts `x\\u{1b}[31m`; \
             neutralized"
        ),
        "{human}"
    );
    assert!(
        human.contains("OpenCode refuses the file (`mcp.b\\r.command` is a number, not an array)"),
        "{human}"
    );
    // Claude: its file and its server; OpenCode: four files; the `ok:` line.
    assert_eq!(human.lines().count(), 7);
}
