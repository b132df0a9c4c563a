//! The one launch call, `Client::plan`: for every client it renders the client's plan,
//! refuses what an administrator file would reconfigure, draws a fresh
//! launch id where names are aliased, and never drops a launch value in silence.

use std::path::Path;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::opencode;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchId, LaunchSecret};
use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RenderError, ResultDelivery};

fn ctx() -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap".into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into()), Some("kcap-flows".into())]),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/l1".into()),
        result_delivery: ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:4100/t".into(),
        },
        ..LaunchContext::default()
    }
}

fn inputs(policy: Policy) -> PlanInputs {
    let mut inputs = PlanInputs::new(policy);
    inputs.launch_id = Some(LaunchId::from_hex("0123456789abcdef").unwrap());
    inputs.launch_secret = Some(LaunchSecret::from_bytes([7; 16]));
    inputs.unverified_isolation = kcap_mcp_registry::clients::dispatch::UnverifiedIsolation::Allow;
    // A root without administrator files, whatever this machine's /etc holds.
    inputs.system_root = std::env::temp_dir().join("kcap-launch-api-empty-root");
    inputs
}

#[test]
fn every_client_renders_its_plan_through_the_one_call() {
    let c = ctx();
    for client in Client::ALL {
        let launch = client.plan(&c, &inputs(Policy::Lenient)).unwrap();
        assert_eq!(launch.plan.client, client);
        // OpenCode's own server gets the launch's password (`clients::opencode`).
        assert_eq!(
            launch.plan.env_value(opencode::SERVER_PASSWORD_VAR),
            (client == Client::OpenCode)
                .then(|| "07".repeat(16))
                .as_deref(),
            "{client}"
        );
        // The skipped flow-starting entry is a warning; a facts-only client's unverified
        // isolation too (Cursor, Kiro, Antigravity).
        assert!(
            launch.warnings[0].contains("\"kcap-flows\" skipped"),
            "{client}: {:?}",
            launch.warnings
        );
        assert_eq!(
            launch.warnings.len(),
            if client.spec().unverified_isolation {
                2
            } else {
                1
            },
            "{client}: {:?}",
            launch.warnings
        );
    }
}

#[test]
fn the_strict_policy_refuses_and_cursor_is_refused_without_the_opt_in() {
    let c = ctx();
    for client in Client::ALL {
        let e = client.plan(&c, &inputs(Policy::Strict)).unwrap_err();
        assert!(matches!(e, LaunchError::Rejected(_)), "{client}: {e}");
    }
    let mut default = PlanInputs::new(Policy::Lenient);
    default.system_root = inputs(Policy::Lenient).system_root;
    let e = Client::Cursor.plan(&c, &default).unwrap_err();
    assert!(matches!(
        e,
        LaunchError::Render(RenderError::UnverifiedIsolation {
            client: Client::Cursor
        })
    ));
}

#[test]
fn a_fresh_launch_id_is_drawn_per_call() {
    let c = ctx();
    let mut i = inputs(Policy::Lenient);
    i.launch_id = None;
    for client in [Client::Gemini, Client::Kiro] {
        let a = client.plan(&c, &i).unwrap().plan;
        let b = client.plan(&c, &i).unwrap().plan;
        assert_ne!(a.servers[0].wire_name, b.servers[0].wire_name, "{client}");
        assert!(a.servers[0].wire_name.starts_with("kcap-flow-result-"));
    }
}

