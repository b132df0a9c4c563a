//! Claude Code: what each MCP server it starts receives (argv, environment, cwd), recorded byte for byte.

use super::*;

pub(super) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_baseline_starts_exactly_the_result_channel,
        claude_full_allowlist_starts_result_channel_plus_allowed_servers,
        claude_windows_path_and_values_arrive_byte_for_byte,
        claude_hostile_path_and_values_arrive_byte_for_byte,
        claude_dollar_brace_is_refused_before_any_process_starts,
        claude_gated_starts_no_server,
    ]
}

/// What one recorder invocation saw.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Record {
    /// `$0` and the arguments, byte for byte.
    argv: Vec<Vec<u8>>,
    /// The whole environment.
    env: BTreeMap<Vec<u8>, Vec<u8>>,
    /// `pwd -P`.
    cwd: Vec<u8>,
}

impl Record {
    /// The `KCAP_*` variables.
    pub(super) fn kcap_env(&self) -> BTreeMap<&[u8], &[u8]> {
        self.env
            .iter()
            .filter(|(k, _)| k.starts_with(b"KCAP_"))
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect()
    }
}

/// A throwaway Claude Code setup: its own `HOME`, project dir (the cwd) and recorder output.
pub(super) struct Claude {
    pub(super) bin: PathBuf,
    /// `claude --version`, e.g. `2.1.197`.
    pub(super) version: String,
    pub(super) home: TempDir,
    pub(super) project: TempDir,
    pub(super) scratch: TempDir,
    /// Prepended to `PATH`, for a capacitor path without a `/`.
    pub(super) path_prefix: Option<PathBuf>,
    /// Its model API: a stand-in that refuses every turn (HTTP 400), on which Claude Code
    /// exits, so the oracle's run ends there and waits no longer for servers that never
    /// start (a dead port had it retry for minutes: [`claude_oracle::NOTHING_WAIT`] each time).
    pub(super) api: crate::common::model_api::ModelApi,
}

impl Claude {
    pub(super) fn new(bin: PathBuf) -> Claude {
        let claude = Claude {
            version: claude_oracle::version(&bin),
            bin,
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
            path_prefix: None,
            api: crate::common::model_api::ModelApi::start(),
        };
        std::fs::create_dir(claude.records_dir()).unwrap();
        claude
    }

    pub(super) fn records_dir(&self) -> PathBuf {
        self.scratch.path().join("records")
    }

    /// Writes the recorder at `path` (created with its parent dirs). It records `$0` and its
    /// arguments (NUL-separated), its whole environment (`env -0`) and `pwd -P` into
    /// `<records>/<pid>.*`, marks itself done, and exits 0 at once (Claude Code does not
    /// wait for its MCP servers and would leave a long-running one orphaned).
    pub(super) fn recorder_at(&self, path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut body = b"#!/bin/sh\nd=".to_vec();
        body.extend(sh_quote(self.records_dir().as_os_str().as_bytes()));
        body.extend_from_slice(
            b"\n: > \"$d/$$.start\"\n\
              printf '%s\\0' \"$0\" \"$@\" > \"$d/$$.argv\"\n\
              env -0 > \"$d/$$.env\"\n\
              pwd -P > \"$d/$$.cwd\"\n\
              : > \"$d/$$.done\"\n\
              exit 0\n",
        );
        write_executable(path, &body);
    }

