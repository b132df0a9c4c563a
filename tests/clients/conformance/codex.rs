//! Codex CLI: the effective MCP server table (`codex mcp list --json`) of the plan, and of its
//! argv alone.

use super::*;

pub(super) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        codex_baseline_enables_exactly_the_result_channel,
        codex_full_allowlist_gives_result_channel_plus_allowed_servers,
        codex_hostile_user_config_is_not_read_by_the_planned_reviewer,
        codex_same_named_user_fields_merge_into_ours_only_outside_the_plan,
        codex_values_reach_the_table_exactly,
        codex_gated_enables_no_server,
    ]
}

/// A throwaway Codex setup: its own `HOME`, `CODEX_HOME` and cwd (the daemon's, for a
/// plan), and a launch directory for plans.
pub(super) struct Codex {
    bin: PathBuf,
    home: TempDir,
    codex_home: TempDir,
    pub(super) cwd: TempDir,
    launch: TempDir,
    /// The executor's wrapper script and what it wrote.
    scratch: TempDir,
}

impl Codex {
    pub(super) fn new(bin: PathBuf) -> Codex {
        Codex {
            bin,
            home: tempfile::tempdir().unwrap(),
            codex_home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            launch: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes the user's `$CODEX_HOME/config.toml`.
    pub(super) fn user_config(&self, toml: &str) {
        std::fs::write(self.codex_home.path().join("config.toml"), toml).unwrap();
    }

    /// A command for this setup: cleared environment (so no `RUST_BACKTRACE`), only `PATH`,
    /// `HOME` and `CODEX_HOME`, in the fresh cwd.
    pub(super) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .env("PATH", inherited_path())
            .env("HOME", self.home.path())
            .env("CODEX_HOME", self.codex_home.path())
            .current_dir(self.cwd.path());
        cmd
    }

    /// `codex <reviewer args> <tail…>`; panics unless it exits 0; returns stdout as JSON.
    pub(super) fn json(&self, reviewer_args: &[String], tail: &[&str]) -> Value {
        let mut cmd = self.command();
        cmd.args(reviewer_args).args(tail);
        json_of(cmd, tail)
    }

    /// `codex <plan argv> <tail…>` as the daemon launches the reviewer: `ctx` (with this
    /// setup's launch directory) rendered by `Client::plan` and carried out by the library's
    /// executor (`common::carry`), Codex run with exactly the plan's environment built from
    /// this setup's (the daemon's `HOME`, `CODEX_HOME` and `PATH`), in the plan's cwd (this
    /// setup's when `ctx` names no worktree).
    pub(super) fn planned(&self, ctx: &LaunchContext, tail: &[&str]) -> Value {
        let mut ctx = ctx.clone();
        ctx.launch_dir = Some(self.launch.path().to_str().unwrap().into());
        // A plan without a worktree still removes worktree paths, which the executor refuses
        // without a cwd: the daemon's cwd stands in as the worktree.
        if ctx.worktree.is_none() {
            ctx.worktree = Some(self.cwd.path().to_str().unwrap().into());
        }
        let plan = crate::common::plan::lenient(Client::Codex, &ctx);
        let daemon: BTreeMap<String, String> = [
            ("PATH", inherited_path()),
            ("HOME", self.home.path().into()),
            ("CODEX_HOME", self.codex_home.path().into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_string().unwrap()))
        .collect();
        // The executor carries the plan out; its client binary, a wrapper, runs Codex with
        // the plan's argv up to the prompt and then `tail`.
        let out = self.scratch.path().join("out.json");
        let wrapper =
            common::carry::subcommand(self.scratch.path(), "codex-sub", &self.bin, tail, &out);
        // In the sandbox: Codex behind the wrapper, and the scratch directory (the wrapper
        // and its output only) writable.
        let options = common::carry::reach(
            kcap_mcp_registry::launch::Options::default().with_die_with_parent(true),
            &[&self.bin],
            &[self.scratch.path()],
        );
        let mut t = common::carry::Terminal::start(&plan, &wrapper, &daemon, &options);
        let status = t.wait_exit(Duration::from_secs(30));
        t.stop();
        let what = format!("codex … {}", tail.join(" "));
        let stdout = std::fs::read(&out).unwrap_or_default();
        assert!(
            status.is_some_and(|s| s.success()),
            "{what} failed ({status:?}):\n{}",
            std::fs::read_to_string(self.scratch.path().join("out.json.err")).unwrap_or_default()
        );
        serde_json::from_slice(&stdout).unwrap_or_else(|e| {
            panic!(
                "{what} printed no JSON ({e}):\n{}",
                String::from_utf8_lossy(&stdout)
            )
        })
    }

    /// The effective server table of the planned reviewer: [`Codex::planned`] with
    /// `mcp list --json`.
    pub(super) fn plan_list(&self, ctx: &LaunchContext) -> Value {
        self.planned(ctx, &["mcp", "list", "--json"])
    }

    /// The effective server table: `codex <reviewer args> mcp list --json`.
    pub(super) fn list(&self, reviewer_args: &[String]) -> Value {
        self.json(reviewer_args, &["mcp", "list", "--json"])
    }

    /// One server with its tool filters: `codex <reviewer args> mcp get NAME --json`.
    pub(super) fn get(&self, reviewer_args: &[String], name: &str) -> Value {
        self.json(reviewer_args, &["mcp", "get", name, "--json"])
    }
}

/// Runs `cmd`; panics unless it exits 0; returns stdout as JSON.
fn json_of(cmd: Command, tail: &[&str]) -> Value {
    let what = format!("codex … {}", tail.join(" "));
    let out = run(cmd, &what);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        out.stderr
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The argv of Codex's lenient plan for `ctx` (the public call), which must carry no prompt
/// (the oracle appends `mcp list --json` to it), to run without the rest of the plan.
fn plan_args(ctx: &LaunchContext) -> Vec<String> {
    assert!(ctx.prompt.is_none(), "the oracle runs without a prompt");
    let ctx = LaunchContext {
        launch_dir: Some("/run/kcap/l1".into()),
        ..ctx.clone()
    };
    let args = crate::common::plan::lenient(Client::Codex, &ctx).argv;
    assert_eq!(args.last().map(String::as_str), Some("--no-alt-screen"));
    args
}

/// One of our stdio servers as `codex mcp list --json` shows it with no user entry of the
/// same name.
fn codex_ours(name: &str, command: &str, args: &[&str], env: Value) -> Value {
    json!({
        "name": name,
        "enabled": true,
        "disabled_reason": null,
        "transport": {
            "type": "stdio",
            "command": command,
            "args": args,
            "env": env,
            "env_vars": [],
            "cwd": null,
        },
        "startup_timeout_sec": null,
        "tool_timeout_sec": null,
        "auth_status": "unsupported",
    })
}

fn codex_baseline_enables_exactly_the_result_channel() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    let context = ctx("http://127.0.0.1:5100", "/usr/bin/kcap", "agent-1", None);
    assert_eq!(
        codex.plan_list(&context),
        json!([codex_ours(
            "kcap-flow-result",
            "/usr/bin/kcap",
            &["mcp", "flow-result"],
            json!({"KCAP_URL": "http://127.0.0.1:5100", "KCAP_FLOW_AGENT_ID": "agent-1"}),
        )])
    );
    let got = codex.planned(&context, &["mcp", "get", "kcap-flow-result", "--json"]);
    assert_eq!(got["enabled_tools"], Value::Null);
    assert_eq!(got["disabled_tools"], Value::Null);
}

fn codex_full_allowlist_gives_result_channel_plus_allowed_servers() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    let url = "http://127.0.0.1:5100";
    let context = ctx(url, "/usr/bin/kcap", "agent-2", Some(case2_allowlist()));
    let only_url = json!({ "KCAP_URL": url });
    // `mcp list --json` sorts by name.
    assert_eq!(
        codex.plan_list(&context),
        json!([
            codex_ours(
                "kcap-analytics",
                "/usr/bin/kcap",
                &["mcp", "analytics"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-flow-result",
                "/usr/bin/kcap",
                &["mcp", "flow-result"],
                json!({"KCAP_URL": url, "KCAP_FLOW_AGENT_ID": "agent-2"}),
            ),
            codex_ours(
                "kcap-memory",
                "/usr/bin/kcap",
                &["mcp", "memory"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-review",
                "/usr/bin/kcap",
                &["mcp", "review"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-sessions",
                "/usr/bin/kcap",
                &["mcp", "sessions"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-workitems",
                "/usr/bin/kcap",
                &["mcp", "workitems"],
                only_url
            ),
        ])
    );
}

/// The hostile user config of the isolation tests: a user `kcap-flows`, a dotted name, a URL server, and
/// user entries named like ours carrying fields that would merge into ours.
const HOSTILE_CODEX_CONFIG: &str = r#"
[mcp_servers.kcap-flows]
command = "/usr/bin/kcap"
args = ["mcp", "flows"]
env = { KCAP_URL = "http://user.example" }

[mcp_servers."corp.flows"]
command = "corp-flows"
args = ["serve"]

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "REMOTE_TOKEN"

[mcp_servers.kcap-review]
command = "/opt/user/kcap"
args = ["mcp", "review", "--user-flag"]
enabled = false
cwd = "/srv/user-project"
env_vars = ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"]
env = { KCAP_URL = "http://user.example" }
startup_timeout_sec = 1
tool_timeout_sec = 2.5
enabled_tools = ["get_transcript"]
disabled_tools = ["get_pr_summary"]

[mcp_servers.kcap-flow-result]
command = "/opt/user/kcap"
enabled = false
env_vars = ["HOME"]
disabled_tools = ["submit_review_result"]
"#;

/// The hostile user configuration in the daemon's `CODEX_HOME`: Codex starts its servers
/// and merges its same-named entries into ours when the plan's argv runs there (the argv
/// alone isolates nothing), and reads none of it when the reviewer is launched as the plan
/// says.
fn codex_hostile_user_config_is_not_read_by_the_planned_reviewer() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    codex.user_config(HOSTILE_CODEX_CONFIG);
    let worktree = tempfile::tempdir().unwrap();
    let worktree = worktree.path().to_str().unwrap();

    // Unrendered, the user's own entries are what Codex would start.
    let enabled = |table: &Value| -> Vec<String> {
        table
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["enabled"] == true)
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        enabled(&codex.list(&[])),
        ["corp.flows", "kcap-flows", "remote"]
    );

    let mut context = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-3",
        Some(vec![Some("kcap-review")]),
    );
    context.worktree = Some(worktree.into());
    // The plan's argv under the user's CODEX_HOME: the user's servers start beside ours.
    assert_eq!(
        enabled(&codex.list(&plan_args(&context))),
        [
            "corp.flows",
            "kcap-flow-result",
            "kcap-flows",
            "kcap-review",
            "remote"
        ]
    );
    // The plan: exactly ours, with exactly our values.
    let url_env = json!({ "KCAP_URL": "http://127.0.0.1:5100" });
    assert_eq!(
        codex.plan_list(&context),
        json!([
            codex_ours(
                "kcap-flow-result",
                "/usr/bin/kcap",
                &["mcp", "flow-result"],
                json!({"KCAP_URL": "http://127.0.0.1:5100", "KCAP_FLOW_AGENT_ID": "agent-3"}),
            ),
            codex_ours("kcap-review", "/usr/bin/kcap", &["mcp", "review"], url_env),
        ])
    );
    // The tool filters only `mcp get` shows: none, not the user's.
    for name in ["kcap-review", "kcap-flow-result"] {
        let got = codex.planned(&context, &["mcp", "get", name, "--json"]);
        assert_eq!(
            (&got["enabled_tools"], &got["disabled_tools"]),
            (&json!(null), &json!(null)),
            "{name}"
        );
    }
}

/// A user entry named like ours with a field we do not set (an extra `env` key) merges into
/// our server when the argv runs under the user's `CODEX_HOME`, and does not under the plan.
fn codex_same_named_user_fields_merge_into_ours_only_outside_the_plan() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let context = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-3",
        Some(vec![Some("kcap-review")]),
    );
    let resolution = context.resolve(Policy::Lenient).unwrap();
    let codex = Codex::new(bin);
    codex.user_config(
        "[mcp_servers.kcap-review]\ncommand = \"/opt/user/kcap\"\n\
         env = { KCAP_URL = \"http://user.example\", EXTRA_SECRET = \"s3cr3t\" }\n",
    );
    let mut args = Vec::new();
    for o in codex_mcp_overrides(&context, &resolution).unwrap() {
        args.extend(["-c".to_string(), o]);
    }
    let review = codex.get(&args, "kcap-review");
    assert_eq!(
        review["transport"]["env"],
        json!({"KCAP_URL": "http://127.0.0.1:5100", "EXTRA_SECRET": "s3cr3t"})
    );
    let review = codex.planned(&context, &["mcp", "get", "kcap-review", "--json"]);
    assert_eq!(
        review["transport"]["env"],
        json!({"KCAP_URL": "http://127.0.0.1:5100"})
    );
}