#[test]
fn a_model_or_effort_a_client_cannot_carry_is_refused_or_warned() {
    let mut c = ctx();
    c.mcp_allowlist = None;
    c.model = Some("m1".into());
    c.effort = Some("high".into());
    let strict = inputs(Policy::Strict);
    let lenient = inputs(Policy::Lenient);
    for (client, dropped) in [
        (Client::Claude, &[][..]),
        (Client::Codex, &[]),
        (Client::Gemini, &["effort"]),
        (Client::Copilot, &["effort"]),
        (Client::OpenCode, &["effort"]),
        (Client::Kiro, &["model", "effort"]),
        (Client::Antigravity, &["model", "effort"]),
    ] {
        match dropped.first() {
            None => assert!(client.plan(&c, &strict).is_ok(), "{client}"),
            Some(first) => {
                let e = client.plan(&c, &strict).unwrap_err();
                assert!(
                    matches!(&e, LaunchError::Render(RenderError::Unsupported { field, .. }) if field == first),
                    "{client}: {e}"
                );
                assert_eq!(
                    e.to_string(),
                    format!(
                        "the {client} launch has no setting for the reviewer's `{first}`, so it \
                         would be dropped; leave it out for {client}, or use the lenient policy \
                         to launch without it"
                    )
                );
            }
        }
        let mut warnings = client.plan(&c, &lenient).unwrap().warnings;
        // A facts-only client's unverified isolation is a warning of its own, last.
        if client.spec().unverified_isolation {
            let last = warnings.pop().unwrap_or_default();
            assert!(last.contains("isolation is not verified"), "{last}");
        }
        assert_eq!(warnings.len(), dropped.len(), "{client}: {warnings:?}");
        for (w, field) in warnings.iter().zip(dropped) {
            assert!(w.contains(&format!("`{field}`")), "{client}: {w}");
        }
    }
}

#[test]
fn an_administrator_file_refuses_the_launch_by_name() {
    let root = tempfile::tempdir().unwrap();
    let c = ctx();
    for client in Client::ALL {
        for file in client.managed_files() {
            let mut i = inputs(Policy::Lenient);
            i.system_root = root.path().to_owned();
            let path = root.path().join(file.path.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "{}").unwrap();
            let e = client.plan(&c, &i).unwrap_err();
            assert!(
                matches!(&e, LaunchError::Render(RenderError::Managed { file: f, .. }) if f == Path::new(file.path)),
                "{client}: {e}"
            );
            assert!(e.to_string().contains(file.path), "{e}");
            std::fs::remove_file(&path).unwrap();
        }
    }
}

#[test]
fn a_control_or_invisible_character_in_a_launch_value_is_refused_by_the_library() {
    type Set = fn(&mut LaunchContext, String);
    let fields: [(&str, Set); 8] = [
        ("agent_id", |c, v| c.agent_id = v),
        ("server_url", |c, v| c.server_url = Some(v)),
        ("kcap_bin", |c, v| c.kcap_bin = Some(v)),
        ("result_capability_url", |c, v| {
            c.result_delivery = ResultDelivery::Brokered { capability_url: v }
        }),
        ("worktree", |c, v| c.worktree = Some(v)),
        ("launch_dir", |c, v| c.launch_dir = Some(v)),
        ("model", |c, v| c.model = Some(v)),
        ("effort", |c, v| c.effort = Some(v)),
    ];
    for client in Client::ALL {
        for (field, set) in fields {
            for (bad, name) in [
                ('\0', "a null character (U+0000)"),
                ('\n', "a line break (U+000A)"),
                ('\u{1b}', "an escape character (U+001B)"),
                ('\u{202e}', "a right-to-left override (U+202E)"),
            ] {
                let mut c = ctx();
                let value = format!("/x{bad}y");
                set(&mut c, value.clone());
                let e = client.plan(&c, &inputs(Policy::Lenient)).unwrap_err();
                assert!(
                    matches!(&e, LaunchError::Render(RenderError::ForbiddenChar { field: f, value: v, found })
                        if f == &field && v == &value && *found == bad),
                    "{client} {field}: {e:?}"
                );
                assert_eq!(
                    e.to_string(),
                    format!(
                        "the reviewer's `{field}` `{}` contains {name}; give it without one",
                        value.escape_debug()
                    )
                );
            }
        }
    }
}

#[test]
fn the_warnings_of_one_launch_are_capped_and_count_the_rest() {
    let mut c = ctx();
    c.agent_id = "a".repeat(10_000);
    c.mcp_allowlist = Some(vec![None; 100_000]);
    let planned = Client::Codex.plan(&c, &inputs(Policy::Lenient)).unwrap();
    let skipped: Vec<&String> = planned
        .warnings
        .iter()
        .filter(|w| w.contains("skipped"))
        .collect();
    assert_eq!(
        skipped.len(),
        kcap_mcp_registry::clients::dispatch::MAX_SKIP_WARNINGS + 1,
        "{:?}",
        &planned.warnings[..3]
    );
    assert!(
        skipped.last().unwrap().ends_with(&format!(
            ": {} more allowlist entries skipped (the first 32 are listed)",
            100_000 - 32
        )),
        "{}",
        skipped.last().unwrap()
    );
    let bytes: usize = planned.warnings.iter().map(String::len).sum();
    assert!(bytes < 1 << 20, "{bytes} bytes of warnings");
}