    /// The environment Claude Code itself gets (everything else is cleared).
    pub(super) fn parent_env(&self) -> Vec<(&'static str, OsString)> {
        let mut path = OsString::new();
        if let Some(prefix) = &self.path_prefix {
            path.push(prefix);
            path.push(":");
        }
        path.push(inherited_path());
        vec![
            ("PATH", path),
            ("HOME", self.home.path().into()),
            // `--permission-mode bypassPermissions` refuses to run as root otherwise (CI
            // containers run as root).
            ("IS_SANDBOX", "1".into()),
            ("ANTHROPIC_API_KEY", "dummy".into()),
            // Offline even where the machine has a network: the API is the stand-in on
            // 127.0.0.1 (the one host the proxy is not asked for), every other HTTP request
            // (telemetry) goes to a dead local port; no update check. Claude Code 2.1.197 and
            // 2.1.332 start their MCP servers before the first model request and exit on
            // its 400 (measured; `claude_gated_starts_no_server`'s control shows it).
            ("ANTHROPIC_BASE_URL", self.api.url.clone().into()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            ("HTTP_PROXY", "http://127.0.0.1:9".into()),
            ("NO_PROXY", "127.0.0.1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ]
    }

    /// Runs `claude <args> -- <prompt>` in the project dir with stdin from `/dev/null` until
    /// the servers it starts have been recorded (`claude_oracle::run_until_recorded`), and
    /// returns every distinct recorder invocation, sorted by argv.
    pub(super) fn run(&self, args: &[String]) -> Vec<Record> {
        assert!(
            !args.iter().any(|a| a == "--"),
            "the oracle gives the prompt itself"
        );
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .envs(self.parent_env())
            .args(args)
            .args(["--", claude_oracle::PROMPT])
            .current_dir(self.project.path());
        let log = self.scratch.path().join("claude.log");
        claude_oracle::run_until_recorded(cmd, &self.records_dir(), &log);
        let records = self.records();
        // Consumed: the next run of the same setup starts from an empty log.
        for entry in std::fs::read_dir(self.records_dir()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        records
    }

    /// Waits until every started recorder is done and none has started for a while.
    pub(super) fn records(&self) -> Vec<Record> {
        let dir = self.records_dir();
        let marks = |ext: &str| -> BTreeSet<String> {
            std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| {
                    let name = e.unwrap().file_name().into_string().unwrap();
                    name.strip_suffix(ext).map(str::to_string)
                })
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut settled_since: Option<(Instant, BTreeSet<String>)> = None;
        let pids = loop {
            let (started, done) = (marks(".start"), marks(".done"));
            if started == done {
                match &settled_since {
                    Some((t, seen)) if *seen == started => {
                        if t.elapsed() >= Duration::from_millis(500) {
                            break started;
                        }
                    }
                    _ => settled_since = Some((Instant::now(), started.clone())),
                }
            } else {
                settled_since = None;
            }
            assert!(
                Instant::now() < deadline,
                "recorders did not finish: started {started:?}, done {done:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let read = |pid: &str, ext: &str| std::fs::read(dir.join(format!("{pid}.{ext}"))).unwrap();
        let mut records: Vec<Record> = pids
            .iter()
            .map(|pid| {
                let argv = read(pid, "argv");
                let argv = argv
                    .strip_suffix(b"\0")
                    .expect("argv ends with NUL")
                    .split(|&b| b == 0)
                    .map(<[u8]>::to_vec)
                    .collect();
                let env = read(pid, "env");
                let env = env
                    .strip_suffix(b"\0")
                    .unwrap_or(&env)
                    .split(|&b| b == 0)
                    .map(|kv| {
                        let eq = kv.iter().position(|&b| b == b'=').expect("NAME=value");
                        (kv[..eq].to_vec(), kv[eq + 1..].to_vec())
                    })
                    .collect();
                let mut cwd = read(pid, "cwd");
                assert_eq!(cwd.pop(), Some(b'\n'));
                Record { argv, env, cwd }
            })
            .collect();
        records.sort_by(|a, b| a.argv.cmp(&b.argv));
        // Claude Code 2.1.328 starts a server that exits at once a second time, with the same
        // argv, env and cwd: one record per distinct start.
        records.dedup();
        records
    }

    /// Checks what every recorder shares: run in the project dir, and an environment of
    /// exactly Claude Code's own, the variables Claude Code adds, `PWD` (set by `/bin/sh`)
    /// and `ours` (the names of the entry's `env`).
    pub(super) fn assert_common(&self, record: &Record, ours: &[&str]) {
        self.assert_common_in(record, ours, true);
    }

    /// [`Claude::assert_common`] for servers started by a reviewer session (`session`) or by
    /// `claude mcp list`.
    pub(super) fn assert_common_in(&self, record: &Record, ours: &[&str], session: bool) {
        let project = self.project.path().canonicalize().unwrap();
        assert_eq!(record.cwd, project.as_os_str().as_bytes());
        let expected: BTreeSet<&[u8]> = self
            .parent_env()
            .iter()
            .map(|(k, _)| k.as_bytes())
            .chain(
                claude_oracle::added_env(&self.version, session)
                    .into_iter()
                    .map(str::as_bytes),
            )
            .chain([b"PWD".as_slice()])
            .chain(ours.iter().map(|k| k.as_bytes()))
            .collect();
        let got: BTreeSet<&[u8]> = record.env.keys().map(Vec::as_slice).collect();
        assert_eq!(
            got.iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            expected
                .iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            "unexpected environment names"
        );
    }
}

pub(super) fn os(s: impl Into<OsString>) -> Vec<u8> {
    s.into().into_vec()
}

pub(super) fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

pub(super) fn kcap_env<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a [u8], &'a [u8]> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect()
}

/// What a recorder invocation saw that the cases pin: argv and the `KCAP_*` variables.
pub(super) type Seen<'a> = (Vec<Vec<u8>>, BTreeMap<&'a [u8], &'a [u8]>);

pub(super) fn seen(records: &[Record]) -> Vec<Seen<'_>> {
    records
        .iter()
        .map(|r| (r.argv.clone(), r.kcap_env()))
        .collect()
}

impl Claude {
    /// The argv of Claude Code's lenient plan for `ctx` (the public call), the plan's files
    /// written into its launch directory `<scratch>/launch` (the `--mcp-config` file the argv
    /// names).
    fn plan_args(&self, ctx: &LaunchContext) -> Vec<String> {
        let ctx = LaunchContext {
            launch_dir: Some(self.scratch.path().join("launch").to_str().unwrap().into()),
            ..ctx.clone()
        };
        let plan = crate::common::plan::lenient(Client::Claude, &ctx);
        crate::common::plan::write_files(&plan);
        plan.argv
    }
}

/// The `--mcp-config` JSON a Claude Code plan's argv names: the file's contents.
fn mcp_config(args: &[String]) -> String {
    let at = args.iter().position(|a| a == "--mcp-config").unwrap() + 1;
    std::fs::read_to_string(&args[at]).unwrap_or_else(|e| panic!("{}: {e}", args[at]))
}

fn claude_baseline_starts_exactly_the_result_channel() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    let mut context = ctx(
        "http://127.0.0.1:5100",
        kcap.to_str().unwrap(),
        "agent-1",
        None,
    );
    // Model and effort are rendered too; the oracle adds the prompt (the API is a dead port).
    context.model = Some("sonnet".into());
    context.effort = Some("high".into());
    let args = claude.plan_args(&context);
    assert_eq!(
        args[..5],
        [
            "--permission-mode",
            "bypassPermissions",
            "--strict-mcp-config",
            "--mcp-config",
            &format!("{}/launch/mcp-config.json", claude.scratch.path().display()),
        ]
    );
    assert_eq!(
        args[5..],
        [
            "--disallowedTools",
            "Agent",
            "--setting-sources=",
            "--settings",
            r#"{"skipDangerousModePermissionPrompt":true}"#,
            "--effort",
            "high",
            "--model",
            "sonnet"
        ]
    );

    let records = claude.run(&args);
    assert_eq!(records.len(), 1, "{records:#?}");
    let r = &records[0];
    assert_eq!(
        r.argv,
        argv(&[kcap.as_os_str().as_bytes(), b"mcp", b"flow-result"])
    );
    assert_eq!(
        r.kcap_env(),
        kcap_env(&[
            ("KCAP_URL", "http://127.0.0.1:5100"),
            ("KCAP_FLOW_AGENT_ID", "agent-1")
        ])
    );
    claude.assert_common(r, &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]);
}

fn claude_full_allowlist_starts_result_channel_plus_allowed_servers() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    let url = "http://127.0.0.1:5100";
    let args = claude.plan_args(&ctx(
        url,
        kcap.to_str().unwrap(),
        "agent-2",
        Some(case2_allowlist()),
    ));
    let records = claude.run(&args);
    let k = kcap.as_os_str().as_bytes();
    let got = seen(&records);
    let only_url = kcap_env(&[("KCAP_URL", url)]);
    assert_eq!(
        got,
        [
            (argv(&[k, b"mcp", b"analytics"]), only_url.clone()),
            (
                argv(&[k, b"mcp", b"flow-result"]),
                kcap_env(&[("KCAP_URL", url), ("KCAP_FLOW_AGENT_ID", "agent-2")])
            ),
            (argv(&[k, b"mcp", b"memory"]), only_url.clone()),
            (argv(&[k, b"mcp", b"review"]), only_url.clone()),
            (argv(&[k, b"mcp", b"sessions"]), only_url.clone()),
            (argv(&[k, b"mcp", b"workitems"]), only_url),
        ]
    );
    for r in &records {
        let ours: &[&str] = if r.argv[2] == b"flow-result" {
            &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]
        } else {
            &["KCAP_URL"]
        };
        claude.assert_common(r, ours);
    }
}

