//! Issue 22 on the real Codex CLI (0.169.0): one test per class, each a reviewer launch
//! carried out exactly as its plan (`Client::plan`) says: the client starts from an empty environment plus
//! `plan.env` plus the daemon's values of `plan.env_inherit`, after `plan.dirs` and
//! `plan.files` are written under the launch directory and `plan.worktree_remove` is removed
//! from the worktree, with `plan.argv` in `plan.cwd`. The argv runs Codex's interactive TUI,
//! so the launch gets a pseudo-terminal from util-linux `script`.
//!
//! Every launch has a hostile daemon: its `HOME` (a directory of the test standing for the
//! user's real home) holds a `~/.codex` with servers, hooks, `notify`, trust, `.env` and
//! skills, a `~/.bashrc` that leaves a marker, and its environment carries `CODEX_HOME`,
//! `KCAP_*`, API keys, proxies and other client variables; the worktree holds a `.codex/`
//! with servers, hooks and env, and `.agents/skills`. Administrator files are tried in a
//! private mount namespace with an overlay on `/etc` (the machine's `/etc` is never written).
//!
//! Judged on the real client: what the recorder MCP servers saw (exactly the injected
//! servers, with exactly their argv and `KCAP_*` environment, and no variable beyond Codex's
//! own whitelist), which hook marker files appeared (none), and what the stand-in model API
//! (`common::model_api`, on 127.0.0.1; the plan's `openai_base_url`) was offered: the result
//! channel's tools, nothing hidden, no server but ours. Each client run is bounded (60 s)
//! and its process group killed. Skipped without `KCAP_CODEX_BIN` (failing under
//! `KCAP_REQUIRE_PEERS=1`), or without `script`/`unshare` where a case needs them.

use crate::common;
#[path = "isolation_codex/world.rs"]
mod world;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::records::plan_env;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::codex::{MANAGED_FILES, keep_api_key};
use kcap_mcp_registry::clients::plan::EnvVar;
use kcap_mcp_registry::clients::root::managed_preflight;
use kcap_mcp_registry::{Policy, RenderError};
use world::{API_KEY, LAUNCH_TIMEOUT, World, git_init, offered};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        settings_env_reaches_no_server,
        hooks_run_nowhere,
        permission_rules_hide_no_tool,
        startup_knobs_drop_no_server,
        administrator_files_are_refused,
        configuration_added_after_the_render_is_not_read,
        remote_configuration_is_not_fetched,
        client_variables_do_not_reach_the_client,
        trust_is_not_inherited_from_a_parent_folder,
        no_inventory_is_needed_codex_lists_only_the_injected_servers,
        a_prompt_is_only_a_prompt,
        no_login_shell_profile_runs,
        behind_the_door_the_key_stays_outside_and_only_the_door_is_reached,
        instruction_files_do_not_reach_the_model,
    ]
}

/// Class 1. The user's `env`/`env_vars` on our result channel, its `.env`, the repository's
/// `env` and `shell_environment_policy`, and the daemon's `KCAP_*` and API key: none reaches
/// a server (Codex passes servers a whitelist; the rest came only from configuration the
/// reviewer no longer reads). An administrator's `config.toml`, whose `env_vars` did pass the
/// API key to our server, is refused (class 5 shows the real effect).
fn settings_env_reaches_no_server() {
    let Some(w) = World::new() else { return };
    let seen = w.launch();
    seen.assert_isolated();
    for r in &seen.records {
        assert!(
            !r.env.contains_key("OPENAI_API_KEY") && !r.env.contains_key("EVIL"),
            "{r:?}"
        );
    }
}

/// Class 2. Hooks of the user (`config.toml` and `hooks.json`, SessionStart,
/// UserPromptSubmit, Stop), its `notify` and `~/.bashrc` (run at session start when `HOME`
/// is the user's), and the repository's hooks: no marker. The administrator's hooks run
/// without trust and are refused (class 5).
fn hooks_run_nowhere() {
    let Some(w) = World::new() else { return };
    let seen = w.launch();
    assert!(seen.marks.is_empty(), "commands ran: {:?}", seen.marks);
    seen.assert_isolated();
}