#[test]
fn a_prompt_a_client_cannot_take_in_argv_is_refused_when_planning() {
    let limit = kcap_mcp_registry::clients::plan::MAX_ARG_BYTES;
    let mut in_argv = Vec::new();
    let mut typed_in = Vec::new();
    for client in Client::ALL {
        let mut c = ctx();
        // Room for the note on where the pull request's client configuration is kept.
        c.prompt = Some("x".repeat(limit - 2048));
        let fits = client.plan(&c, &inputs(Policy::Lenient)).unwrap();
        let takes_it_in_argv = fits.plan.argv.iter().any(|a| a.contains("xxxx"));
        // Claude Code's prompt is typed into its terminal (`typed_prompt`): no argv limit.
        let typed = fits.plan.typed_prompt.is_some();
        // What the plan adds to the prompt: the note on the kept client configuration.
        let added = fits.plan.pr_config.as_deref().map_or(0, |dir| {
            2 + kcap_mcp_registry::clients::plan::pr_config_note(&fits.plan.worktree_remove, dir)
                .len()
        });
        for (prompt, nul) in [("x".repeat(limit), false), ("review\0this".into(), true)] {
            c.prompt = Some(prompt.clone());
            match client.plan(&c, &inputs(Policy::Lenient)) {
                Err(LaunchError::Render(e @ RenderError::ArgvUnpassable { .. })) => {
                    assert!(takes_it_in_argv, "{client}: {e}");
                    let RenderError::ArgvUnpassable {
                        prompt: p,
                        bytes,
                        nul: n,
                        ..
                    } = &e
                    else {
                        unreachable!()
                    };
                    assert!(*p && *n == nul, "{client}: {e:?}");
                    if !nul {
                        assert_eq!(*bytes, limit + added);
                        assert!(
                            e.to_string().contains(&format!(
                                "takes the reviewer's prompt in argv, and it is {} bytes, more \
                             than the {} one argument holds",
                                limit + added,
                                limit - 1
                            )),
                            "{e}"
                        );
                    }
                }
                Err(LaunchError::Render(RenderError::ForbiddenChar {
                    field: "prompt",
                    found: '\0',
                    ..
                })) => assert!(typed && nul, "{client}"),
                Ok(planned) => {
                    assert!(!takes_it_in_argv, "{client} took an unpassable prompt");
                    if typed {
                        let text = &planned.plan.typed_prompt.as_ref().unwrap().text;
                        assert!(text.starts_with(&prompt) && !nul, "{client}");
                    }
                }
                Err(e) => panic!("{client}: {e}"),
            }
        }
        if takes_it_in_argv {
            in_argv.push(client.name());
        }
        if typed {
            typed_in.push(client.name());
        }
    }
    assert_eq!(in_argv, ["codex", "antigravity"]);
    assert_eq!(typed_in, ["claude"]);
}