fn claude_windows_path_and_values_arrive_byte_for_byte() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    // `C:\Program Files\kcap\kcap.exe` has no `/`, so Claude Code looks it up in PATH: the
    // recorder is a file of exactly that name in a directory put first in PATH.
    let mut claude = Claude::new(bin);
    let bin_dir = claude.scratch.path().join("bin");
    claude.recorder_at(&bin_dir.join(WINDOWS_KCAP));
    claude.path_prefix = Some(bin_dir.clone());
    let args = claude.plan_args(&ctx(
        WINDOWS_URL,
        WINDOWS_KCAP,
        HOSTILE,
        Some(vec![Some("kcap-review")]),
    ));
    let records = claude.run(&args);
    let exe = os(bin_dir.join(WINDOWS_KCAP));
    let got = seen(&records);
    assert_eq!(
        got,
        [
            (
                argv(&[&exe, b"mcp", b"flow-result"]),
                kcap_env(&[
                    ("KCAP_URL", "C:\\tools\\new"),
                    (
                        "KCAP_FLOW_AGENT_ID",
                        "a1 \"dq\" 'sq'\\ttab\\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME"
                    ),
                ])
            ),
            (
                argv(&[&exe, b"mcp", b"review"]),
                kcap_env(&[("KCAP_URL", "C:\\tools\\new")])
            ),
        ]
    );
    claude.assert_common(&records[0], &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]);
    claude.assert_common(&records[1], &["KCAP_URL"]);
}

