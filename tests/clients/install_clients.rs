//! Real-client proofs of `install` / `uninstall` (issue 15): the pinned Claude Code
//! (`claude mcp list`) and Codex CLI (`codex mcp list --json`) read the merged file, each run
//! with a throwaway HOME (and CODEX_HOME) holding a copy of it, so a client rewriting its own
//! file cannot blur what `install` wrote. Gemini CLI (`gemini mcp list`), Copilot CLI
//! (`copilot mcp list --json`) and OpenCode (`opencode debug config`) get the same proof on a
//! JSONC user file with comments.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::peers::{inherited_path, peer, run};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        #[cfg(feature = "cli")]
        claude_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
        #[cfg(feature = "cli")]
        codex_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
        #[cfg(feature = "cli")]
        gemini_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
        #[cfg(feature = "cli")]
        copilot_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
        #[cfg(feature = "cli")]
        opencode_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall,
    ]
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

/// The registry's servers for a client that stamps `--driver <client>` on `driver_stamp` ones.
fn ours_stamped(client: &str) -> BTreeMap<String, String> {
    kcap_mcp_registry::servers()
        .iter()
        .filter(|s| s.allowlistable)
        .map(|s| {
            let mut line = format!("kcap {}", s.args.join(" "));
            if s.driver_stamp {
                line.push_str(&format!(" --driver {client}"));
            }
            (s.id.to_string(), line)
        })
        .collect()
}

/// The proof every JSON client shares: `user` (a user file holding the servers `users`, with
/// comments and unrelated keys) at `name` in a fresh directory; `list` is the real client's
/// listing of a file's text; `edit` turns an installed file into one whose `kcap-review`
/// entry the user changed, and `edited` is what the client then lists for it; `broken` is a
/// file the client cannot read.
fn json_client_proof(
    client: &str,
    name: &str,
    user: &str,
    list: &dyn Fn(&str) -> BTreeMap<String, String>,
    edit: (&str, &str, &str),
    broken: &str,
) {
    let users = list(user);
    assert!(users.len() >= 2, "{users:?}");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join(name);
    std::fs::write(&config, user).unwrap();
    let (code, err) = kcap("install", client, &config);
    assert_eq!(code, 0, "{err}");
    let mut want = users.clone();
    want.extend(ours_stamped(client));
    assert_eq!(list(&std::fs::read_to_string(&config).unwrap()), want);

    let (code, err) = kcap("uninstall", client, &config);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), user);
    assert_eq!(list(user), users);

    // A kcap entry the user edited survives install and uninstall, and the client runs theirs.
    assert_eq!(kcap("install", client, &config).0, 0);
    let installed = std::fs::read_to_string(&config).unwrap();
    let edited = installed.replacen(edit.0, edit.1, 1);
    assert_ne!(edited, installed, "the edit applies");
    std::fs::write(&config, &edited).unwrap();
    let (code, err) = kcap("install", client, &config);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("divergent kcap-review"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited);
    assert_eq!(kcap("uninstall", client, &config).0, 0);
    let mut want = users.clone();
    want.insert("kcap-review".into(), edit.2.into());
    assert_eq!(list(&std::fs::read_to_string(&config).unwrap()), want);

    // A malformed file is refused and left byte for byte.
    std::fs::write(&config, broken).unwrap();
    let (code, err) = kcap("install", client, &config);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), broken);
}

const REVIEW_EDIT: (&str, &str, &str) = (
    "\"mcp\", \"review\"]",
    "\"mcp\", \"review\", \"--mine\"]",
    "kcap mcp review --mine",
);

const GEMINI_USER: &str = "// My Gemini settings.\n{\n  \"ui\": {\"theme\": \"GitHub\"},\n  /* servers */\n  \"mcpServers\": {\n    \"notes\": {\"command\": \"/bin/true\", \"args\": [\"--notes\"]},\n    \"search\": {\"command\": \"/bin/false\"}\n  }\n}\n";

/// `gemini mcp list` (its listing is on stderr; it starts every server) with `settings.json`
/// = `text` in a fresh HOME: `name → command line`.
fn gemini_list(bin: &Path, text: &str) -> BTreeMap<String, String> {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    std::fs::write(home.path().join(".gemini/settings.json"), text).unwrap();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .env("HOME", home.path())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .args(["mcp", "list"])
        .current_dir(project.path());
    let out = run(cmd, "gemini mcp list");
    assert!(out.status.success(), "gemini mcp list: {}", out.stderr);
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), out.stderr);
    assert!(!all.contains("Invalid configuration"), "{all}");
    all.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(' ')?.1.split_once(": ")?;
            let (command, _) = rest.rsplit_once(" (stdio)")?;
            Some((name.to_string(), command.to_string()))
        })
        .collect()
}