/// Class 3. The user's `disabled_tools` and the repository's `enabled_tools` on our result
/// channel would hide `submit_review_result`: the model is offered both of its tools. A
/// `requirements.toml` allowlist (our servers silently not started) is refused (class 5).
fn permission_rules_hide_no_tool() {
    let Some(w) = World::new() else { return };
    let seen = w.launch();
    assert_eq!(
        offered(&seen.request)["mcp__kcap_flow_result"],
        ["send_flow_message", "submit_review_result"]
            .map(String::from)
            .into()
    );
    seen.assert_isolated();
}

/// Class 4. `startup_timeout_sec = 0.001` on our result channel (user and repository) and
/// `mcp_optional_startup_grace_ms = 0` would drop a server answering `initialize` after
/// 300 ms: both start and their tools are offered. `CODEX_MCP_PROTOCOL_VERSION` in the
/// daemon's environment does not reach the client.
fn startup_knobs_drop_no_server() {
    let Some(mut w) = World::new() else { return };
    w.daemon_env
        .insert("CODEX_MCP_PROTOCOL_VERSION".into(), "1999-01-01".into());
    let seen = w.launch();
    seen.assert_isolated();
}

/// Class 5. Each administrator file, laid over `/etc` in a private mount namespace, has its
/// measured effect on a launch of the plan (a server of `config.toml` starts and its hook
/// runs, `hooks.json` runs, `managed_config.toml` adds a server and env to ours, a
/// `requirements.toml` allowlist keeps ours from starting), and the preflight refuses the
/// launch naming each one, `/etc/codex/agents` too.
fn administrator_files_are_refused() {
    let Some(mut w) = World::new() else { return };
    if !common::etc::can_overlay() {
        return;
    }
    let sys = w.server("sys-evil");
    let hooks = w.hooks_toml("sys");
    w.write("etc-add/codex/config.toml", &format!("{sys}{hooks}"));
    w.write("etc-add/codex/hooks.json", &w.hooks_json("etc"));
    w.write(
        "etc-add/codex/managed_config.toml",
        &format!(
            "{}[mcp_servers.kcap-flow-result.env]\nKCAP_FLOW_CAPABILITY_URL = \"http://managed\"\n",
            w.server("managed-evil")
        ),
    );
    w.etc = true;
    let seen = w.launch_plan(
        w.plan(),
        &["flow-result", "review", "sys-evil", "managed-evil"],
    );
    let started: BTreeSet<String> = seen
        .records
        .iter()
        .filter_map(|r| r.argv.last().cloned())
        .collect();
    assert!(
        started.contains("sys-evil") && started.contains("managed-evil"),
        "{started:?}"
    );
    let flow = seen
        .records
        .iter()
        .find(|r| r.argv.ends_with(&["flow-result".into()]))
        .unwrap();
    assert_eq!(
        flow.env.get("KCAP_FLOW_CAPABILITY_URL").map(String::as_str),
        Some("http://managed")
    );
    for m in ["sys-toml-SessionStart", "etc-json-SessionStart"] {
        assert!(
            seen.marks.iter().any(|x| x == m),
            "{m} not in {:?}",
            seen.marks
        );
    }
    let system_root = w.path("sysroot");
    for (rel, contents) in [
        ("config.toml", format!("{sys}{hooks}")),
        ("hooks.json", w.hooks_json("etc")),
        ("managed_config.toml", String::new()),
        (
            "requirements.toml",
            "[mcp_servers.only]\nidentity = { command = \"/bin/true\" }\n".into(),
        ),
        ("agents/reviewer.toml", String::new()),
    ] {
        let _ = std::fs::remove_dir_all(&system_root);
        let file = system_root.join("etc/codex").join(rel);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, contents).unwrap();
        let want = format!("/etc/codex/{}", rel.split('/').next().unwrap());
        match managed_preflight(Client::Codex, &MANAGED_FILES, &system_root) {
            Err(RenderError::Managed { file, .. }) => assert_eq!(file, PathBuf::from(&want)),
            other => panic!("{want}: {other:?}"),
        }
    }
    std::fs::remove_dir_all(&system_root).unwrap();
    assert_eq!(
        managed_preflight(Client::Codex, &MANAGED_FILES, &system_root),
        Ok(())
    );

    // A requirements allowlist keeps both our servers from starting, silently.
    let mut w = World::new().unwrap();
    w.write(
        "etc-add/codex/requirements.toml",
        "[mcp_servers.only]\nidentity = { command = \"/bin/true\" }\n",
    );
    w.etc = true;
    let seen = w.launch_plan(w.plan(), &[]);
    assert!(seen.records.is_empty(), "{:?}", seen.records);
    assert!(
        offered(&seen.request).is_empty(),
        "{:?}",
        offered(&seen.request)
    );
}

