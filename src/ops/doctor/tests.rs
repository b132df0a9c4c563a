use super::*;
use crate::ops::doctor::check::pointer_of;
use crate::ops::install::{ProjectDuplicate, fingerprint};
use serde_json::Value;

fn entries() -> Vec<RegistryEntry> {
    crate::ops::list::compiled_entries()
}

/// `/usr/bin/kcap` and `/opt/kcap-2/kcap` exist; `kcap` is found as `/usr/bin/kcap`.
fn resolve(command: &str) -> Option<PathBuf> {
    match command {
        "kcap" | "/usr/bin/kcap" => Some("/usr/bin/kcap".into()),
        "/opt/kcap-2/kcap" => Some("/opt/kcap-2/kcap".into()),
        _ => None,
    }
}

fn file(client: Client, config: FileRead, ledger: FileRead) -> ClientFile {
    ClientFile {
        client,
        path: PathBuf::from(format!("/h/{}", client.name())),
        explicit: false,
        config,
        ledger,
    }
}

fn bytes(s: &str) -> FileRead {
    FileRead::Bytes(s.as_bytes().to_vec())
}

fn run(files: &[ClientFile], command: &str) -> Report {
    let entries = entries();
    let opts = RegistrationOptions {
        command: command.into(),
        ..RegistrationOptions::default()
    };
    diagnose(&Input {
        entries: &entries,
        opts: &opts,
        files,
        resolve: &resolve,
    })
    .unwrap()
}

/// The registration file `export` writes for `client`, as text.
fn exported(client: Client, command: &str) -> String {
    let opts = RegistrationOptions {
        command: command.into(),
        ..RegistrationOptions::default()
    };
    match client {
        Client::Codex => {
            crate::clients::codex::registration::codex_toml(&entries(), &opts).unwrap()
        }
        _ => crate::clients::registration::registration_file(
            client.registration(),
            &entries(),
            &opts,
        )
        .unwrap(),
    }
}

/// The report on `client`'s file as `export` writes it with `exported_command`, no
/// ledger, when the current command is `kcap`.
fn run_exported(client: Client, exported_command: &str) -> Report {
    run(
        &[file(
            client,
            bytes(&exported(client, exported_command)),
            FileRead::Missing,
        )],
        "kcap",
    )
}

fn rules(report: &Report) -> Vec<(&'static str, Option<&str>, Option<&str>)> {
    report
        .problems
        .iter()
        .map(|p| (p.rule.name(), p.server.as_deref(), p.project.as_deref()))
        .collect()
}

#[test]
fn an_export_of_every_client_is_healthy() {
    for client in Client::ALL {
        let report = run_exported(client, "kcap");
        assert_eq!(rules(&report), [], "{client:?}");
        assert_eq!(
            report.clients[0].status,
            Status::Installed {
                registered: 6,
                of: 6
            },
            "{client:?}"
        );
    }
}

#[test]
fn no_file_and_a_file_without_kcap_entries_are_not_installations() {
    let report = run(
        &[
            file(Client::Gemini, FileRead::Missing, FileRead::Missing),
            file(
                Client::Cursor,
                bytes(r#"{"mcpServers": {"mine": {"command": "x"}}}"#),
                FileRead::Missing,
            ),
        ],
        "kcap",
    );
    assert_eq!(rules(&report), []);
    assert_eq!(report.clients[0].status, Status::NoFile);
    assert_eq!(report.clients[1].status, Status::NotInstalled);
}

#[test]
fn a_ledger_alone_makes_every_server_missing() {
    let ledger = r#"{"kcap-mcp-registry-ledger": 1, "client": "kiro", "entries": {"kcap-review": "sha256:00"}}"#;
    let report = run(&[file(Client::Kiro, bytes("{}"), bytes(ledger))], "kcap");
    let missing: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.rule == Rule::Missing)
        .map(|p| p.server.clone().unwrap())
        .collect();
    assert_eq!(
        missing,
        [
            "kcap-analytics",
            "kcap-flows",
            "kcap-memory",
            "kcap-review",
            "kcap-sessions",
            "kcap-workitems"
        ]
    );
}

#[test]
fn one_kcap_entry_makes_the_others_missing() {
    let text = exported(Client::Copilot, "kcap");
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let servers = v["mcpServers"].as_object_mut().unwrap();
    servers.retain(|k, _| k == "kcap-flows");
    let report = run(
        &[file(
            Client::Copilot,
            bytes(&v.to_string()),
            FileRead::Missing,
        )],
        "kcap",
    );
    assert_eq!(
        report.clients[0].status,
        Status::Installed {
            registered: 1,
            of: 6
        }
    );
    assert_eq!(
        report
            .problems
            .iter()
            .filter(|p| p.rule == Rule::Missing)
            .count(),
        5
    );
}