#[cfg(feature = "cli")]
fn gemini_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    let list = |text: &str| gemini_list(&bin, text);
    assert_eq!(
        list(GEMINI_USER),
        [
            ("notes".to_string(), "/bin/true --notes".to_string()),
            // Gemini prints the command, a space, then the args (none here).
            ("search".to_string(), "/bin/false ".to_string()),
        ]
        .into()
    );
    json_client_proof(
        "gemini",
        "settings.json",
        GEMINI_USER,
        &list,
        REVIEW_EDIT,
        "{\"mcpServers\": {\"notes\": {\"command\": \"/bin/true\"},}}\n",
    );
}

const COPILOT_USER: &str = "{\n  \"mcpServers\": {\n    \"notes\": {\"type\": \"stdio\", \"command\": \"/bin/true\", \"args\": [\"--notes\"], \"env\": {\"NOTES\": \"1\"}},\n    \"search\": {\"command\": \"/bin/false\", \"args\": []}\n  },\n  \"x-note\": \"mine\"\n}\n";

/// `copilot mcp list --json` (nothing started) with `mcp-config.json` = `text` in a fresh
/// COPILOT_HOME, sharing the unpacked package cache (`KCAP_COPILOT_CACHE`, else
/// `.peers/copilot-cache`): `name → command line`.
fn copilot_list(bin: &Path, text: &str) -> BTreeMap<String, String> {
    let home = tempfile::tempdir().unwrap();
    let copilot_home = home.path().join(".copilot");
    std::fs::create_dir_all(&copilot_home).unwrap();
    std::fs::write(copilot_home.join("mcp-config.json"), text).unwrap();
    let cache = std::env::var_os("KCAP_COPILOT_CACHE")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/copilot-cache"),
            Into::into,
        );
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .env("HOME", home.path())
        .env("COPILOT_HOME", &copilot_home)
        .env("XDG_CACHE_HOME", cache)
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        .env("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1")
        .args(["mcp", "list", "--json"])
        .current_dir(home.path());
    let out = run(cmd, "copilot mcp list --json");
    assert!(out.status.success(), "copilot mcp list: {}", out.stderr);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list["mcpServers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, s)| {
            let mut line = vec![s["command"].as_str().unwrap().to_string()];
            line.extend(
                s["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| a.as_str().unwrap().to_string()),
            );
            (name.clone(), line.join(" "))
        })
        .collect()
}

#[cfg(feature = "cli")]
fn copilot_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall() {
    let Some(bin) = peer("KCAP_COPILOT_BIN") else {
        return;
    };
    let list = |text: &str| copilot_list(&bin, text);
    assert_eq!(
        list(COPILOT_USER),
        [
            ("notes".to_string(), "/bin/true --notes".to_string()),
            ("search".to_string(), "/bin/false".to_string()),
        ]
        .into()
    );
    json_client_proof(
        "copilot",
        "mcp-config.json",
        COPILOT_USER,
        &list,
        REVIEW_EDIT,
        "{\"mcpServers\": {\"notes\": {\"command\": \"/bin/true\"}}\n",
    );
}

const OPENCODE_USER: &str = "// My OpenCode config.\n{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"theme\": \"opencode\",\n  \"mcp\": {\n    // notes\n    \"notes\": {\"type\": \"local\", \"command\": [\"/bin/true\", \"--notes\"], \"enabled\": true},\n    \"search\": {\"type\": \"local\", \"command\": [\"/bin/false\"], \"environment\": {\"A\": \"1\"}},\n  },\n}\n";

/// `opencode debug config` (the resolved config; nothing started) with `opencode.json` =
/// `text` in fresh XDG directories: `name → command line`.
fn opencode_list(bin: &Path, text: &str) -> BTreeMap<String, String> {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let config = home.path().join(".config");
    std::fs::create_dir_all(config.join("opencode")).unwrap();
    std::fs::write(config.join("opencode/opencode.json"), text).unwrap();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", &config)
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env("XDG_STATE_HOME", home.path().join(".local/state"))
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .args(["debug", "config"])
        .current_dir(project.path());
    let out = run(cmd, "opencode debug config");
    assert!(
        out.status.success(),
        "opencode debug config: {}",
        out.stderr
    );
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    config["mcp"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, s)| {
            let line: Vec<&str> = s["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            (name.clone(), line.join(" "))
        })
        .collect()
}

#[cfg(feature = "cli")]
fn opencode_lists_the_users_servers_and_ours_after_install_and_only_theirs_after_uninstall() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let list = |text: &str| opencode_list(&bin, text);
    assert_eq!(
        list(OPENCODE_USER),
        [
            ("notes".to_string(), "/bin/true --notes".to_string()),
            ("search".to_string(), "/bin/false".to_string()),
        ]
        .into()
    );
    json_client_proof(
        "opencode",
        "opencode.json",
        OPENCODE_USER,
        &list,
        REVIEW_EDIT,
        "{\"mcp\": {\"notes\": {\"type\": \"local\", \"command\": [\"/bin/true\"]}\n",
    );
}