#[test]
fn a_launch_request_builds_the_context_a_daemon_would_and_plans_it_strictly() {
    use kcap_mcp_registry::{LaunchCommand, LaunchRequest};
    let cmd: LaunchCommand = serde_json::from_str(
        r#"{"agent_id":"a1","mcp_allowlist":["kcap-review","kcap-flows"],
            "result_capability_url":"http://127.0.0.1:4100/t"}"#,
    )
    .unwrap();
    let request = |client| {
        LaunchRequest::new(client, cmd.clone())
            .server("http://127.0.0.1:5100", "/opt/kcap")
            .worktree("/work/tree")
            .launch_dir("/run/kcap/l1")
    };
    // The same context as the hand-built one of these tests, with a credential.
    let mut want = ctx();
    want.credentials
        .env
        .push(EnvVar::new("ANTHROPIC_API_KEY", "sk-test"));
    let built = request(Client::Claude)
        .credential_env("ANTHROPIC_API_KEY", "sk-test")
        .context()
        .unwrap();
    assert_eq!(built, want);
    // Strict by default: kcap-flows starts flows, so it is refused.
    for client in Client::ALL {
        let e = request(client).plan().unwrap_err();
        assert!(matches!(e, LaunchError::Rejected(_)), "{client}: {e}");
    }
    // Lenient: skipped with a warning, and every client plans (the facts-only clients only
    // when allowed).
    for client in Client::ALL {
        let r = request(client).policy(Policy::Lenient);
        let r = if client.spec().unverified_isolation {
            assert!(r.clone().plan().is_err());
            r.allow_unverified_isolation()
        } else {
            r
        };
        let planned = r.plan().unwrap_or_else(|e| panic!("{client}: {e}"));
        assert_eq!(planned.plan.launch_dir, "/run/kcap/l1", "{client}");
        assert!(
            planned.warnings.iter().any(|w| w.contains("kcap-flows")),
            "{client}: {:?}",
            planned.warnings
        );
    }
    // A path that is not UTF-8 is refused, naming the field.
    use std::os::unix::ffi::OsStrExt as _;
    let odd = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/work/tr\xffee"));
    let e = request(Client::Codex).worktree(odd).plan().unwrap_err();
    assert!(
        matches!(
            e,
            LaunchError::Render(RenderError::NotUtf8 { field: "worktree" })
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "the reviewer's `worktree` is not UTF-8, and the client reads it as text; use a path \
         of UTF-8 characters"
    );
}

#[test]
fn a_relative_worktree_launch_dir_or_cache_dir_is_refused_for_every_client() {
    for client in Client::ALL {
        for (field, flag) in [
            ("worktree", "--worktree"),
            ("launch_dir", "--launch-dir"),
            ("cache_dir", "--cache-dir"),
        ] {
            let mut c = ctx();
            let relative = Some("worktrees/review-42".to_owned());
            match field {
                "worktree" => c.worktree = relative,
                "launch_dir" => c.launch_dir = relative,
                _ => c.cache_dir = relative,
            }
            let e = client.plan(&c, &inputs(Policy::Lenient)).unwrap_err();
            assert!(
                matches!(&e, LaunchError::Render(RenderError::NeedsAbsolute { client: c, field: f })
                    if *c == client && *f == field),
                "{client} {field}: {e:?}"
            );
            assert!(
                e.to_string()
                    .ends_with(&format!("give the launch its `{field}` ({flag} DIR)")),
                "{e}"
            );
        }
    }
}

#[test]
fn a_launch_without_a_kcap_server_is_refused_under_strict_and_warned_under_lenient() {
    use kcap_mcp_registry::{LaunchCommand, LaunchRequest};
    let cmd: LaunchCommand =
        serde_json::from_str(r#"{"agent_id":"a1","mcp_allowlist":["kcap-review"]}"#).unwrap();
    // The daemon forgot `server`: its reviewer would get no MCP server, no result channel.
    let forgot = |client| {
        LaunchRequest::new(client, cmd.clone())
            .worktree("/work/tree")
            .launch_dir("/run/kcap/l1")
            .allow_unverified_isolation()
    };
    for client in Client::ALL {
        match forgot(client).plan() {
            Err(LaunchError::Render(RenderError::Gated { client: c })) => assert_eq!(c, client),
            other => panic!("{client}: {other:?}"),
        }
        let lenient = forgot(client).policy(Policy::Lenient).plan();
        let planned = match (client, lenient) {
            // Antigravity refuses direct result delivery first.
            (Client::Antigravity, Err(_)) => continue,
            (_, planned) => planned.unwrap_or_else(|e| panic!("{client}: {e}")),
        };
        assert!(planned.plan.servers.is_empty(), "{client}");
        assert!(
            planned.warnings[0].starts_with(
                "agent \"a1\": no kcap server URL or no kcap binary (--server-url, --kcap-bin; \
                 `LaunchRequest::server`), so every MCP server"
            ),
            "{client}: {:?}",
            planned.warnings
        );
    }
    // With the server, the strict plan injects the result channel and the allowlist.
    let planned = forgot(Client::Gemini)
        .server("http://127.0.0.1:5100", "/opt/kcap")
        .plan()
        .unwrap();
    let ids: Vec<&str> = planned.plan.servers.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["kcap-flow-result", "kcap-review"]);
}
