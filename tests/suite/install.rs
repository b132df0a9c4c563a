//! `install` / `uninstall`: merging into a user's own file without touching what they wrote,
//! the ownership ledger, refusals, `--dry-run`, default locations, concurrency and crash
//! safety. Real-client proofs are in `tests/clients/install_clients.rs`.
#![cfg(feature = "cli")]

use crate::common;

use std::path::{Path, PathBuf};

use common::Run;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::registration::{RegistrationOptions, registration_entries};
use kcap_mcp_registry::ops::install::{self, Action};
use proptest::prelude::*;

const IDS: [&str; 6] = [
    "kcap-analytics",
    "kcap-flows",
    "kcap-memory",
    "kcap-review",
    "kcap-sessions",
    "kcap-workitems",
];

/// Runs the binary with `args` and a clean environment holding `env`.
fn cli(args: &[&str], env: &[(&str, &Path)]) -> Run {
    let mut cmd = std::process::Command::new(EXE);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().unwrap();
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

const EXE: &str = env!("CARGO_BIN_EXE_kcap-mcp-registry");

fn install_cli(client: &str, config: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "install",
        "--client",
        client,
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    cli(&args, &[])
}

fn uninstall_cli(client: &str, config: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "uninstall",
        "--client",
        client,
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    cli(&args, &[])
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn ledger(config: &Path) -> serde_json::Value {
    serde_json::from_str(&read(&install::ledger_path(config))).unwrap()
}

const CODEX_USER: &str = "\
# my Codex config
model = \"o3\"   # the model

[mcp_servers.mine]
# a server of my own
command = \"/usr/bin/mine\"
args = [\"--fast\"]
env = { TOKEN = \"t\" }

[profiles.work]
model = \"gpt-5\"
";

#[test]
fn codex_install_adds_ours_and_uninstall_restores_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CODEX_USER).unwrap();
    let r = install_cli("codex", &config, &["--kcap-bin", "/opt/kcap"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    for id in IDS {
        assert!(
            r.stderr.contains(&format!("added {id}: was missing\n")),
            "{}",
            r.stderr
        );
    }
    let text = read(&config);
    // The user's part is there verbatim, and ours follows their server.
    assert!(text.starts_with(&CODEX_USER[..CODEX_USER.find("[profiles.work]").unwrap()]));
    assert!(text.ends_with("[profiles.work]\nmodel = \"gpt-5\"\n"));
    let parsed: toml::Table = toml::from_str(&text).unwrap();
    let servers = parsed["mcp_servers"].as_table().unwrap();
    assert_eq!(servers.len(), 7);
    assert_eq!(
        servers["kcap-review"],
        toml::Value::Table(
            toml::from_str(
                "command = \"/opt/kcap\"\nargs = [\"mcp\", \"review\"]\ndefault_tools_approval_mode = \"approve\"\n"
            )
            .unwrap()
        )
    );
    let l = ledger(&config);
    assert_eq!(l["client"], "codex");
    assert_eq!(l["entries"].as_object().unwrap().len(), 6);

    // Again: nothing to do.
    let again = install_cli("codex", &config, &["--kcap-bin", "/opt/kcap"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stderr.ends_with("needs no change\n"),
        "{}",
        again.stderr
    );
    assert_eq!(read(&config), text);

    let r = uninstall_cli("codex", &config, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(read(&config), CODEX_USER);
    assert!(!install::ledger_path(&config).exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["config.toml"]);
}

#[test]
fn json_clients_keep_comments_key_order_and_indentation() {
    // Gemini reads comments; OpenCode reads comments and trailing commas.
    let cases = [
        (
            "gemini",
            "{\n    // theme first\n    \"theme\": \"dark\",\n    \"mcpServers\": {\n        \"mine\": { \"command\": \"node\", \"args\": [\"s.js\"] }\n    },\n    \"zeta\": [1, 2]\n}\n",
        ),
        (
            "opencode",
            "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  /* providers */\n  \"provider\": {\"x\": {}},\n  \"mcp\": {\n    \"mine\": {\"type\": \"local\", \"command\": [\"m\"],},\n  },\n}\n",
        ),
        (
            "claude",
            "{\n  \"numStartups\": 4,\n  \"mcpServers\": {\n    \"mine\": {\n      \"command\": \"x\"\n    }\n  },\n  \"projects\": {}\n}\n",
        ),
        ("copilot", "{\n  \"mcpServers\": {}\n}\n"),
    ];
    for (client, original) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("settings.json");
        std::fs::write(&config, original).unwrap();
        let r = install_cli(client, &config, &[]);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
        let text = read(&config);
        let block = if client == "opencode" {
            "mcp"
        } else {
            "mcpServers"
        };
        let format = Client::from_name(client).unwrap().registration();
        let entries: Vec<_> = kcap_mcp_registry::ops::list::compiled_entries();
        let want = registration_entries(format, &entries, &RegistrationOptions::default()).unwrap();
        let value = jsonc_value(&text);
        for (id, node) in &want {
            assert_eq!(value[block][id], node.to_json(), "{client} {id}");
        }
        // The user's entries and keys are unchanged, in their order.
        let orig = jsonc_value(original);
        for (key, v) in orig.as_object().unwrap() {
            if key != block {
                assert_eq!(&value[key], v, "{client} {key}");
            }
        }
        for (name, v) in orig[block].as_object().unwrap() {
            assert_eq!(&value[block][name], v, "{client} {name}");
        }
        if client == "gemini" {
            assert!(text.contains("    // theme first\n    \"theme\": \"dark\",\n"));
        }
        let r = uninstall_cli(client, &config, &[]);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
        assert_eq!(read(&config), original, "{client}");
    }
}

fn jsonc_value(text: &str) -> serde_json::Value {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    jsonc_parser::cst::CstRootNode::parse(text, &Default::default())
        .unwrap()
        .value()
        .unwrap()
        .to_serde_value()
        .unwrap()
}

#[test]
fn owned_entries_heal_identical_ones_are_adopted_and_divergent_ones_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    // The user registered kcap-review exactly as we would, and kcap-memory their own way.
    std::fs::write(
        &config,
        "{\n  \"mcpServers\": {\n    \"kcap-review\": {\n      \"command\": \"kcap\",\n      \"args\": [\"mcp\", \"review\"]\n    },\n    \"kcap-memory\": {\n      \"command\": \"/home/me/kcap-dev\",\n      \"args\": [\"mcp\", \"memory\"]\n    }\n  }\n}\n",
    )
    .unwrap();
    let r = install_cli("cursor", &config, &[]);
    assert_eq!(r.code, 1, "a divergent entry is a problem: {}", r.stderr);
    assert!(
        r.stderr
            .contains("adopted kcap-review: already registered identically")
    );
    assert!(r.stderr.contains("divergent kcap-memory: left alone"));
    assert!(r.stderr.contains("added kcap-flows: was missing"));
    let v = jsonc_value(&read(&config));
    assert_eq!(
        v["mcpServers"]["kcap-memory"]["command"],
        "/home/me/kcap-dev"
    );
    assert!(ledger(&config)["entries"].get("kcap-memory").is_none());
    assert!(ledger(&config)["entries"].get("kcap-review").is_some());

    // A new kcap binary: the entries we own are rewritten, the user's is not.
    let r = install_cli("cursor", &config, &["--kcap-bin", "/usr/local/bin/kcap"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr.matches("healed ").count(), 5, "{}", r.stderr);
    let v = jsonc_value(&read(&config));
    assert_eq!(v["mcpServers"].as_object().unwrap().len(), 6);
    assert_eq!(
        v["mcpServers"]["kcap-review"]["command"],
        "/usr/local/bin/kcap"
    );
    assert_eq!(
        v["mcpServers"]["kcap-flows"]["args"],
        serde_json::json!(["mcp", "flows", "--driver", "cursor"])
    );
    assert_eq!(
        v["mcpServers"]["kcap-memory"]["command"],
        "/home/me/kcap-dev"
    );

    // Uninstall removes the five it owns and keeps the user's.
    let r = uninstall_cli("cursor", &config, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        read(&config),
        "{\n  \"mcpServers\": {\n    \"kcap-memory\": {\n      \"command\": \"/home/me/kcap-dev\",\n      \"args\": [\"mcp\", \"memory\"]\n    }\n  }\n}\n"
    );
}

#[test]
fn a_user_edited_kcap_entry_survives_install_and_uninstall() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CODEX_USER).unwrap();
    assert_eq!(install_cli("codex", &config, &[]).code, 0);
    let edited = read(&config).replace(
        "args = [\"mcp\", \"review\"]\n",
        "args = [\"mcp\", \"review\", \"--verbose\"]\n",
    );
    std::fs::write(&config, &edited).unwrap();
    let r = install_cli("codex", &config, &[]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("divergent kcap-review: left alone"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&config), edited);
    let r = uninstall_cli("codex", &config, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let left = read(&config);
    assert_eq!(
        left,
        format!(
            "{}[mcp_servers.kcap-review]\ncommand = \"kcap\"\nargs = [\"mcp\", \"review\", \"--verbose\"]\ndefault_tools_approval_mode = \"approve\"\n\n[profiles.work]\nmodel = \"gpt-5\"\n",
            &CODEX_USER[..CODEX_USER.find("[profiles.work]").unwrap()]
        )
    );
}

#[test]
fn an_entry_edited_after_install_is_kept_by_uninstall() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("settings.json");
    assert_eq!(install_cli("gemini", &config, &[]).code, 0);
    let text = read(&config).replace("\"trust\": true", "\"trust\": false");
    std::fs::write(&config, &text).unwrap();
    let r = uninstall_cli("gemini", &config, &[]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr.matches("kept ").count(), 3, "{}", r.stderr);
    let v = jsonc_value(&read(&config));
    let left: Vec<&String> = v["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(left, ["kcap-analytics", "kcap-review", "kcap-sessions"]);
    assert!(!install::ledger_path(&config).exists());
}

#[test]
fn malformed_files_are_refused_and_left_byte_identical() {
    let cases: [(&str, &str, &[u8], &str); 7] = [
        (
            "claude",
            ".claude.json",
            b"{\"mcpServers\": {},}",
            "is not valid JSON",
        ),
        ("claude", ".claude.json", b"// c\n{}", "is not valid JSON"),
        (
            "copilot",
            "mcp-config.json",
            b"[]",
            "its top level is not a JSON object",
        ),
        (
            "gemini",
            "settings.json",
            b"{\"mcpServers\": []}",
            "`mcpServers` is not an object",
        ),
        (
            "kiro",
            "mcp.json",
            b"{\"mcpServers\": {\"a\": {}, \"a\": {}}}",
            "names MCP server `a` twice",
        ),
        (
            "codex",
            "config.toml",
            b"[mcp_servers.a]\ncommand = \n",
            "is not valid TOML",
        ),
        ("cursor", "mcp.json", b"\xff{}", "is not UTF-8"),
    ];
    for (client, name, bytes, problem) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(name);
        std::fs::write(&config, bytes).unwrap();
        for r in [
            install_cli(client, &config, &[]),
            uninstall_cli(client, &config, &[]),
        ] {
            assert_eq!(r.code, 2, "{client}");
            assert!(
                r.stderr
                    .starts_with(&format!("error: {}: ", config.display())),
                "{}",
                r.stderr
            );
            assert!(r.stderr.contains(problem), "{client}: {}", r.stderr);
            assert!(
                r.stderr.ends_with("; nothing was written\n"),
                "{}",
                r.stderr
            );
            assert_eq!(std::fs::read(&config).unwrap(), bytes);
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
    }
    // An empty file: refused by the clients that refuse it, `{}` for Antigravity and Codex.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("f");
    std::fs::write(&config, "").unwrap();
    assert_eq!(install_cli("claude", &config, &[]).code, 2);
    assert_eq!(install_cli("antigravity", &config, &[]).code, 0);
}

#[test]
fn a_symlinked_config_is_edited_where_it_points_and_a_dangling_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("dotfiles/claude.json");
    std::fs::create_dir(dir.path().join("dotfiles")).unwrap();
    let original = "{\n  \"mcpServers\": {}\n}\n";
    std::fs::write(&real, original).unwrap();
    let link = dir.path().join(".claude.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();

    let r = install_cli("claude", &link, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let written = jsonc_value(&read(&real));
    let names: Vec<&String> = written["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(names, IDS);
    let r = uninstall_cli("claude", &link, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(read(&real), original);

    let dangling = dir.path().join("dangling.json");
    std::os::unix::fs::symlink(dir.path().join("nowhere/x.json"), &dangling).unwrap();
    let r = install_cli("claude", &dangling, &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("is a symbolic link whose target cannot be reached"),
        "{}",
        r.stderr
    );
    assert!(
        std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!dir.path().join("nowhere").exists());
}

#[test]
fn a_config_in_a_missing_directory_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("typo/dir/c.json");
    let r = install_cli("claude", &config, &[]);
    assert_eq!(
        (r.code, r.stderr),
        (
            2,
            format!(
                "error: the directory of --config {} does not exist; create it first, or fix the path\n",
                config.display()
            )
        )
    );
    assert!(!dir.path().join("typo").exists());
}

#[test]
fn dry_run_prints_a_unified_diff_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CODEX_USER).unwrap();
    let r = install_cli("codex", &config, &["--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let p = config.display();
    assert!(
        r.stdout.starts_with(&format!(
            "--- {p} (before)\n+++ {p} (after)\n@@ -7,5 +7,32 @@\n args = [\"--fast\"]\n env = {{ TOKEN = \"t\" }}\n \n+[mcp_servers.kcap-analytics]\n+command = \"kcap\"\n"
        )),
        "{}",
        r.stdout
    );
    // Six tables of 3 or 4 lines (read-only ones carry the approval knob), each with a blank line.
    assert_eq!(
        r.stdout.lines().filter(|l| l.starts_with('+')).count(),
        1 + 27
    );
    assert!(
        !r.stdout
            .lines()
            .any(|l| l.starts_with('-') && !l.starts_with("---"))
    );
    assert!(
        r.stderr
            .ends_with(&format!("dry run: nothing written to {p} or its ledger\n"))
    );
    assert_eq!(read(&config), CODEX_USER);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // Uninstall's dry run after a real install shows the removals.
    assert_eq!(install_cli("codex", &config, &[]).code, 0);
    let r = uninstall_cli("codex", &config, &["--dry-run"]);
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| l.starts_with('-') && !l.starts_with("---"))
            .count(),
        27
    );
    assert!(install::ledger_path(&config).exists());
}

#[test]
fn default_config_follows_each_clients_home_variables() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let other = tempfile::tempdir().unwrap();
    let o = other.path();
    type Case<'a> = (&'a str, &'a [(&'a str, &'a Path)], PathBuf);
    let cases: [Case; 12] = [
        ("claude", &[("HOME", h)], h.join(".claude.json")),
        (
            "claude",
            &[("HOME", h), ("CLAUDE_CONFIG_DIR", o)],
            o.join(".claude.json"),
        ),
        ("codex", &[("HOME", h)], h.join(".codex/config.toml")),
        (
            "codex",
            &[("HOME", h), ("CODEX_HOME", o)],
            o.join("config.toml"),
        ),
        ("gemini", &[("HOME", h)], h.join(".gemini/settings.json")),
        (
            "opencode",
            &[("HOME", h)],
            h.join(".config/opencode/opencode.json"),
        ),
        (
            "opencode",
            &[("HOME", h), ("XDG_CONFIG_HOME", o)],
            o.join("opencode/opencode.json"),
        ),
        (
            "copilot",
            &[("HOME", h), ("COPILOT_HOME", o)],
            o.join("mcp-config.json"),
        ),
        ("cursor", &[("HOME", h)], h.join(".cursor/mcp.json")),
        ("kiro", &[("HOME", h)], h.join(".kiro/settings/mcp.json")),
        (
            "kiro",
            &[("HOME", h), ("KIRO_HOME", o)],
            o.join("settings/mcp.json"),
        ),
        (
            "antigravity",
            &[("HOME", h)],
            h.join(".gemini/config/mcp_config.json"),
        ),
    ];
    for (client, env, want) in cases {
        let r = cli(&["install", "--client", client, "--dry-run"], env);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
        assert!(
            r.stdout
                .starts_with(&format!("--- {} (before)\n", want.display())),
            "{client}: {}",
            r.stdout
        );
    }
    let r = cli(&["install", "--client", "codex", "--dry-run"], &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("HOME is not set"), "{}", r.stderr);
}

#[test]
fn a_new_file_is_created_and_removed_again_and_a_bom_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp-config.json");
    assert_eq!(install_cli("copilot", &config, &[]).code, 0);
    assert!(ledger(&config)["file_created"].as_bool().unwrap());
    assert_eq!(uninstall_cli("copilot", &config, &[]).code, 0);
    assert!(!config.exists());
    assert_eq!(
        std::fs::read_dir(config.parent().unwrap()).unwrap().count(),
        0
    );

    let config = dir.path().join("bom.toml");
    let original = format!("\u{feff}{CODEX_USER}");
    std::fs::write(&config, &original).unwrap();
    assert_eq!(install_cli("codex", &config, &[]).code, 0);
    assert!(read(&config).starts_with("\u{feff}# my Codex config\n"));
    assert_eq!(uninstall_cli("codex", &config, &[]).code, 0);
    assert_eq!(read(&config), original);
}

#[test]
fn concurrent_installs_leave_one_entry_per_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CODEX_USER).unwrap();
    let children: Vec<_> = (0..6)
        .map(|i| {
            let bin_arg = if i % 2 == 0 { "/a/kcap" } else { "/b/kcap" };
            std::process::Command::new(EXE)
                .args(["install", "--client", "codex", "--config"])
                .arg(&config)
                .args(["--kcap-bin", bin_arg])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let text = read(&config);
    let parsed: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(parsed["mcp_servers"].as_table().unwrap().len(), 7);
    // Whichever ran last, the ledger owns exactly what the file holds: uninstall restores it.
    assert_eq!(uninstall_cli("codex", &config, &[]).code, 0);
    assert_eq!(read(&config), CODEX_USER);
}

#[test]
fn a_crash_between_the_config_and_the_ledger_heals_on_the_next_run() {
    for (client, name, original) in [
        ("codex", "config.toml", CODEX_USER),
        (
            "claude",
            ".claude.json",
            "{\n  \"mcpServers\": {\n    \"mine\": {\n      \"command\": \"x\"\n    }\n  }\n}\n",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(name);
        std::fs::write(&config, original).unwrap();
        // First install, killed after the config write: the config is new, the ledger absent.
        let crashed = std::process::Command::new(EXE)
            .args(["install", "--client", client, "--config"])
            .arg(&config)
            .env(install::CRASH_BEFORE_LEDGER_VAR, "1")
            .output()
            .unwrap();
        assert!(!crashed.status.success());
        let after_crash = read(&config);
        assert_ne!(after_crash, original);
        assert!(!install::ledger_path(&config).exists());
        // The next run adopts every entry: no duplicate, nothing lost.
        let r = install_cli(client, &config, &[]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stderr.matches("adopted ").count(), 6, "{}", r.stderr);
        assert_eq!(read(&config), after_crash);
        assert_eq!(uninstall_cli(client, &config, &[]).code, 0);
        assert_eq!(read(&config), original, "{client}");

        // A crash while healing (a new kcap binary): the next run finds the healed entries.
        assert_eq!(install_cli(client, &config, &[]).code, 0);
        let crashed = std::process::Command::new(EXE)
            .args([
                "install",
                "--client",
                client,
                "--kcap-bin",
                "/new/kcap",
                "--config",
            ])
            .arg(&config)
            .env(install::CRASH_BEFORE_LEDGER_VAR, "1")
            .output()
            .unwrap();
        assert!(!crashed.status.success());
        let r = install_cli(client, &config, &["--kcap-bin", "/new/kcap"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stderr.matches("adopted ").count(), 6, "{}", r.stderr);
        assert_eq!(uninstall_cli(client, &config, &[]).code, 0);
        assert_eq!(read(&config), original, "{client}");

        // A crash during uninstall: the next uninstall forgets what is already gone.
        assert_eq!(install_cli(client, &config, &[]).code, 0);
        let crashed = std::process::Command::new(EXE)
            .args(["uninstall", "--client", client, "--config"])
            .arg(&config)
            .env(install::CRASH_BEFORE_LEDGER_VAR, "1")
            .output()
            .unwrap();
        assert!(!crashed.status.success());
        assert_eq!(read(&config), original);
        let r = uninstall_cli(client, &config, &[]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stderr.matches("forgotten ").count(), 6, "{}", r.stderr);
        assert!(!install::ledger_path(&config).exists());
        assert_eq!(read(&config), original);
    }
}

#[test]
fn the_ledger_records_sha256_of_the_key_sorted_compact_entry() {
    let value = serde_json::json!({"command": "kcap", "args": ["mcp", "review"], "env": {"B": "1", "A": "2"}});
    // `{"args":["mcp","review"],"command":"kcap","env":{"A":"2","B":"1"}}`
    assert_eq!(
        install::fingerprint(&value),
        format!(
            "sha256:{}",
            sha256_hex(br#"{"args":["mcp","review"],"command":"kcap","env":{"A":"2","B":"1"}}"#)
        )
    );
}

/// SHA-256 by `sha256sum`, an implementation independent of the crate's.
fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// A random user config: servers of their own (some named like ours but different), other
/// keys before and after the block, comments (where the syntax has them), random key order.
fn user_toml() -> impl Strategy<Value = String> {
    let server = (
        "[a-z]{1,8}",
        proptest::collection::vec(("[a-z_]{1,6}", "[ -~&&[^\"\\\\]]{0,8}"), 1..4),
        proptest::option::of("[ -~&&[^\n]]{0,20}"),
        any::<bool>(),
    );
    (
        proptest::collection::vec(server, 0..5),
        proptest::collection::vec(("[a-y]{1,6}", 0..1000i64), 0..3),
        proptest::option::of("[ -~]{0,30}"),
        any::<bool>(),
    )
        .prop_map(|(servers, top, head, ours_too)| {
            let mut out = String::new();
            if let Some(c) = head {
                out.push_str(&format!("# {c}\n"));
            }
            let mut seen = std::collections::BTreeSet::new();
            for (k, v) in top {
                if seen.insert(k.clone()) {
                    out.push_str(&format!("{k} = {v}\n"));
                }
            }
            let mut names = std::collections::BTreeSet::new();
            for (i, (name, keys, comment, kcap_name)) in servers.into_iter().enumerate() {
                let name = if kcap_name && ours_too {
                    IDS[i % 6].to_string()
                } else {
                    format!("u-{name}")
                };
                if !names.insert(name.clone()) {
                    continue;
                }
                out.push('\n');
                if let Some(c) = comment {
                    out.push_str(&format!("# {c}\n"));
                }
                out.push_str(&format!("[mcp_servers.{name}]\n"));
                let mut keys_seen = std::collections::BTreeSet::new();
                for (k, v) in keys {
                    if keys_seen.insert(k.clone()) {
                        out.push_str(&format!("{k} = \"{v}\"\n"));
                    }
                }
            }
            out.push_str("\n[tui]\nnotifications = true\n");
            out
        })
}

fn user_json(comments: bool) -> impl Strategy<Value = String> {
    let server = (
        "[a-z]{1,8}",
        proptest::collection::vec(("[a-z]{1,6}", "[a-z0-9 /.]{0,8}"), 0..4),
        any::<bool>(),
    );
    (
        proptest::collection::vec(server, 0..5),
        proptest::collection::vec(("[a-z]{1,6}", 0..1000i64), 0..3),
        proptest::option::of(any::<bool>()),
        prop_oneof![Just("  "), Just("    "), Just("\t")],
        any::<bool>(),
        "[a-z ]{0,12}",
    )
        .prop_map(move |(servers, top, block, indent, block_first, comment)| {
            let mut props: Vec<String> = Vec::new();
            let mut seen = std::collections::BTreeSet::new();
            for (k, v) in top {
                if seen.insert(k.clone()) {
                    props.push(format!("{indent}\"{k}\": {v}"));
                }
            }
            if let Some(ours_too) = block {
                let mut entries = Vec::new();
                let mut names = std::collections::BTreeSet::new();
                for (i, (name, keys, kcap_name)) in servers.into_iter().enumerate() {
                    let name = if kcap_name && ours_too {
                        IDS[i % 6].to_string()
                    } else {
                        format!("u-{name}")
                    };
                    if !names.insert(name.clone()) {
                        continue;
                    }
                    let mut fields = Vec::new();
                    let mut ks = std::collections::BTreeSet::new();
                    for (k, v) in keys {
                        if ks.insert(k.clone()) {
                            fields.push(format!("\"{k}\": \"{v}\""));
                        }
                    }
                    let c = if comments && !comment.is_empty() {
                        format!("{indent}{indent}// {comment}\n")
                    } else {
                        String::new()
                    };
                    entries.push(format!(
                        "{c}{indent}{indent}\"{name}\": {{{}}}",
                        fields.join(", ")
                    ));
                }
                let block = if entries.is_empty() {
                    format!("{indent}\"mcpServers\": {{}}")
                } else {
                    format!(
                        "{indent}\"mcpServers\": {{\n{}\n{indent}}}",
                        entries.join(",\n")
                    )
                };
                if block_first {
                    props.insert(0, block);
                } else {
                    props.push(block);
                }
            }
            if props.is_empty() {
                "{}\n".to_string()
            } else {
                format!("{{\n{}\n}}\n", props.join(",\n"))
            }
        })
}

/// Install then uninstall through the library, in a fresh directory.
fn round_trip(client: Client, name: &str, original: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join(name);
    std::fs::write(&config, original).unwrap();
    let format = client.registration();
    let entries = kcap_mcp_registry::ops::list::compiled_entries();
    let servers = registration_entries(format, &entries, &RegistrationOptions::default()).unwrap();
    let installed = install::install(format, &config, &servers, false).unwrap();
    // Every server is registered, or left alone where the user has their own.
    for (id, _) in &servers {
        let action = installed.actions.iter().find(|(n, _)| n == id).unwrap().1;
        assert!(
            matches!(action, Action::Added | Action::Divergent | Action::Adopted),
            "{id}: {action:?}"
        );
    }
    let middle = std::fs::read_to_string(&config).unwrap();
    install::uninstall(format, &config, &servers, false).unwrap();
    (middle, std::fs::read_to_string(&config).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn install_then_uninstall_is_the_identity_on_toml(original in user_toml()) {
        let (_, after) = round_trip(Client::Codex, "config.toml", &original);
        prop_assert_eq!(after, original);
    }

    #[test]
    fn install_then_uninstall_is_the_identity_on_json(original in user_json(false)) {
        let (middle, after) = round_trip(Client::Claude, ".claude.json", &original);
        prop_assert!(serde_json::from_str::<serde_json::Value>(&middle).is_ok());
        prop_assert_eq!(after, original);
    }

    #[test]
    fn install_then_uninstall_is_the_identity_on_jsonc(original in user_json(true)) {
        let (_, after) = round_trip(Client::Gemini, "settings.json", &original);
        prop_assert_eq!(after, original);
    }
}

#[test]
fn uninstall_without_the_ledger_removes_entries_identical_to_kcaps_and_reports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CODEX_USER).unwrap();
    assert_eq!(install_cli("codex", &config, &[]).code, 0);
    // One of kcap's entries edited by the user, then the ledger lost.
    let edited = read(&config).replace(
        "args = [\"mcp\", \"memory\"]\n",
        "args = [\"mcp\", \"memory\", \"--mine\"]\n",
    );
    std::fs::write(&config, &edited).unwrap();
    std::fs::remove_file(install::ledger_path(&config)).unwrap();

    let r = uninstall_cli("codex", &config, &["--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(read(&config), edited);

    let r = uninstall_cli("codex", &config, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr.matches("removed ").count(), 5, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("removed kcap-review: no ledger records it, but it is identical"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("left kcap-memory: left in place: no ledger records it"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("wrote "), "{}", r.stderr);
    let parsed: toml::Table = toml::from_str(&read(&config)).unwrap();
    let left: Vec<&String> = parsed["mcp_servers"].as_table().unwrap().keys().collect();
    assert_eq!(left, ["kcap-memory", "mine"]);
    assert!(!install::ledger_path(&config).exists());

    // Entries written with another --kcap-bin are recognised when uninstall gets the same.
    std::fs::write(&config, CODEX_USER).unwrap();
    assert_eq!(
        install_cli("codex", &config, &["--kcap-bin", "/opt/kcap"]).code,
        0
    );
    std::fs::remove_file(install::ledger_path(&config)).unwrap();
    let r = uninstall_cli("codex", &config, &[]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stderr.matches("\nleft ").count() + 1, 6, "{}", r.stderr);
    assert!(r.stderr.starts_with("left kcap-analytics: left in place"));
    let r = uninstall_cli("codex", &config, &["--kcap-bin", "/opt/kcap"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(read(&config), CODEX_USER);
}

/// Issue #15 review: uninstall where kcap was never installed creates nothing, for every
/// client's default file (whose directory may not exist either) and for `--config`.
#[test]
fn uninstall_of_a_missing_file_creates_nothing() {
    for client in [
        "claude",
        "codex",
        "gemini",
        "opencode",
        "copilot",
        "cursor",
        "kiro",
        "antigravity",
    ] {
        let home = tempfile::tempdir().unwrap();
        let run = cli(&["uninstall", "--client", client], &[("HOME", home.path())]);
        assert_eq!(run.code, 0, "{client}: {}", run.stderr);
        assert!(
            run.stderr.contains("does not exist: nothing to uninstall"),
            "{client}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains(".kcap-tmp-"), "{}", run.stderr);
        let left: Vec<_> = std::fs::read_dir(home.path()).unwrap().collect();
        assert!(left.is_empty(), "{client}: created {left:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let never = dir.path().join("never.json");
    let run = uninstall_cli("claude", &never, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!never.exists());
}

/// Uninstall that deletes the file kcap created says so, not "wrote".
#[test]
fn uninstall_that_removes_the_created_file_says_removed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("new.json");
    assert_eq!(install_cli("claude", &config, &[]).code, 0);
    let run = uninstall_cli("claude", &config, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!config.exists());
    assert!(
        run.stderr.contains("removed ") && run.stderr.contains("kcap created it"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("wrote ")),
        "{}",
        run.stderr
    );
}

/// A 0444 config is refused (mode bits, so also when the tests run as root), and left as it
/// was; a writable one in the same directory is edited.
#[cfg(unix)]
#[test]
fn a_read_only_config_is_refused() {
    use common::stand_in::{file_mode, set_file_mode};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ro.json");
    std::fs::write(&config, "{}\n").unwrap();
    set_file_mode(&config, 0o444);
    let run = install_cli("claude", &config, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("is read-only"), "{}", run.stderr);
    assert_eq!(read(&config), "{}\n");
    assert_eq!(file_mode(&config), 0o444);
    assert!(!install::ledger_path(&config).exists());
    set_file_mode(&config, 0o644);
    assert_eq!(install_cli("claude", &config, &[]).code, 0);
}

/// A FIFO (or any non-regular file) is refused before it is opened: nothing blocks.
#[cfg(unix)]
#[test]
fn a_fifo_is_refused_by_install_check_and_doctor_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    let claude_f = format!("claude={f}");
    let registry = concat!(env!("CARGO_MANIFEST_DIR"), "/registry");
    for args in [
        vec!["install", "--client", "claude", "--config", f],
        vec!["check", registry, "--against", f],
        vec!["doctor", "--client", "claude", "--config", &claude_f],
    ] {
        // A blocked read would hang the test; a thread with a deadline turns that into a
        // failure.
        let (tx, rx) = std::sync::mpsc::channel();
        let owned: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        std::thread::spawn(move || {
            let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
            let _ = tx.send(cli(&refs, &[]));
        });
        let run = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{args:?} blocked on the FIFO"));
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr
                .contains("a FIFO (named pipe), not a regular file"),
            "{args:?}: {}",
            run.stderr
        );
    }
}
