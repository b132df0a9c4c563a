//! `doctor --project DIR` end to end: every client's project files are read and reported
//! (tests/fixtures/cli/doctor/project holds each), the usage errors, an unreadable file.
//! The exact output of the fixture in the three formats is pinned by
//! tests/cmd/doctor-project*.toml.
#![cfg(feature = "cli")]

use std::path::Path;

use assert_cmd::Command;
use kcap_mcp_registry::clients::Client;

const FIXTURE: &str = "tests/fixtures/cli/doctor/project";

fn doctor(dir: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("kcap-mcp-registry")
        .unwrap()
        .env("NO_COLOR", "1")
        .args(["doctor", "--project"])
        .arg(dir)
        .args(extra)
        .assert()
}

/// The repository-level MCP files each client reads, as its room and the facts record them
/// (client-facts.md, docs/isolation/*.md). A file a room drops, or a client without one,
/// fails here.
const READS: [(Client, &[&str]); 9] = [
    (Client::Claude, &[".mcp.json"]),
    (Client::Codex, &[".codex/config.toml"]),
    (Client::Gemini, &[".gemini/settings.json"]),
    (
        Client::OpenCode,
        &[
            "opencode.json",
            "opencode.jsonc",
            ".opencode/opencode.json",
            ".opencode/opencode.jsonc",
        ],
    ),
    (Client::Copilot, &[".mcp.json", ".github/mcp.json"]),
    (Client::Cursor, &[".cursor/mcp.json"]),
    (Client::Kiro, &[".kiro/settings/mcp.json"]),
    (Client::Antigravity, &[".agents/mcp_config.json"]),
    (Client::Qwen, &[".qwen/settings.json", ".mcp.json"]),
];

#[test]
fn every_project_file_a_client_reads_is_reported() {
    assert_eq!(READS.map(|(c, _)| c), Client::ALL);
    let out = doctor(Path::new(FIXTURE), &["--format", "json"]).code(0);
    let items: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let items = items.as_array().unwrap();
    for (client, files) in READS {
        let room: Vec<&str> = client
            .registration()
            .project_files
            .iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(room, files, "{client}: the room's project files");
        for file in files {
            let path = format!("{FIXTURE}/{file}");
            assert!(Path::new(&path).is_file(), "the fixture lacks {path}");
            let reported: Vec<(&str, bool)> = items
                .iter()
                .filter(|i| i["client"] == client.name() && i["file"] == path.as_str())
                .map(|i| (i["rule"].as_str().unwrap(), i["neutralized"] == true))
                .collect();
            assert!(!reported.is_empty(), "{client}: {path} is not reported");
            // Every one neutralized by the current plan, which removes the file.
            assert!(reported.iter().all(|(_, n)| *n), "{client}: {reported:?}");
        }
    }
    // The files no client reads are not reported (Copilot CLI never reads either).
    for never in [".vscode/mcp.json", ".github/mcp-config.json"] {
        let path = format!("{FIXTURE}/{never}");
        assert!(Path::new(&path).is_file());
        assert!(!items.iter().any(|i| i["file"] == path.as_str()), "{never}");
    }
    // Claude 2, Codex 3, Gemini 2, OpenCode 5 (one a refused file), Copilot 3, Cursor 2,
    // Kiro 1, Antigravity 1, Qwen Code 3 (`.qwen/settings.json` 1, `.mcp.json` 2).
    assert_eq!(items.len(), 22);
}

#[test]
fn the_help_names_every_project_file() {
    let out = Command::cargo_bin("kcap-mcp-registry")
        .unwrap()
        .args(["doctor", "--help"])
        .assert()
        .success();
    let help = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let words: Vec<&str> = help.split([' ', '\n', ',', '(', ')']).collect();
    for (client, files) in READS {
        for file in files {
            assert!(
                words.contains(file),
                "{client}: {file} is not in doctor --help"
            );
        }
    }
}

#[test]
fn client_limits_the_files_read() {
    let out = doctor(Path::new(FIXTURE), &["--client", "kiro"]).code(0);
    assert_eq!(
        String::from_utf8(out.get_output().stdout.clone()).unwrap(),
        format!(
            "kiro: {FIXTURE}/.kiro/settings/mcp.json: 1 MCP server\n\
             kiro: {FIXTURE}/.kiro/settings/mcp.json:3:5: MCP server `aws-docs` starts `uvx`; \
             neutralized: the kiro launch plan removes `.kiro` from the worktree\n\
             ok: the launch plans neutralize every MCP server these files would start (1 found)\n"
        )
    );
}

#[test]
fn a_directory_that_is_not_one_and_a_file_that_cannot_be_read() {
    let out = doctor(Path::new("tests/no-such-dir"), &[]).code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.starts_with(
            "error: --project tests/no-such-dir: No such file or directory (os error 2); give \
             the directory of the repository a reviewer would be launched in"
        ),
        "{stderr}"
    );
    doctor(Path::new(FIXTURE), &["--fix"]).code(2);
    // A `.mcp.json` that is a directory: a finding at 1:1, exit 2.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".mcp.json")).unwrap();
    let out = doctor(repo.path(), &["--client", "claude", "--format", "github"]).code(2);
    assert_eq!(
        String::from_utf8(out.get_output().stdout.clone()).unwrap(),
        format!(
            "::error file={}/.mcp.json,line=1,col=1,endLine=1,endColumn=1,\
             title=doctor-unreadable::cannot read Claude Code's project file: it is a \
             directory, not a regular file; give the path of a regular file%0Ahelp: make it \
             readable, so doctor can tell which MCP servers it holds\n",
            repo.path().display()
        )
    );
}