fn claude_hostile_path_and_values_arrive_byte_for_byte() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    // Quotes, a backslash before `t` and `n`, non-ASCII, `=`, `#`, a backslash and `$HOME`
    // in the path.
    let kcap = claude.scratch.path().join(HOSTILE).join("kcap");
    claude.recorder_at(&kcap);
    let kcap_str = kcap.to_str().unwrap();
    assert!(kcap_str.contains("\\t") && kcap_str.contains("\\n"));
    // A tab or a line break in the path, the URL or the agent id is refused by the plan: no
    // client gets it.
    for control in CONTROL {
        let with = format!("{kcap_str}{control}");
        for (c, field) in [
            (ctx(HOSTILE_URL, &with, "agent", None), "kcap_bin"),
            (
                ctx(&format!("{HOSTILE_URL}{control}"), kcap_str, "agent", None),
                "server_url",
            ),
            (
                ctx(HOSTILE_URL, kcap_str, &format!("a{control}"), None),
                "agent_id",
            ),
        ] {
            let c = LaunchContext {
                launch_dir: Some("/run/kcap/l1".into()),
                ..c
            };
            let refused = crate::common::plan::refusal(Client::Claude, &c, Policy::Lenient);
            assert!(
                matches!(refused, RenderError::ForbiddenChar { field: f, found, .. }
                    if f == field && found == control),
                "{field}: {refused:?}"
            );
        }
    }
    let args = claude.plan_args(&ctx(
        HOSTILE_URL,
        kcap_str,
        "agent \u{1F600} #4=x",
        Some(vec![Some("KCAP-SESSIONS")]),
    ));
    let records = claude.run(&args);
    let got = seen(&records);
    let k = kcap_str.as_bytes();
    assert_eq!(
        got,
        [
            (
                argv(&[k, b"mcp", b"flow-result"]),
                kcap_env(&[
                    (
                        "KCAP_URL",
                        "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME"
                    ),
                    ("KCAP_FLOW_AGENT_ID", "agent \u{1F600} #4=x"),
                ])
            ),
            (
                argv(&[k, b"mcp", b"sessions"]),
                kcap_env(&[(
                    "KCAP_URL",
                    "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME"
                )])
            ),
        ]
    );
    claude.assert_common(&records[0], &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]);
    claude.assert_common(&records[1], &["KCAP_URL"]);
}

