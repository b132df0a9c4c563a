//! Real-client proofs of `install` / `uninstall` (issue 15): the pinned Claude Code
//! (`claude mcp list`) and Codex CLI (`codex mcp list --json`) read the merged file, each run
//! with a throwaway HOME (and CODEX_HOME) holding a copy of it, so a client rewriting its own
//! file cannot blur what `install` wrote. Gemini CLI, Copilot CLI and OpenCode are not
//! installed here yet (no pinned binary in `.peers`): their proofs are still to come.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::peers::{inherited_path, peer, run};

fn main() {
    common::peers::main(real_client_tests![
        #[cfg(feature = "cli")]
        claude_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
        #[cfg(feature = "cli")]
        codex_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
    ]);
}

const EXE: &str = env!("CARGO_BIN_EXE_kcap-mcp-registry");

/// `kcap-mcp-registry <verb> --client <client> --config <config>`; returns (exit code, stderr).
fn kcap(verb: &str, client: &str, config: &Path) -> (i32, String) {
    let out = Command::new(EXE)
        .args([verb, "--client", client, "--config"])
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The registry's servers as `name → command line` with the kcap binary `kcap`.
fn ours() -> BTreeMap<String, String> {
    kcap_mcp_registry::servers()
        .iter()
        .filter(|s| s.allowlistable)
        .map(|s| (s.id.to_string(), format!("kcap {}", s.args.join(" "))))
        .collect()
}

const CLAUDE_USER: &str = "{\n  \"numStartups\": 2,\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"notes\": {\n      \"command\": \"/bin/true\",\n      \"args\": [\"--notes\"]\n    },\n    \"search\": {\n      \"type\": \"stdio\",\n      \"command\": \"/bin/false\",\n      \"args\": []\n    }\n  },\n  \"projects\": {}\n}\n";

/// `claude mcp list` with `.claude.json` = `text` in a fresh HOME: `name → command line`.
fn claude_list(bin: &Path, text: &str) -> BTreeMap<String, String> {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".claude.json"), text).unwrap();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .env("HOME", home.path())
        .env("IS_SANDBOX", "1")
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("DISABLE_AUTOUPDATER", "1")
        .args(["mcp", "list"])
        .current_dir(project.path());
    let out = run(cmd, "claude mcp list");
    assert!(out.status.success(), "claude mcp list: {}", out.stderr);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains("MCP config diagnostics"), "{stdout}");
    stdout
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(": ")?;
            let (command, _status) = rest.rsplit_once(" - ")?;
            Some((name.to_string(), command.to_string()))
        })
        .collect()
}

#[cfg(feature = "cli")]
fn claude_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let users: BTreeMap<String, String> = [
        ("notes".to_string(), "/bin/true --notes".to_string()),
        // Claude Code prints the command, a space, then the args (none here).
        ("search".to_string(), "/bin/false ".to_string()),
    ]
    .into();
    assert_eq!(claude_list(&bin, CLAUDE_USER), users);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join(".claude.json");
    std::fs::write(&config, CLAUDE_USER).unwrap();
    let (code, err) = kcap("install", "claude", &config);
    assert_eq!(code, 0, "{err}");
    let mut want = users.clone();
    want.extend(ours());
    assert_eq!(
        claude_list(&bin, &std::fs::read_to_string(&config).unwrap()),
        want
    );

    let (code, err) = kcap("uninstall", "claude", &config);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CLAUDE_USER);
    assert_eq!(claude_list(&bin, CLAUDE_USER), users);

    // A kcap entry the user edited survives install and uninstall, and Claude runs theirs.
    assert_eq!(kcap("install", "claude", &config).0, 0);
    let edited = std::fs::read_to_string(&config).unwrap().replace(
        "\"args\": [\"mcp\", \"review\"]",
        "\"args\": [\"mcp\", \"review\", \"--mine\"]",
    );
    std::fs::write(&config, &edited).unwrap();
    let (code, err) = kcap("install", "claude", &config);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("divergent kcap-review"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited);
    let (code, _) = kcap("uninstall", "claude", &config);
    assert_eq!(code, 0);
    let mut want = users.clone();
    want.insert("kcap-review".into(), "kcap mcp review --mine".into());
    assert_eq!(
        claude_list(&bin, &std::fs::read_to_string(&config).unwrap()),
        want
    );

    // A malformed file is refused and left byte for byte.
    let broken = "{\n  \"mcpServers\": {\n    \"notes\": {\"command\": \"/bin/true\"},\n  }\n}\n";
    std::fs::write(&config, broken).unwrap();
    let (code, err) = kcap("install", "claude", &config);
    assert_eq!(code, 2);
    assert!(err.contains("is not valid JSON"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), broken);
}