fn codex_values_reach_the_table_exactly() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    let allowlist = Some(vec![Some("kcap-review")]);

    // Windows paths: `\P`, `\k`, `\t` and `\n` must stay a backslash and a letter.
    let context = ctx(WINDOWS_URL, WINDOWS_KCAP, HOSTILE, allowlist.clone());
    assert_eq!(
        codex.plan_list(&context),
        json!([
            codex_ours(
                "kcap-flow-result",
                "C:\\Program Files\\kcap\\kcap.exe",
                &["mcp", "flow-result"],
                json!({
                    "KCAP_URL": "C:\\tools\\new",
                    "KCAP_FLOW_AGENT_ID":
                        "a1 \"dq\" 'sq'\\ttab\\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME",
                }),
            ),
            codex_ours(
                "kcap-review",
                "C:\\Program Files\\kcap\\kcap.exe",
                &["mcp", "review"],
                json!({"KCAP_URL": "C:\\tools\\new"}),
            ),
        ])
    );

    // Quotes, a backslash before `t` and `n`, non-ASCII, `=`, `#`, `$HOME` and `${HOME}`
    // (Codex expands neither) in the path and the URL. A tab or a line break is refused by
    // the plan (`conformance::claude_hostile_path_and_values_arrive_byte_for_byte`).
    let path = format!("/opt/{HOSTILE} ${{HOME}}/kcap");
    let context = ctx(HOSTILE_URL, &path, "${HOME}", allowlist);
    assert_eq!(
        codex.plan_list(&context),
        json!([
            codex_ours(
                "kcap-flow-result",
                "/opt/a1 \"dq\" 'sq'\\ttab\\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME ${HOME}/kcap",
                &["mcp", "flow-result"],
                json!({
                    "KCAP_URL": "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME",
                    "KCAP_FLOW_AGENT_ID": "${HOME}",
                }),
            ),
            codex_ours(
                "kcap-review",
                "/opt/a1 \"dq\" 'sq'\\ttab\\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME ${HOME}/kcap",
                &["mcp", "review"],
                json!({"KCAP_URL": "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME"}),
            ),
        ])
    );
}

fn codex_gated_enables_no_server() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    // No user config: nothing at all.
    let codex = Codex::new(bin.clone());
    let mut gated = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-5",
        Some(vec![Some("kcap-review")]),
    );
    gated.server_url = None;
    assert_eq!(codex.plan_list(&gated), json!([]));

    // A user config with servers, and a blank kcap path (spaces: a tab is refused,
    // `RenderError::ForbiddenChar`): the planned reviewer has none.
    let codex = Codex::new(bin);
    codex.user_config(
        "[mcp_servers.kcap-review]\ncommand = \"/opt/user/kcap\"\nargs = [\"mcp\", \"review\"]\n\n\
         [mcp_servers.\"corp.flows\"]\ncommand = \"corp-flows\"\n\n\
         [mcp_servers.remote]\nurl = \"https://mcp.example.com/mcp\"\n",
    );
    let mut gated = ctx(
        "http://127.0.0.1:5100",
        "  ",
        "agent-5",
        Some(vec![Some("kcap-review")]),
    );
    gated.worktree = Some(codex.cwd.path().to_str().unwrap().into());
    assert_eq!(codex.plan_list(&gated), json!([]));
}