fn claude_dollar_brace_is_refused_before_any_process_starts() {
    // Refused by the plan, for every field it can reach; no client is involved.
    let base = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-4",
        Some(vec![Some("kcap-review")]),
    );
    let refused = |ctx: &LaunchContext, field: &str| {
        let ctx = LaunchContext {
            launch_dir: Some("/run/kcap/l1".into()),
            ..ctx.clone()
        };
        assert_eq!(
            crate::common::plan::refusal(Client::Claude, &ctx, Policy::Lenient),
            RenderError::Expansion {
                client: kcap_mcp_registry::clients::Client::Claude,
                server: "kcap-flow-result".to_string(),
                field: field.into(),
                expands: kcap_mcp_registry::clients::claude::EXPANDS,
            }
        );
    };
    let mut c = base.clone();
    c.kcap_bin = Some("/opt/${HOME}/kcap".into());
    refused(&c, "command");
    let mut c = base.clone();
    c.server_url = Some("http://${HOME}:5100".into());
    refused(&c, "env.KCAP_URL");
    let mut c = base.clone();
    c.agent_id = "a-${HOME:-x}".into();
    refused(&c, "env.KCAP_FLOW_AGENT_ID");
    let mut c = base.clone();
    c.agent_id = "a-$${HOME}".into();
    refused(&c, "env.KCAP_FLOW_AGENT_ID");

    // Why: given such a value, the real client substitutes its own environment, with no
    // escape. A hand-built config (what the renderer would emit) shows it.
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    let config = json!({"mcpServers": {"kcap-flow-result": {
        "command": kcap,
        "args": ["mcp", "flow-result"],
        "env": {"KCAP_URL": "http://127.0.0.1:5100", "KCAP_FLOW_AGENT_ID": "a-$${HOME}"},
    }}});
    let args: Vec<String> = [
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        &config.to_string(),
        "--disallowedTools",
        "Agent",
    ]
    .map(String::from)
    .into();
    let records = claude.run(&args);
    assert_eq!(records.len(), 1);
    let home = claude.home.path().to_str().unwrap();
    assert_eq!(
        records[0].kcap_env(),
        kcap_env(&[
            ("KCAP_URL", "http://127.0.0.1:5100"),
            ("KCAP_FLOW_AGENT_ID", &format!("a-${home}")),
        ])
    );
}

fn claude_gated_starts_no_server() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    for gated in [
        LaunchContext {
            server_url: None,
            ..ctx(
                "",
                kcap.to_str().unwrap(),
                "agent-5",
                Some(vec![Some("kcap-review")]),
            )
        },
        ctx(
            "  ",
            kcap.to_str().unwrap(),
            "agent-5",
            Some(vec![Some("kcap-review")]),
        ),
        ctx(
            "http://127.0.0.1:5100",
            "",
            "agent-5",
            Some(vec![Some("kcap-review")]),
        ),
    ] {
        let args = claude.plan_args(&gated);
        assert_eq!(mcp_config(&args), r#"{"mcpServers":{}}"#);
        let records = claude.run(&args);
        assert!(records.is_empty(), "{records:#?}");
    }

    // Control: the same setup, ungated, does start the recorder.
    let args = claude.plan_args(&ctx(
        "http://127.0.0.1:5100",
        kcap.to_str().unwrap(),
        "agent-5",
        None,
    ));
    assert_eq!(claude.run(&args).len(), 1);
}
