//! A launch behind the door (`LaunchContext::door`, `clients::door`): the plan names the
//! door's endpoints, every URL the reviewer uses names them, and the model key the daemon
//! handed over is in no part of the plan the client gets (its environment, its files, its
//! argv), only in the door's credential. What would enter the reviewer anyway is refused,
//! naming it.

#[cfg(feature = "cli")]
use crate::common;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::door::DOOR_FIRST_PORT;
use kcap_mcp_registry::clients::plan::{
    DoorCredential, DoorEndpoint, DoorScheme, EnvVar, LaunchPlan, LaunchSecret,
};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials};
use kcap_mcp_registry::{
    LaunchContext, LaunchError, Policy, RenderError, ResultDelivery, Snapshot,
};

const KEY: &str = "sk-ant-daemon-key-0123456789";

fn ctx(door: bool) -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100/kcap".into()),
        kcap_bin: Some("/opt/kcap/bin/kcap".into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        prompt: Some("Review PR 42".into()),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/l1".into()),
        result_delivery: ResultDelivery::from_capability_url(Some(
            "http://127.0.0.1:5100/cap/t0k3n".into(),
        )),
        snapshot: Snapshot::from_launch(true, Some("http://127.0.0.1:5200/rc".into())),
        credentials: Credentials {
            env: vec![
                EnvVar::new("ANTHROPIC_API_KEY", KEY),
                EnvVar::new("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000/anthropic"),
                EnvVar::new("IS_SANDBOX", "1"),
            ],
            files: Vec::new(),
        },
        door,
        ..LaunchContext::default()
    }
}

fn plan(client: Client, ctx: &LaunchContext) -> Result<LaunchPlan, LaunchError> {
    let mut inputs = PlanInputs::new(Policy::Strict);
    inputs.launch_secret = Some(LaunchSecret::from_bytes([7; 16]));
    client.plan(ctx, &inputs).map(|p| p.plan)
}

/// The plan without its door, as JSON: what reaches the client.
fn client_side(plan: &LaunchPlan) -> String {
    let mut plan = plan.clone();
    plan.door = None;
    plan.to_json()
}

#[test]
fn a_claude_launch_behind_the_door_names_its_endpoints_and_keeps_the_key_outside() {
    let plan = plan(Client::Claude, &ctx(true)).unwrap();
    let door = plan.door.clone().unwrap();
    let endpoint = |i: u16, upstream: &str, serves: &str, credential| DoorEndpoint {
        port: DOOR_FIRST_PORT + i,
        upstream: upstream.into(),
        scheme: DoorScheme::Http,
        serves: serves.into(),
        credential,
    };
    assert_eq!(
        door.endpoints,
        [
            endpoint(
                0,
                "127.0.0.1:4000",
                "model API (ANTHROPIC_BASE_URL)",
                Some(DoorCredential {
                    header: "x-api-key".into(),
                    value: KEY.into(),
                })
            ),
            // The kcap server and the capability URL share a host and port: one endpoint.
            endpoint(1, "127.0.0.1:5100", "kcap server (server_url)", None),
            endpoint(
                2,
                "127.0.0.1:5200",
                "review context (review_context_url)",
                None
            ),
        ]
    );
    // The client's environment: the token, the door's base URL (path kept).
    let token = format!("kcap-door-{}", "07".repeat(16));
    assert_eq!(plan.env_value("ANTHROPIC_API_KEY"), Some(token.as_str()));
    assert_eq!(
        plan.env_value("ANTHROPIC_BASE_URL"),
        Some("http://127.0.0.1:41001/anthropic")
    );
    assert_eq!(plan.env_value("IS_SANDBOX"), Some("1"));
    // The servers' URLs name the door, and nothing the client gets holds the key or a URL
    // of the host's.
    let shown = client_side(&plan);
    for door_url in [
        "http://127.0.0.1:41002/kcap",
        "http://127.0.0.1:41002/cap/t0k3n",
        "http://127.0.0.1:41003/rc",
    ] {
        assert!(shown.contains(door_url), "{door_url} not in {shown}");
    }
    for host in [KEY, ":5100", ":5200", ":4000"] {
        assert!(!shown.contains(host), "{host} in {shown}");
    }
    // The bite: without the door the key and the host's URLs are the client's.
    let open = plan_open();
    assert!(open.door.is_none());
    let shown = client_side(&open);
    for host in [KEY, ":5100", ":5200", ":4000"] {
        assert!(shown.contains(host), "{host} not in {shown}");
    }
}