const CODEX_USER: &str = "\
# My Codex setup.
model = \"o3\" # pinned

[mcp_servers.notes]
# notes server
command = \"/bin/true\"
args = [\"--notes\"]
env = { NOTES_DIR = \"/srv/notes\" }

[mcp_servers.search]
command = \"/bin/false\"
enabled = false

[tui]
notifications = true
";

/// `codex mcp list --json` with `config.toml` = `text` in a fresh CODEX_HOME:
/// `name → (command line, enabled)`.
fn codex_list(bin: &Path, text: &str) -> BTreeMap<String, (String, bool)> {
    let home = tempfile::tempdir().unwrap();
    let codex_home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(codex_home.path().join("config.toml"), text).unwrap();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .env("HOME", home.path())
        .env("CODEX_HOME", codex_home.path())
        .args(["mcp", "list", "--json"])
        .current_dir(cwd.path());
    let out = run(cmd, "codex mcp list --json");
    assert!(out.status.success(), "codex mcp list: {}", out.stderr);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let t = &s["transport"];
            let mut line = vec![t["command"].as_str().unwrap().to_string()];
            line.extend(
                t["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| a.as_str().unwrap().to_string()),
            );
            (
                s["name"].as_str().unwrap().to_string(),
                (line.join(" "), s["enabled"].as_bool().unwrap()),
            )
        })
        .collect()
}

#[cfg(feature = "cli")]
fn codex_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let users: BTreeMap<String, (String, bool)> = [
        ("notes".to_string(), ("/bin/true --notes".to_string(), true)),
        ("search".to_string(), ("/bin/false".to_string(), false)),
    ]
    .into();
    assert_eq!(codex_list(&bin, CODEX_USER), users);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CODEX_USER).unwrap();
    let (code, err) = kcap("install", "codex", &config);
    assert_eq!(code, 0, "{err}");
    let installed = std::fs::read_to_string(&config).unwrap();
    let mut want = users.clone();
    want.extend(ours().into_iter().map(|(k, v)| (k, (v, true))));
    assert_eq!(codex_list(&bin, &installed), want);
    // Comments and the user's tables are untouched.
    assert!(installed.starts_with(&CODEX_USER[..CODEX_USER.find("[tui]").unwrap()]));

    let (code, err) = kcap("uninstall", "codex", &config);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CODEX_USER);

    // A user-edited kcap entry survives both.
    assert_eq!(kcap("install", "codex", &config).0, 0);
    let edited = std::fs::read_to_string(&config).unwrap().replace(
        "args = [\"mcp\", \"memory\"]",
        "args = [\"mcp\", \"memory\", \"--mine\"]",
    );
    std::fs::write(&config, &edited).unwrap();
    let (code, err) = kcap("install", "codex", &config);
    assert_eq!(code, 1, "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited);
    assert_eq!(kcap("uninstall", "codex", &config).0, 0);
    let mut want = users.clone();
    want.insert(
        "kcap-memory".into(),
        ("kcap mcp memory --mine".into(), true),
    );
    assert_eq!(
        codex_list(&bin, &std::fs::read_to_string(&config).unwrap()),
        want
    );

    // A malformed file is refused and left byte for byte.
    let broken = "[mcp_servers.notes]\ncommand = \"/bin/true\"\ncommand = \"again\"\n";
    std::fs::write(&config, broken).unwrap();
    let (code, err) = kcap("install", "codex", &config);
    assert_eq!(code, 2);
    assert!(err.contains("is not valid TOML"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), broken);
}