#[test]
fn stale_and_outdated_commands_in_every_client_shape() {
    for client in Client::ALL {
        // Exported with a binary that is gone: every entry is stale.
        let report = run_exported(client, "/old/kcap-1/kcap");
        assert_eq!(
            report.problems.iter().map(|p| p.rule).collect::<Vec<_>>(),
            [Rule::StaleCommand; 6],
            "{client:?}: {:?}",
            report.problems
        );
        assert!(
            report.problems[0]
                .message
                .contains("runs `/old/kcap-1/kcap`, which does not exist"),
            "{}",
            report.problems[0].message
        );
        // With another binary that exists: outdated.
        let report = run_exported(client, "/opt/kcap-2/kcap");
        assert_eq!(
            report.problems.iter().map(|p| p.rule).collect::<Vec<_>>(),
            [Rule::OutdatedCommand; 6],
            "{client:?}"
        );
        assert!(
            report.problems[0].message.contains(
                "runs `/opt/kcap-2/kcap`, not the current kcap binary `kcap` (/usr/bin/kcap)"
            ),
            "{}",
            report.problems[0].message
        );
        // The same file under another name: nothing to report.
        let report = run_exported(client, "/usr/bin/kcap");
        assert_eq!(rules(&report), [], "{client:?}");
    }
}

#[test]
fn an_entry_that_differs_in_more_than_its_command_is_divergent() {
    let text = exported(Client::Gemini, "kcap").replacen("\"trust\": true", "\"trust\": false", 1);
    let report = run(
        &[file(Client::Gemini, bytes(&text), FileRead::Missing)],
        "kcap",
    );
    assert_eq!(
        rules(&report),
        [("doctor-divergent", Some("kcap-analytics"), None)]
    );
    // OpenCode's command is an array: a string there is no command at all.
    let text = exported(Client::OpenCode, "kcap").replacen(
        "\"command\": [\n        \"kcap\",\n        \"mcp\",\n        \"analytics\"\n      ]",
        "\"command\": \"kcap mcp analytics\"",
        1,
    );
    let report = run(
        &[file(Client::OpenCode, bytes(&text), FileRead::Missing)],
        "kcap",
    );
    assert_eq!(
        rules(&report),
        [("doctor-divergent", Some("kcap-analytics"), None)]
    );
    assert!(
        report.problems[0]
            .message
            .contains("its command is not where")
    );
}

#[test]
fn help_says_install_rewrites_an_entry_kcap_wrote() {
    let text = exported(Client::Cursor, "/old/kcap");
    let v: Value = serde_json::from_str(&text).unwrap();
    let fp = fingerprint(&v["mcpServers"]["kcap-review"]);
    let ledger = format!(
        r#"{{"kcap-mcp-registry-ledger": 1, "client": "cursor", "entries": {{"kcap-review": "{fp}"}}}}"#
    );
    let report = run(
        &[file(Client::Cursor, bytes(&text), bytes(&ledger))],
        "kcap",
    );
    let review = report
        .problems
        .iter()
        .find(|p| p.server.as_deref() == Some("kcap-review"))
        .unwrap();
    assert!(review.help.starts_with("kcap wrote it"), "{}", review.help);
    let memory = report
        .problems
        .iter()
        .find(|p| p.server.as_deref() == Some("kcap-memory"))
        .unwrap();
    assert!(
        memory.help.starts_with("kcap did not write it"),
        "{}",
        memory.help
    );
}

/// A `~/.claude.json` with kcap's user scope and `projects`.
fn claude_json(projects: Value) -> String {
    let mut v: Value = serde_json::from_str(&exported(Client::Claude, "kcap")).unwrap();
    v["projects"] = projects;
    v.to_string()
}

fn review(command: &str, args: &[&str]) -> Value {
    let mut v: Value = serde_json::from_str(&exported(Client::Claude, command)).unwrap();
    let mut e = v["mcpServers"]["kcap-review"].take();
    e["args"] = serde_json::json!(args);
    e
}

#[test]
fn claude_project_scopes_canonical_duplicates_and_conflicts() {
    let canonical = review("kcap", &["mcp", "review"]);
    let text = claude_json(serde_json::json!({
        "/p/dup": {"mcpServers": {"kcap-review": canonical, "mine": {"command": "x"}}},
        "/p/args": {"mcpServers": {"kcap-review": review("kcap", &["mcp", "review", "-v"])}},
        "/p/stale": {"mcpServers": {"kcap-review": review("/gone/kcap", &["mcp", "review"])}},
        "/p/bad": {"mcpServers": "nope"},
        "/p/none": {"allowedTools": []},
    }));
    let report = run(
        &[file(Client::Claude, bytes(&text), FileRead::Missing)],
        "kcap",
    );
    assert_eq!(
        rules(&report),
        [
            ("doctor-conflict", Some("kcap-review"), Some("/p/args")),
            ("doctor-malformed", None, Some("/p/bad")),
            ("doctor-duplicate", Some("kcap-review"), Some("/p/dup")),
            ("doctor-conflict", Some("kcap-review"), Some("/p/stale")),
            (
                "doctor-stale-command",
                Some("kcap-review"),
                Some("/p/stale")
            ),
        ]
    );
    assert_eq!(
        report.removable,
        [(
            PathBuf::from("/h/claude"),
            ProjectDuplicate {
                project: "/p/dup".into(),
                name: "kcap-review".into(),
                fingerprint: fingerprint(&canonical),
            }
        )]
    );
}