/// An `https://` model API and kcap server: each endpoint records the scheme (the door speaks
/// TLS to it), its upstream the host and port 443, and the client gets the door's `http://`
/// URL. The JSON names the scheme only when `https`, so a plan without one reads as before.
#[test]
fn https_urls_go_through_the_door_which_records_the_scheme() {
    let mut c = ctx(true);
    c.credentials.env.retain(|v| v.name != "ANTHROPIC_BASE_URL");
    c.credentials.env.push(EnvVar::new(
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
    ));
    c.server_url = Some("https://kcap.example/kcap".into());
    c.result_delivery =
        ResultDelivery::from_capability_url(Some("https://kcap.example/cap/t0k3n".into()));
    let plan = plan(Client::Claude, &c).unwrap();
    let door = plan.door.clone().unwrap();
    let got: Vec<(u16, &str, DoorScheme)> = door
        .endpoints
        .iter()
        .map(|e| (e.port, e.upstream.as_str(), e.scheme))
        .collect();
    assert_eq!(
        got,
        [
            (41001, "api.anthropic.com:443", DoorScheme::Https),
            (41002, "kcap.example:443", DoorScheme::Https),
            (41003, "127.0.0.1:5200", DoorScheme::Http),
        ]
    );
    assert_eq!(
        plan.env_value("ANTHROPIC_BASE_URL"),
        Some("http://127.0.0.1:41001")
    );
    let shown = client_side(&plan);
    assert!(
        shown.contains("http://127.0.0.1:41002/cap/t0k3n"),
        "{shown}"
    );
    assert!(!shown.contains("kcap.example"), "{shown}");
    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).unwrap();
    let endpoints = json["door"]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints[0]["scheme"], "https");
    assert!(endpoints[2].get("scheme").is_none(), "{json}");
    let back: LaunchPlan = serde_json::from_str(&plan.to_json()).unwrap();
    assert_eq!(back, plan);
    // An endpoint without the field (a plan written before it) is `http`.
    let mut older = json.clone();
    older["door"]["endpoints"][0]
        .as_object_mut()
        .unwrap()
        .remove("scheme");
    let older: LaunchPlan = serde_json::from_str(&older.to_string()).unwrap();
    assert_eq!(older.door.unwrap().endpoints[0].scheme, DoorScheme::Http);
}

fn plan_open() -> LaunchPlan {
    plan(Client::Claude, &ctx(false)).unwrap()
}

#[test]
fn what_would_enter_the_reviewer_behind_the_door_is_refused_naming_it() {
    let refused = |client: Client, change: &dyn Fn(&mut LaunchContext)| {
        let mut c = ctx(true);
        change(&mut c);
        match plan(client, &c) {
            Err(LaunchError::Render(e)) => (e.clone(), e.to_string()),
            other => panic!("{client}: {other:?}"),
        }
    };
    let (e, shown) = refused(Client::Cursor, &|c| c.credentials = Credentials::default());
    assert_eq!(
        e,
        RenderError::DoorUnsupported {
            client: Client::Cursor
        }
    );
    assert_eq!(
        shown,
        "cannot put the Cursor reviewer behind the door: how its model API goes through the \
         door is not measured; launch it without the door"
    );
    let set = |name: &'static str, value: &'static str| {
        move |c: &mut LaunchContext| {
            c.credentials.env.retain(|v| v.name != name);
            c.credentials.env.push(EnvVar::new(name, value));
        }
    };
    let (_, shown) = refused(
        Client::Claude,
        &set("ANTHROPIC_BASE_URL", "ftp://api.anthropic.com"),
    );
    assert_eq!(
        shown,
        "cannot put the Claude Code reviewer behind the door: `ANTHROPIC_BASE_URL` \
         \"ftp://api.anthropic.com\" is not an http:// or https:// URL"
    );
    let (_, shown) = refused(Client::Claude, &|c| {
        c.credentials.env.retain(|v| v.name != "ANTHROPIC_BASE_URL");
    });
    assert_eq!(
        shown,
        "cannot put the Claude Code reviewer behind the door: `ANTHROPIC_BASE_URL` is not set: \
         the door forwards to the model API the daemon names; hand it over as a credential, an \
         http:// or https:// URL (the CLI: `--credential NAME`, its value from the environment)"
    );
    let (_, shown) = refused(Client::Claude, &set("CLAUDE_CODE_OAUTH_TOKEN", "oauth"));
    assert_eq!(
        shown,
        "cannot put the Claude Code reviewer behind the door: credential \
         `CLAUDE_CODE_OAUTH_TOKEN` would enter the reviewer: the door keeps only the model key \
         outside; hand over the model key as one of `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`"
    );
    let (_, shown) = refused(Client::Claude, &set("ANTHROPIC_AUTH_TOKEN", "t"));
    assert!(
        shown.contains("`ANTHROPIC_AUTH_TOKEN` is a second model key"),
        "{shown}"
    );
    let (_, shown) = refused(Client::Claude, &|c| {
        c.credentials.env.clear();
        c.credentials.files.push(CredentialFile {
            name: ".credentials.json".into(),
            contents: r#"{"claudeAiOauth":{"accessToken":"a"}}"#.into(),
        });
    });
    assert!(
        shown.contains("credential `.credentials.json` is a credential file"),
        "{shown}"
    );
    let (_, shown) = refused(Client::Claude, &|c| {
        c.server_url = Some("https://127.0.0.1:5100/x".into())
    });
    assert!(
        shown.contains(
            "`result_capability_url` \"http://127.0.0.1:5100/cap/t0k3n\" names the host and \
             port of another URL with the other scheme (http and https); give one"
        ),
        "{shown}"
    );
    // A kcap URL on the model API's host and port would get the key on its requests.
    let (_, shown) = refused(Client::Claude, &|c| {
        c.server_url = Some("http://127.0.0.1:4000/kcap".into());
    });
    assert!(
        shown.contains("is the model API's host and port"),
        "{shown}"
    );
}