/// Class 6. A server and a hook added to the user's configuration after the render, and a
/// `.codex/` the repository would carry after the daemon's removal, do not reach the
/// reviewer: the plan's `CODEX_HOME` is written by the plan and the worktree's is removed.
fn configuration_added_after_the_render_is_not_read() {
    let Some(w) = World::new() else { return };
    let plan = w.plan();
    let late = format!("{}{}", w.server("user-late"), w.hooks_toml("late"));
    let config = w.path("user/.codex/config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{before}{late}")).unwrap();
    let seen = w.launch_plan(plan, &["flow-result", "review"]);
    seen.assert_isolated();
}

/// Class 7. `auth.json` with ChatGPT sign-in tokens of a workspace plan made Codex fetch
/// `/wham/config/bundle`, whose servers and hooks started (measured): the plan keeps only the
/// API key, refuses a sign-in without one, and the launch asks for nothing but the API.
fn remote_configuration_is_not_fetched() {
    let Some(mut w) = World::new() else { return };
    let signed_in = format!(
        r#"{{"auth_mode":"chatgpt","OPENAI_API_KEY":"{API_KEY}","tokens":{{"id_token":"a.b.c","access_token":"a.b.c","refresh_token":"r","account_id":"acct"}},"last_refresh":"2026-12-01T00:00:00Z"}}"#
    );
    w.credential_files[0].contents = signed_in;
    assert!(keep_api_key(r#"{"tokens":{"id_token":"a.b.c"}}"#).is_err());
    let plan = w.plan();
    let auth = plan
        .files
        .iter()
        .find(|f| f.path.ends_with("auth.json"))
        .unwrap();
    assert_eq!(
        auth.contents,
        format!(r#"{{"OPENAI_API_KEY":"{API_KEY}"}}"#)
    );
    let seen = w.launch_plan(plan, &["flow-result", "review"]);
    seen.assert_isolated();
    assert!(
        !seen.paths.iter().any(|p| p.contains("/wham/")),
        "{:?}",
        seen.paths
    );
}

/// Class 8. The daemon's `CODEX_HOME` (the user's, with a server), `CODEX_SQLITE_HOME`,
/// `OPENAI_BASE_URL` at a dead port, proxies, `CODEX_API_KEY`, `CODEX_ACCESS_TOKEN`: none
/// reaches the client, whose environment is exactly the plan's names plus the inherited
/// ones; a credential variable the room does not accept is refused at render.
fn client_variables_do_not_reach_the_client() {
    let Some(mut w) = World::new() else { return };
    let sqlite = w.path("daemon-sqlite");
    for (k, v) in [
        ("CODEX_SQLITE_HOME", sqlite.display().to_string()),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1".into()),
        ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
        ("HTTP_PROXY", "http://127.0.0.1:9".into()),
        ("CODEX_API_KEY", "sk-daemon".into()),
        ("CODEX_ACCESS_TOKEN", "daemon".into()),
        ("CODEX_CA_CERTIFICATE", "/nonexistent.pem".into()),
    ] {
        w.daemon_env.insert(k.into(), v);
    }
    let plan = w.plan();
    let names: Vec<String> = plan_env(w.daemon_env.clone(), &plan).into_keys().collect();
    assert_eq!(
        names,
        [
            "CODEX_HOME",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_KEY_1",
            "GIT_CONFIG_KEY_2",
            "GIT_CONFIG_KEY_3",
            "GIT_CONFIG_NOSYSTEM",
            "GIT_CONFIG_VALUE_0",
            "GIT_CONFIG_VALUE_1",
            "GIT_CONFIG_VALUE_2",
            "GIT_CONFIG_VALUE_3",
            "HOME",
            "LANG",
            "PATH",
            "TERM",
            "TMPDIR",
            "XDG_CACHE_HOME",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_RUNTIME_DIR",
            "XDG_STATE_HOME",
        ]
    );
    let seen = w.launch_plan(plan, &["flow-result", "review"]);
    seen.assert_isolated();
    assert!(!sqlite.exists());
    for name in ["CODEX_API_KEY", "OPENAI_API_KEY", "CODEX_ACCESS_TOKEN"] {
        let mut ctx = w.ctx();
        ctx.credentials.env.push(EnvVar::new(name, "k"));
        let err = crate::common::plan::refusal(Client::Codex, &ctx, Policy::Lenient);
        assert!(
            matches!(err, RenderError::CredentialNotAccepted { .. }),
            "{name}: {err:?}"
        );
    }
}

/// Class 9. The user trusts the repository the worktree is a folder of (and the worktree);
/// Codex would then load the repository's `.codex/` too: the plan trusts only the
/// worktree's own path (whose `.codex/` it removes), so the parent's server and hooks stay
/// out. A system `config.toml` trusting the parent is refused (class 5).
fn trust_is_not_inherited_from_a_parent_folder() {
    let Some(mut w) = World::new() else { return };
    let parent = w.path("repo");
    git_init(&parent);
    w.hostile_worktree(&parent, "parent");
    w.worktree = parent.join("sub");
    w.hostile_worktree(&w.worktree.clone(), "sub");
    reach_enclosing_repository(&mut w, &parent);
    let config = w.path("user/.codex/config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    let trust = format!(
        "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        parent.display()
    );
    std::fs::write(&config, format!("{before}{trust}")).unwrap();
    let seen = w.launch();
    seen.assert_isolated();
}

/// The inventory question (issue 26, item 4): could any MCP server of the user, the
/// repository or a plugin still reach a reviewer launched with the plan, so that the plan
/// would have to disable it by name? Judged by Codex's own listing (`codex mcp list --json`,
/// what the inventory used to run) taken with the plan carried out, its environment, argv
/// and cwd, under the hostile world plus a user plugin with a server, a user profile file,
/// a repository plugin marketplace and a Claude `.mcp.json`: exactly our servers. Controls
/// show the listing sees what it should: in the daemon's own environment (where the old
/// `--codex-bin` inventory ran) it lists the user's, the plugin's and the repository's
/// servers; with the worktree's `.codex/` kept, the trusted worktree's server is listed (so
/// [`WORKTREE_CONFIG`](kcap_mcp_registry::clients::codex::WORKTREE_CONFIG) is what keeps it
/// out), and without the plan's trust it is not; the `.codex/` of a repository root and of a
/// folder above it, both trusted by the user, are never read. Administrator files do add
/// servers, and are refused before the launch (class 5).
fn no_inventory_is_needed_codex_lists_only_the_injected_servers() {
    let ours = || -> Vec<(String, bool)> {
        ["kcap-flow-result", "kcap-review"]
            .map(|n| (n.to_owned(), true))
            .into()
    };
    let with = |extra: &str| {
        let mut list = ours();
        list.push((extra.to_owned(), true));
        list.sort();
        list
    };
    let Some(w) = World::new() else { return };
    let before = std::fs::read_to_string(config_of(&w)).unwrap();
    std::fs::write(
        config_of(&w),
        format!("{before}[plugins.\"p1@m1\"]\nenabled = true\n"),
    )
    .unwrap();
    let plugin = "user/.codex/plugins/cache/m1/p1/local";
    w.write(
        &format!("{plugin}/.codex-plugin/plugin.json"),
        r#"{"name":"p1","version":"1.0.0","description":"x"}"#,
    );
    let mcp_json = |name: &str| {
        serde_json::json!({"mcpServers": {name: {"command": w.path("recorder.js"), "args": [name]}}})
            .to_string()
    };
    w.write(&format!("{plugin}/.mcp.json"), &mcp_json("plug-evil"));
    w.write("user/.codex/evil.config.toml", &w.server("profile-evil"));
    w.write(
        "wt/.agents/plugins/marketplace.json",
        r#"{"name":"m2","plugins":[{"name":"p2","source":{"source":"local","path":"./p2"}}]}"#,
    );
    w.write("wt/.mcp.json", &mcp_json("claude-evil"));

    let mut daemon = std::process::Command::new(&w.bin);
    daemon
        .args(["mcp", "list", "--json"])
        .env_clear()
        .envs(w.daemon_env.clone())
        .current_dir(&w.worktree);
    let out = common::peers::run(daemon, "codex mcp list --json (daemon)");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["kcap-flow-result", "plug-evil", "proj-evil", "user-evil"]
    );
    assert_eq!(w.listing(&w.plan()), ours());

    // Controls: the worktree's `.codex/` kept, trusted by the plan and not.
    let w = World::new().unwrap();
    let mut plan = w.plan();
    plan.worktree_remove.clear();
    assert_eq!(w.listing(&plan), with("proj-evil"));
    let w = World::new().unwrap();
    let mut plan = w.plan();
    plan.worktree_remove.clear();
    let toml = &mut plan.files[0].contents;
    let trust = format!(
        "\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        w.worktree.display()
    );
    assert!(toml.contains(&trust), "{toml}");
    *toml = toml.replace(&trust, "");
    assert_eq!(w.listing(&plan), ours());

    // A worktree inside a repository inside a folder, each with a `.codex/`, the outer two
    // trusted by the user.
    let mut w = World::new().unwrap();
    let outer = w.path("outer");
    let repo = outer.join("repo");
    w.hostile_worktree(&outer, "outer");
    git_init(&repo);
    w.hostile_worktree(&repo, "repo");
    w.worktree = repo.join("sub");
    w.hostile_worktree(&w.worktree.clone(), "sub");
    reach_enclosing_repository(&mut w, &repo);
    let before = std::fs::read_to_string(config_of(&w)).unwrap();
    let trust: String = [&outer, &repo]
        .iter()
        .map(|p| {
            format!(
                "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                p.display()
            )
        })
        .collect();
    std::fs::write(config_of(&w), format!("{before}{trust}")).unwrap();
    let mut kept = w.plan();
    kept.worktree_remove.clear();
    assert_eq!(w.listing(&kept), with("sub-evil"));
    assert_eq!(w.listing(&w.plan()), ours());
}

/// Adds `repo`, which holds `w`'s worktree, to the sandbox's boundary (read and execute).
/// Codex 0.169.0 reads the `.codex/config.toml` of every folder from its cwd up to the
/// project root (the repository's), and a read the sandbox denies ends it: `Failed to read
/// project config file <repo>/.codex/config.toml: Permission denied`. The planner refuses
/// such a worktree (`worktree_preflight`); these tests carry its plan out anyway
/// ([`World::plan`] plans it as if the repository appeared after the check) to show
/// the enclosing repository's configuration does not reach the reviewer, so Codex must see
/// it. (Before the client's installation outside `node_modules` was narrowed to its file,
/// the recorder's directory, this test's whole root, was in the boundary and hid this.)
fn reach_enclosing_repository(w: &mut World, repo: &Path) {
    w.exec.push(repo.to_owned());
}

/// The daemon user's `~/.codex/config.toml` in `w`.
fn config_of(w: &World) -> PathBuf {
    w.path("user/.codex/config.toml")
}

/// Issue 34, a prompt that is a command. Codex's TUI runs a prompt that starts with `!` as a
/// local shell command when it starts, outside its own sandbox: the plan rendered today with such a prompt swapped into its argv leaves the marker (the
/// evidence, shown again on every run). The room refuses that prompt, with or without leading
/// white space, naming the character.
fn a_prompt_is_only_a_prompt() {
    let Some(w) = World::new() else { return };
    let bang = format!("!{}", w.mark("bang"));
    for prompt in [bang.clone(), format!(" \n{bang}")] {
        let mut ctx = w.ctx();
        ctx.prompt = Some(prompt);
        let refused = crate::common::plan::refusal(Client::Codex, &ctx, Policy::Lenient);
        assert!(
            matches!(refused, RenderError::PromptIsCommand { prefix: '!', .. }),
            "{refused:?}"
        );
    }
    let mut plan = w.plan();
    let prompt = plan.argv.last_mut().unwrap();
    // The prompt, then the note on the kept client configuration.
    assert!(
        prompt.starts_with("review this\n\nNote from kcap: "),
        "{prompt}"
    );
    *prompt = bang;
    let marker = w.path("marks/bang");
    let mut t = w.start(&plan);
    let started = std::time::Instant::now();
    while !marker.exists() && started.elapsed() < LAUNCH_TIMEOUT && t.exited.is_none() {
        t.read(std::time::Duration::from_millis(200));
    }
    let terminal = String::from_utf8_lossy(&t.output).into_owned();
    t.stop();
    assert!(
        marker.exists(),
        "Codex did not run the `!` prompt as a command: the evidence of \
         codex::PROMPT_SHELL_PREFIX is stale; terminal:\n{terminal}"
    );
}

/// Issue 34, a login shell at start. Codex's shell snapshot runs the user's shell as a login
/// shell when a session starts, which sources `/etc/profile` and `/etc/profile.d/*` (laid
/// over `/etc` in a private mount namespace here): the plan's `allow_login_shell = false`
/// keeps them from running.
fn no_login_shell_profile_runs() {
    let Some(mut w) = World::new() else { return };
    if !common::etc::can_overlay() {
        return;
    }
    let mark = |name: &str| format!("{}\n", w.mark(name));
    w.write("etc-add/profile.d/zz-kcap.sh", &mark("etc-profile.d"));
    let profile = std::fs::read_to_string("/etc/profile").unwrap_or_default();
    w.write(
        "etc-add/profile",
        &format!("{profile}\n{}", mark("etc-profile")),
    );
    w.write("etc-add/bash.bashrc", &mark("etc-bash.bashrc"));
    w.etc = true;
    let seen = w.launch();
    assert!(seen.marks.is_empty(), "ran at start: {:?}", seen.marks);
    seen.assert_isolated();
}

/// Issue 32, the door (`LaunchContext::door`). Codex's key is only in `auth.json`, which the
/// plan writes into the launch directory, and a reviewer reaches any port of the host.
/// Behind the door, through `Client::plan`: the file holds the per-launch token, every
/// request to the stand-in model API (the WebSocket upgrade and the HTTP fallback) carries
/// the daemon's key in `authorization: Bearer` (set by the door; no header carries the
/// token), no file of the launch directory nor the plan the client gets nor a server's
/// environment holds the key, a server reaches the stand-in kcap server through the door's
/// URL, and its direct connection to the model API's port on the host fails. Without the
/// door `auth.json` in the launch directory holds the key and the direct connection opens,
/// so the test bites.
fn behind_the_door_the_key_stays_outside_and_only_the_door_is_reached() {
    const DAEMON_KEY: &str = "sk-daemon-key-door-codex-0123";
    if let Some(missing) = kcap_mcp_registry::launch::door::missing() {
        common::peers::skip(format!("this kernel lacks {missing}"));
        return;
    }
    for door in [false, true] {
        let Some(mut w) = World::new() else { return };
        let kcap = common::door::KcapServer::start();
        w.credential_files[0].contents = format!(r#"{{"OPENAI_API_KEY":"{DAEMON_KEY}"}}"#);
        // The servers' command: the probe, then the recorder.
        let recorder = w.path("recorder-real.js");
        common::stand_in::write_executable(&recorder, world::recorder_source(&w.path("rec")));
        w.exec.push(recorder.clone());
        let marks = w.path("rec/door");
        common::door::write_probe(
            &w.path("recorder.js"),
            &marks,
            &w.api.url,
            &recorder.display().to_string(),
        );
        let mut ctx = w.ctx();
        ctx.server_url = Some(kcap.url.clone());
        ctx.door = door;
        let plan = Client::Codex
            .plan(
                &ctx,
                &kcap_mcp_registry::clients::dispatch::PlanInputs::new(Policy::Lenient),
            )
            .unwrap()
            .plan;
        assert_eq!(plan.door.is_some(), door);
        let mut client_side = plan.clone();
        client_side.door = None;
        let client_side = client_side.to_json();
        let leaks = std::sync::Mutex::new(Vec::new());
        let scan = || {
            *leaks.lock().unwrap() = common::door::files_holding(&w.path("launch"), DAEMON_KEY);
        };
        let seen = w.launch_plan_with(plan, &["flow-result", "review"], &scan);
        let leaks = leaks.into_inner().unwrap();
        let marks = common::door::marks(&marks);
        let requests = w.api.requests();
        assert!(!requests.is_empty());
        for r in &requests {
            assert_eq!(
                r.header("authorization"),
                [format!("Bearer {DAEMON_KEY}")],
                "door {door}: {} {}: {:?}",
                r.method,
                r.path,
                r.headers
            );
        }
        if !door {
            assert!(client_side.contains(DAEMON_KEY));
            assert!(
                leaks.iter().any(|p| p.ends_with(".codex/auth.json")),
                "without the door auth.json holds the key: {leaks:?}"
            );
            common::door::assert_open_network(&marks);
            continue;
        }
        for r in &requests {
            assert!(
                !r.headers.iter().any(|(_, v)| v.contains("kcap-door-")),
                "a header carries the token: {:?}",
                r.headers
            );
        }
        assert!(!client_side.contains(DAEMON_KEY), "{client_side}");
        assert_eq!(seen.records.len(), 2, "{:?}", seen.records);
        common::door::assert_reach_behind_the_door(
            seen.records.iter().map(|r| (r.argv.as_slice(), &r.env)),
            DAEMON_KEY,
            &leaks,
            &marks,
            kcap.reached(),
        );
    }
}

/// The reviewed worktree's instruction files (the pull request can add or edit them) as
/// instructions: its `AGENTS.override.md` and `AGENTS.md`, one in the worktree's parent
/// folder and one in a subfolder, each with a marker of its own. With the plan no marker is
/// in any request to the model (`project_doc_max_bytes = 0`, the plan's `-c`); the control,
/// the same world launched with that override taken out of the argv, has the root's
/// `AGENTS.override.md` in the request (Codex reads the first of `AGENTS.override.md`,
/// `AGENTS.md` per folder from the repository root down to the cwd: the parent, above the
/// repository root, and the subfolder, below the cwd, are not read either way).
fn instruction_files_do_not_reach_the_model() {
    const FILES: [(&str, &str); 4] = [
        ("wt/AGENTS.override.md", "KCAP_MARK_CODEX_OVERRIDE"),
        ("wt/AGENTS.md", "KCAP_MARK_CODEX_AGENTS"),
        ("wt/sub/AGENTS.md", "KCAP_MARK_CODEX_SUB"),
        ("AGENTS.md", "KCAP_MARK_CODEX_PARENT"),
    ];
    let markers = |w: &World| {
        for (rel, marker) in FILES {
            w.write(rel, &crate::common::model_api::instruction_file(marker));
        }
    };
    let sent = |w: &World| crate::common::model_api::markers_sent(&w.api.requests(), &FILES);
    let Some(w) = World::new() else { return };
    markers(&w);
    let seen = w.launch();
    seen.assert_isolated();
    assert_eq!(
        sent(&w),
        Vec::<&str>::new(),
        "instruction files reached the model"
    );

    let Some(control) = World::new() else { return };
    markers(&control);
    let mut plan = control.plan();
    let at = (plan.argv.windows(2))
        .position(|p| p[0] == "-c" && p[1] == "project_doc_max_bytes=0")
        .expect("the plan's -c project_doc_max_bytes=0");
    plan.argv.drain(at..at + 2);
    control.launch_plan(plan, &["flow-result", "review"]);
    assert_eq!(sent(&control), ["KCAP_MARK_CODEX_OVERRIDE"], "the control");
}