#[test]
fn a_local_entry_equal_to_an_outdated_user_entry_is_a_conflict_not_removable() {
    let old = review("/usr/bin/kcap", &["mcp", "review", "--old"]);
    let mut v: Value = serde_json::from_str(&claude_json(serde_json::json!({
        "/p": {"mcpServers": {"kcap-review": old}}
    })))
    .unwrap();
    v["mcpServers"]["kcap-review"] = old;
    let report = run(
        &[file(
            Client::Claude,
            bytes(&v.to_string()),
            FileRead::Missing,
        )],
        "kcap",
    );
    assert!(report.removable.is_empty());
    let conflict = report
        .problems
        .iter()
        .find(|p| p.rule == Rule::Conflict)
        .unwrap();
    assert!(
        conflict
            .message
            .contains("is the same as the user scope's entry, but both differ"),
        "{}",
        conflict.message
    );
}

#[test]
fn a_project_only_kcap_entry_is_not_a_duplicate() {
    let v: Value = serde_json::json!({
        "projects": {"/p": {"mcpServers": {"kcap-review": review("kcap", &["mcp", "review"])}}}
    });
    let report = run(
        &[file(
            Client::Claude,
            bytes(&v.to_string()),
            FileRead::Missing,
        )],
        "kcap",
    );
    assert_eq!(rules(&report), []);
    assert_eq!(report.clients[0].status, Status::NotInstalled);
}

#[test]
fn unreadable_and_malformed_files_are_findings_not_panics() {
    let report = run(
        &[
            file(
                Client::Codex,
                FileRead::Unreadable("Permission denied (os error 13)".into()),
                FileRead::Missing,
            ),
            file(
                Client::Gemini,
                bytes("{\"mcpServers\": {"),
                FileRead::Missing,
            ),
            file(
                Client::Cursor,
                FileRead::Bytes(vec![b'{', 0xff, b'}']),
                FileRead::Missing,
            ),
            file(Client::Kiro, bytes("{}"), bytes("not json")),
            file(
                Client::Copilot,
                bytes(r#"{"mcpServers": []}"#),
                FileRead::Missing,
            ),
            file(Client::OpenCode, bytes(""), FileRead::Missing),
            ClientFile {
                explicit: true,
                ..file(Client::Antigravity, FileRead::Missing, FileRead::Missing)
            },
        ],
        "kcap",
    );
    assert_eq!(
        rules(&report),
        [
            ("doctor-unreadable", None, None),
            ("doctor-malformed", None, None),
            ("doctor-malformed", None, None),
            ("doctor-malformed", None, None),
            ("doctor-malformed", None, None),
            ("doctor-malformed", None, None),
            ("doctor-unreadable", None, None),
        ]
    );
    assert!(report.has_unreadable());
    assert!(report.problems[0].message.contains("Permission denied"));
    assert!(
        report.problems[1]
            .message
            .contains("is not valid JSON with comments")
    );
    assert!(report.problems[2].message.contains("is not UTF-8"));
    assert_eq!(
        report.problems[3].path,
        PathBuf::from("/h/kiro.kcap-ledger.json")
    );
    assert!(
        report.problems[4]
            .message
            .contains("`mcpServers` is not an object")
    );
    assert!(report.problems[5].message.contains("is empty"));
    assert!(
        report.clients.iter().all(|c| c.status == Status::Unusable),
        "{:?}",
        report.clients
    );
}

#[test]
fn findings_carry_the_rule_and_the_file() {
    let report = run(
        &[file(Client::Gemini, bytes("{"), FileRead::Missing)],
        "kcap",
    );
    let f = &report.findings()[0];
    assert_eq!(f.rule, "doctor-malformed");
    assert_eq!(f.file, "/h/gemini");
    // Where jsonc-parser puts the error: the object left open.
    assert!(f.message.contains("Unterminated object on line 1 column 1"));
    assert_eq!(f.location, Some(super::positions::START));
}

#[test]
fn pointer_of_finds_the_command_in_each_shape() {
    let v = serde_json::json!({"type": "local", "command": ["M", "a"], "x/y": "M"});
    assert_eq!(pointer_of(&v, "M").as_deref(), Some("/command/0"));
    let v = serde_json::json!({"x/y~": "M"});
    assert_eq!(pointer_of(&v, "M").as_deref(), Some("/x~1y~0"));
    assert_eq!(pointer_of(&v, "N"), None);
}