#[test]
fn the_auth_token_goes_in_a_bearer_header() {
    let mut c = ctx(true);
    c.credentials.env[0] = EnvVar::new("ANTHROPIC_AUTH_TOKEN", KEY);
    let plan = plan(Client::Claude, &c).unwrap();
    assert_eq!(
        plan.door.unwrap().endpoints[0].credential,
        Some(DoorCredential {
            header: "authorization".into(),
            value: format!("Bearer {KEY}"),
        })
    );
}

/// `render claude --door --format plan` prints the door; a client without a door is
/// refused naming why.
#[cfg(feature = "cli")]
#[test]
fn render_door_prints_the_doors_plan() {
    let args = |client: &str| {
        vec![
            "render".to_owned(),
            client.to_owned(),
            "--door".into(),
            "--agent-id".into(),
            "a1".into(),
            "--server-url".into(),
            "http://127.0.0.1:5100".into(),
            "--kcap-bin".into(),
            "/opt/kcap/bin/kcap".into(),
            "--launch-dir".into(),
            "/run/kcap/l1".into(),
            "--worktree".into(),
            "/work/tree".into(),
            "--credential".into(),
            "ANTHROPIC_BASE_URL".into(),
            "--format".into(),
            "plan".into(),
        ]
    };
    let run = |client: &str| {
        let args = args(client);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::finish(
            common::bin()
                .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000")
                .args(&args),
        )
    };
    let r = run("claude");
    assert_eq!(r.code, 0, "{r:?}");
    let plan: LaunchPlan = serde_json::from_str(&r.stdout).unwrap();
    let door = plan.door.unwrap();
    assert_eq!(door.endpoints.len(), 2, "{door:?}");
    assert_eq!(door.endpoints[1].upstream, "127.0.0.1:5100");
    let r = run("cursor");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(
            "cannot put the Cursor reviewer behind the door: how its model API goes through \
             the door is not measured"
        ),
        "{r:?}"
    );
}

/// Every client whose room declares a `DoorSpec`, with its base URL and each of its keys
/// in turn: the model API's endpoint sets that key in the spec's header, the client gets
/// the token and the door's URL (in its environment or its files), and nothing the
/// client gets holds the key or the model API's host port. Without the door it does.
#[test]
fn every_client_with_a_door_spec_keeps_each_of_its_keys_outside() {
    let mut clients = Vec::new();
    for client in Client::ALL {
        for spec in client.spec().door {
            clients.push(client);
            for key in spec.keys {
                let mut c = ctx(true);
                c.credentials.env = vec![
                    EnvVar::new(key.var, KEY),
                    EnvVar::new(spec.base_url, "http://127.0.0.1:4000/v1"),
                ];
                c.model = client.spec().carries_model.then(|| "anthropic/m".into());
                let behind =
                    plan(client, &c).unwrap_or_else(|e| panic!("{client} {}: {e}", key.var));
                let model = &behind.door.as_ref().unwrap().endpoints[0];
                assert_eq!(model.upstream, "127.0.0.1:4000", "{client}");
                assert_eq!(
                    model.credential,
                    Some(DoorCredential {
                        header: key.header.into(),
                        value: format!("{}{KEY}", key.prefix),
                    }),
                    "{client} {}",
                    key.var
                );
                // In the client's environment, or where its room writes them (Qwen Code's
                // settings file).
                let token = format!("kcap-door-{}", "07".repeat(16));
                let shown = client_side(&behind);
                for door in [token.as_str(), "http://127.0.0.1:41001/v1"] {
                    assert!(shown.contains(door), "{client}: no {door} in {shown}");
                }
                for host in [KEY, ":4000"] {
                    assert!(!shown.contains(host), "{client}: {host} in {shown}");
                }
                c.door = false;
                let open = client_side(&plan(client, &c).unwrap());
                assert!(open.contains(KEY), "{client}: without the door: {open}");
            }
        }
    }
    for client in [
        Client::OpenCode,
        Client::Copilot,
        Client::Gemini,
        Client::Qwen,
    ] {
        assert!(clients.contains(&client), "{clients:?}");
    }
}

