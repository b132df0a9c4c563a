//! `check --against` on the six clients beyond Claude Code and Codex: each export checks
//! clean through its client's loader model, and each measured quirk (Gemini CLI 0.61.0,
//! OpenCode 1.18.33, Copilot CLI 1.0.102; see each `src/clients/<client>/loader.rs`) gives
//! the finding it should. Cursor, Kiro and Antigravity follow the facts only.
#![cfg(feature = "cli")]

use std::path::Path;

use assert_cmd::Command;

fn kcap() -> Command {
    let mut c = Command::cargo_bin("kcap-mcp-registry").unwrap();
    c.env("NO_COLOR", "1").env_remove("HOME");
    c
}

fn export(client: &str) -> String {
    let out = kcap().args(["export", client]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `text` at `rel` in a fresh directory and checks it; returns (exit code, the rule
/// names of every finding in order, the JSON findings).
fn check(rel: &str, text: &str, extra: &[&str]) -> (i32, Vec<String>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    let registry = Path::new(env!("CARGO_MANIFEST_DIR")).join("registry");
    let out = kcap()
        .arg("check")
        .arg(registry)
        .args(["--format", "json", "--against"])
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let rules = json
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect();
    (out.status.code().unwrap(), rules, json)
}

const FILES: [(&str, &str); 6] = [
    ("gemini", ".gemini/settings.json"),
    ("opencode", "opencode.json"),
    ("copilot", "mcp-config.json"),
    ("cursor", ".cursor/mcp.json"),
    ("kiro", ".kiro/settings/mcp.json"),
    ("antigravity", "mcp_config.json"),
];

#[test]
fn every_clients_export_checks_clean_through_its_loader_model() {
    for (client, rel) in FILES {
        let (code, rules, _) = check(rel, &export(client), &[]);
        assert_eq!((code, rules), (0, vec![]), "{client}");
    }
}

#[test]
fn an_export_named_otherwise_is_read_as_the_client_given_with_client() {
    // Without --client, `x.json` is a Claude Code file: the OpenCode `mcp` block is unknown
    // to it, so every registry server is missing.
    let (_, rules, _) = check("x.json", &export("opencode"), &[]);
    assert_eq!(rules, vec!["drift-missing"; 6]);
    let (code, rules, _) = check("x.json", &export("opencode"), &["--client", "opencode"]);
    assert_eq!((code, rules), (0, vec![]));
}

#[test]
fn a_file_without_the_driver_stamp_drifts_in_args_for_a_stamping_client() {
    let text = export("gemini").replace(",\n        \"--driver\",\n        \"gemini\"", "");
    assert_ne!(text, export("gemini"), "the export stamps kcap-flows");
    let (code, rules, json) = check(".gemini/settings.json", &text, &[]);
    assert_eq!((code, rules), (1, vec!["drift-args".to_string()]));
    assert!(
        json[0]["message"].as_str().unwrap().contains("kcap-flows"),
        "{json}"
    );
}

#[test]
fn gemini_expands_dollar_in_command_keeps_comments_and_refuses_trailing_commas() {
    let text = export("gemini").replacen("\"kcap\"", "\"$KCAP_TEST_UNSET_DIR/kcap\"", 1);
    let text = format!("// the user's note\n{text}");
    let (_, rules, json) = check(".gemini/settings.json", &text, &[]);
    assert_eq!(rules, vec!["drift-expansion", "drift-command"], "{json}");
    assert!(
        json[1]["message"]
            .as_str()
            .unwrap()
            .contains("$KCAP_TEST_UNSET_DIR/kcap"),
        "an unset variable stays literal: {json}"
    );
    let text = export("gemini").replacen("}\n  }\n}", "},\n  }\n}", 1);
    let (_, rules, _) = check(".gemini/settings.json", &text, &[]);
    assert_eq!(rules, vec!["drift-rejected"]);
}

#[test]
fn gemini_starts_a_server_with_an_unknown_key_and_skips_a_non_string_command() {
    let text = export("gemini")
        .replacen(
            "\"command\": \"kcap\",",
            "\"command\": \"kcap\", \"disabled\": true,",
            1,
        )
        .replacen("\"command\": \"kcap\",", "\"command\": 5,", 2)
        .replacen("\"command\": 5,", "\"command\": \"kcap\",", 1);
    let (_, rules, json) = check(".gemini/settings.json", &text, &[]);
    assert_eq!(rules, vec!["drift-skipped"], "{json}");
}

#[test]
fn opencode_refuses_the_whole_file_for_one_wrong_type_and_drops_env() {
    let text = export("opencode").replacen("\"enabled\": true", "\"enabled\": \"yes\"", 1);
    let (code, rules, json) = check("opencode.json", &text, &[]);
    assert_eq!((code, rules), (1, vec!["drift-rejected".to_string()]));
    assert!(
        json[0]["message"]
            .as_str()
            .unwrap()
            .contains("mcp.kcap-analytics.enabled"),
        "{json}"
    );
    let text = export("opencode").replacen("\"enabled\": true", "\"enabled\": false", 1);
    let (_, rules, _) = check("opencode.json", &text, &[]);
    assert_eq!(rules, vec!["drift-disabled"]);
    // An entry that is neither local nor remote refuses the file, unless it has a boolean
    // `enabled`: then OpenCode keeps `{"enabled": …}` and ignores it (1.18.33,
    // tests/clients/differential_opencode.rs).
    let text = export("opencode").replacen("\"type\": \"local\"", "\"type\": \"stdio\"", 1);
    let (_, rules, _) = check("opencode.json", &text, &[]);
    assert_eq!(rules, vec!["drift-skipped"]);
    let text = text.replacen("\"enabled\": true", "\"enabled\": 1", 1);
    let (_, rules, _) = check("opencode.json", &text, &[]);
    assert_eq!(rules, vec!["drift-rejected"]);
    // JSONC with a trailing comma, and `{env:…}` substitution.
    let text = export("opencode")
        .replacen("\"kcap\",", "\"{env:KCAP_TEST_UNSET}kcap\",", 1)
        .replacen("\"enabled\": true", "\"enabled\": true,", 1);
    let (_, rules, _) = check("opencode.json", &format!("// note\n{text}"), &[]);
    assert_eq!(rules, vec!["drift-expansion"]);
    assert_eq!(check("opencode.json", "", &[]).1, vec!["drift-missing"; 6]);
}

#[test]
fn copilot_drops_an_invalid_entry_silently_and_refuses_a_file_without_mcp_servers() {
    let text = export("copilot").replacen("\"type\": \"stdio\"", "\"type\": \"local\"", 1);
    assert_eq!(check("mcp-config.json", &text, &[]).1, Vec::<String>::new());
    let text = export("copilot").replacen("\"args\": [", "\"env\": null, \"args\": [", 1);
    let (_, rules, json) = check("mcp-config.json", &text, &[]);
    assert_eq!(rules, vec!["drift-skipped"], "{json}");
    let text = export("copilot").replacen("\"args\": [", "\"disabled\": true, \"args\": [", 1);
    assert_eq!(
        check("mcp-config.json", &text, &[]).1,
        vec!["drift-disabled"]
    );
    // kcap-review lists tools in the registry; keeping only another one hides them.
    let text = export("copilot").replacen(
        "\"kcap-review\": {",
        "\"kcap-review\": {\n      \"tools\": [\"nope\"],",
        1,
    );
    assert_eq!(check("mcp-config.json", &text, &[]).1, vec!["drift-tools"]);
    assert_eq!(
        check("mcp-config.json", "{}", &[]).1,
        vec!["drift-rejected"]
    );
    // Comments and trailing commas are read.
    let text = export("copilot").replacen("\"stdio\",", "\"stdio\", // c\n", 1);
    let text = text.replacen("]\n    }", "],\n    }", 1);
    assert_eq!(check("mcp-config.json", &text, &[]).1, Vec::<String>::new());
}

#[test]
fn antigravity_reads_an_empty_file_as_no_servers_and_cursor_refuses_one() {
    assert_eq!(
        check("mcp_config.json", "", &[]).1,
        vec!["drift-missing"; 6]
    );
    assert_eq!(check(".cursor/mcp.json", "", &[]).1, vec!["drift-rejected"]);
    let text = export("kiro").replacen("\"args\": [", "\"args\": 1, \"x\": [", 1);
    assert_eq!(
        check(".kiro/settings/mcp.json", &text, &[]).1,
        vec!["drift-skipped"]
    );
}