/// Codex CLI's key is only in `auth.json`: behind the door the file the client gets holds the
/// token in `OPENAI_API_KEY`, the door sets the key as `authorization: Bearer`, and the base
/// URL in `config.toml` names the door. A file without the key is refused, naming it.
#[test]
fn codex_s_key_file_holds_the_token_behind_the_door() {
    let codex_ctx = |door: bool, auth: &str| {
        let mut c = ctx(door);
        c.credentials = Credentials {
            env: vec![EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1")],
            files: vec![CredentialFile {
                name: "auth.json".into(),
                contents: auth.into(),
            }],
        };
        c
    };
    let auth = format!(r#"{{"OPENAI_API_KEY":"{KEY}"}}"#);
    let behind = plan(Client::Codex, &codex_ctx(true, &auth)).unwrap();
    assert_eq!(
        behind.door.as_ref().unwrap().endpoints[0].credential,
        Some(DoorCredential {
            header: "authorization".into(),
            value: format!("Bearer {KEY}"),
        })
    );
    let file = |plan: &LaunchPlan, name: &str| {
        let f = plan.files.iter().find(|f| f.path.ends_with(name));
        f.unwrap_or_else(|| panic!("no {name} in {:?}", plan.files))
            .contents
            .clone()
    };
    let token = format!("kcap-door-{}", "07".repeat(16));
    assert_eq!(
        file(&behind, "auth.json"),
        format!(r#"{{"OPENAI_API_KEY":"{token}"}}"#)
    );
    assert!(
        file(&behind, "config.toml").contains("openai_base_url = \"http://127.0.0.1:41001/v1\"")
    );
    let shown = client_side(&behind);
    for host in [KEY, ":4000"] {
        assert!(!shown.contains(host), "{host} in {shown}");
    }
    // The bite: without the door the file holds the key.
    let open = plan(Client::Codex, &codex_ctx(false, &auth)).unwrap();
    assert_eq!(file(&open, "auth.json"), auth);
    let refused = plan(
        Client::Codex,
        &codex_ctx(true, r#"{"tokens":{"id_token":"x"}}"#),
    );
    let Err(LaunchError::Render(e)) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        e.to_string(),
        "cannot put the Codex CLI reviewer behind the door: credential `auth.json` holds no \
         model key where the door looks; hand over the model key as one of `auth.json` (its \
         `OPENAI_API_KEY`)"
    );
}

/// A client with two model APIs behind the door (OpenCode's Anthropic and OpenAI providers)
/// goes through the one whose base URL is handed over, with that provider's key header; the
/// base URLs of both are refused, naming the second.
#[test]
fn one_model_api_of_several_goes_behind_the_door() {
    let openai = |c: &mut LaunchContext| {
        c.model = Some("openai/gpt-4o".into());
        c.credentials.env = vec![
            EnvVar::new("OPENAI_API_KEY", KEY),
            EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1"),
        ];
    };
    let mut c = ctx(true);
    openai(&mut c);
    let behind = plan(Client::OpenCode, &c).unwrap();
    let model = &behind.door.unwrap().endpoints[0];
    assert_eq!(model.serves, "model API (OPENAI_BASE_URL)");
    assert_eq!(
        model.credential,
        Some(DoorCredential {
            header: "authorization".into(),
            value: format!("Bearer {KEY}"),
        })
    );
    c.credentials
        .env
        .push(EnvVar::new("ANTHROPIC_BASE_URL", "http://127.0.0.1:4001"));
    let Err(LaunchError::Render(e)) = plan(Client::OpenCode, &c) else {
        panic!("two model APIs were put behind the door")
    };
    assert_eq!(
        e.to_string(),
        "cannot put the OpenCode reviewer behind the door: credential `OPENAI_BASE_URL` names a \
         second model API; the door forwards to one, hand over one; hand over the model key as \
         one of `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`"
    );
}
