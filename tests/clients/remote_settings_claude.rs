//! Issue 34 on Claude Code 2.1.197 (`KCAP_CLAUDE_BIN`) and 2.1.328 (`KCAP_CLAUDE_NEXT_BIN`):
//! the fact `clients::claude::remote` rests on, measured on the real client through the
//! library's executor, and the refusal built on it.
//!
//! 1. The protection: `Client::plan` refuses a launch that hands over `ANTHROPIC_API_KEY`
//!    and no `ANTHROPIC_BASE_URL` ([`RenderError::RemoteSettings`]).
//! 2. The bite: the same launch without the refusal (the plan `Client::plan` renders for a
//!    base URL it accepts, that `ANTHROPIC_BASE_URL` then taken out of it) and carried
//!    out by the executor fetches `GET /api/claude_code/settings` from the default endpoint
//!    before its first turn and applies what it got: a deny rule `mcp__kcap-review` in the
//!    served settings hides every tool of our `kcap-review` server from that turn (the
//!    result channel's tools are still offered), and the settings land in the launch's
//!    `remote-settings.json`.
//! 3. The control: with `ANTHROPIC_BASE_URL` at a stand-in model API that is not the
//!    first-party host, `Client::plan` accepts the launch and no settings request reaches
//!    either stand-in; the turn offers `kcap-review`'s tools.
//!
//! Offline by construction, `api.anthropic.com` never contacted: the client runs in a
//! network namespace of its own (`Options::with_network`, `Network::Door`) whose only ways
//! out are two forwarded ports, to a stand-in HTTPS proxy ([`ConnectProxy`]: `HTTPS_PROXY`;
//! it accepts only `CONNECT api.anthropic.com:443`, ends the TLS itself with a certificate
//! for that name signed by a CA made for the run, trusted through `NODE_EXTRA_CA_CERTS`, and
//! has no upstream at all) and to the stand-in model API of the control. Anything else has
//! no route (no name server either). `NO_PROXY` names the loopback interface only, so the
//! control's model API is reached directly and `api.anthropic.com` through the proxy.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::claude_oracle;
use crate::common::door::{TestCa, tls_server};
use crate::common::model_api::{ConnectProxy, ModelApi, Request, anthropic_turn, response};
use crate::common::peers::{inherited_path, peer, skip};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::Credentials;
use kcap_mcp_registry::launch::door::{Endpoint, Network};
use kcap_mcp_registry::launch::{self, Options, Reviewer, TerminalEvent};
use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RenderError};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_fetches_and_applies_remote_settings_only_at_the_default_endpoint,
        claude_next_fetches_and_applies_remote_settings_only_at_the_default_endpoint,
    ]
}

/// The first-party host whose place the proxy takes.
pub(crate) const HOST: &str = "api.anthropic.com";
/// Where Claude Code fetches the remote managed settings, on [`HOST`].
const SETTINGS_PATH: &str = "/api/claude_code/settings";
/// The result channel's tool, which the served settings leave alone.
pub(crate) const RESULT_TOOL: &str = "mcp__kcap-flow-result__submit_review_result";
/// What every tool of our `kcap-review` server is named after.
pub(crate) const REVIEW_TOOLS: &str = "mcp__kcap-review__";
/// Inside the client's network namespace: the proxy's port and the control's model API's.
const PROXY_PORT: u16 = 41090;
pub(crate) const API_PORT: u16 = 41091;
/// How long one launch may take to its first turn that offers our tools.
const BOUND: Duration = Duration::from_secs(40);
/// How long it keeps running after that turn, so that a late request shows.
const SETTLE: Duration = Duration::from_secs(2);

/// The settings the stand-in serves (`H.object({uuid, checksum, settings})` in the bundle,
/// `D2a` in 2.1.197): a deny rule for every tool of `kcap-review`.
fn served() -> serde_json::Value {
    serde_json::json!({"permissions": {"deny": ["mcp__kcap-review"]}})
}

/// Claude Code 2.1.197.
fn claude_fetches_and_applies_remote_settings_only_at_the_default_endpoint() {
    check("KCAP_CLAUDE_BIN");
}

/// Claude Code 2.1.328.
fn claude_next_fetches_and_applies_remote_settings_only_at_the_default_endpoint() {
    check("KCAP_CLAUDE_NEXT_BIN");
}

/// The three steps of the module docs on the binary `var` names.
fn check(var: &'static str) {
    let Some(bin) = peer(var) else {
        return;
    };
    if let Some(missing) = launch::door::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let version = claude_oracle::version(&bin);
    let inputs = PlanInputs::new(Policy::Lenient);

    // 1. The protection: a key at the default endpoint is refused.
    let world = World::new(&bin, &version);
    let ctx = world.ctx(None);
    match Client::Claude.plan(&ctx, &inputs) {
        Err(LaunchError::Render(RenderError::RemoteSettings { source, .. })) => {
            assert_eq!(source, format!("https://{HOST}{SETTINGS_PATH}"));
        }
        other => panic!(
            "{version}: a key at the default endpoint was not refused: {:?}",
            other.map(|p| p.plan.env)
        ),
    }

    // 2. The bite: the same launch without the refusal, carried out: planned with a base
    // URL the check accepts, which is then taken out of the plan's environment.
    let mut plan = Client::Claude
        .plan(&world.ctx(Some("http://127.0.0.1:9")), &inputs)
        .unwrap()
        .plan;
    plan.env.retain(|v| v.name != "ANTHROPIC_BASE_URL");
    assert!(
        !plan.env.iter().any(|v| v.name == "ANTHROPIC_BASE_URL"),
        "{version}: {:?}",
        plan.env
    );
    let run = world.launch(&plan);
    let fetched: Vec<&Request> = (run.tunnel.iter())
        .filter(|r| r.method == "GET" && r.path.starts_with(SETTINGS_PATH))
        .collect();
    assert!(!fetched.is_empty(), "{version}: {}", run.summary());
    assert_eq!(
        fetched[0].header("x-api-key"),
        ["dummy"],
        "{version}: {:?}",
        fetched[0].headers
    );
    let turn = run.turn.as_deref().unwrap_or_else(|| {
        panic!(
            "{version}: no turn offered {RESULT_TOOL}: {}",
            run.summary()
        )
    });
    assert!(
        !turn.contains(REVIEW_TOOLS),
        "{version}: the served deny rule did not apply: {}",
        run.summary()
    );
    assert_eq!(
        run.cached.as_ref(),
        Some(&served()),
        "{version}: {}",
        run.summary()
    );
    assert!(run.api.is_empty(), "{version}: {}", run.summary());

    // 3. The control: a base URL at another host. Accepted, nothing fetched, not applied.
    let world = World::new(&bin, &version);
    let ctx = world.ctx(Some(&format!("http://127.0.0.1:{API_PORT}")));
    let plan = Client::Claude
        .plan(&ctx, &inputs)
        .unwrap_or_else(|e| panic!("{version}: {e}"))
        .plan;
    let run = world.launch(&plan);
    let settings = |r: &&Request| r.path.starts_with(SETTINGS_PATH);
    assert!(
        !run.tunnel.iter().any(|r| settings(&r)) && !run.api.iter().any(|r| settings(&r)),
        "{version}: {}",
        run.summary()
    );
    let turn = run
        .turn
        .as_deref()
        .unwrap_or_else(|| panic!("{version}: no turn: {}", run.summary()));
    assert!(turn.contains(REVIEW_TOOLS), "{version}: {}", run.summary());
    assert_eq!(run.cached, None, "{version}: {}", run.summary());
}

/// One launch's stand-ins and directories (also `quiet_claude.rs`'s).
pub(crate) struct World {
    bin: PathBuf,
    version: String,
    dir: tempfile::TempDir,
    /// `api.anthropic.com` behind the proxy.
    proxy: ConnectProxy,
    /// The control's model API.
    api: ModelApi,
}

impl World {
    pub(crate) fn new(bin: &Path, version: &str) -> World {
        let ca = TestCa::new("kcap remote settings test CA");
        let (cert, key) = ca.leaf(&[HOST]);
        let w = World {
            bin: bin.to_path_buf(),
            version: version.to_owned(),
            dir: tempfile::tempdir().unwrap(),
            proxy: ConnectProxy::start(HOST, tls_server(cert, key), answer),
            api: ModelApi::answering(answer),
        };
        for d in ["wt", "launch", "records", "bin"] {
            std::fs::create_dir_all(w.path(d)).unwrap();
        }
        std::fs::write(w.path("bin/ca.pem"), ca.pem()).unwrap();
        crate::common::stand_in::write_executable(
            &w.path("bin/kcap"),
            claude_oracle::mcp_recorder(&w.path("records")),
        );
        w
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join(rel)
    }

    fn s(&self, rel: &str) -> String {
        self.path(rel).to_str().unwrap().to_owned()
    }

    /// A reviewer launch holding `ANTHROPIC_API_KEY=dummy`, with `base` as
    /// `ANTHROPIC_BASE_URL` when given.
    pub(crate) fn ctx(&self, base: Option<&str>) -> LaunchContext {
        let mut env = vec![
            EnvVar::new("ANTHROPIC_API_KEY", "dummy"),
            EnvVar::new("IS_SANDBOX", "1"),
        ];
        env.extend(base.map(|b| EnvVar::new("ANTHROPIC_BASE_URL", b)));
        LaunchContext {
            server_url: Some("http://127.0.0.1:9".into()),
            kcap_bin: Some(self.s("bin/kcap")),
            agent_id: "agent-34".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            prompt: Some(claude_oracle::PROMPT.into()),
            worktree: Some(self.s("wt")),
            launch_dir: Some(self.s("launch")),
            credentials: Credentials {
                env,
                files: Vec::new(),
            },
            ..LaunchContext::default()
        }
    }

    /// Carries `plan` out through the executor in the default sandbox and a network of its
    /// own (module docs), the proxy and the test's CA added to its environment; until
    /// [`SETTLE`] after its first turn offering [`RESULT_TOOL`], or [`BOUND`].
    fn launch(&self, plan: &LaunchPlan) -> Run {
        self.launch_settling(plan, SETTLE)
    }

    /// [`World::launch`], running until `settle` after its first turn.
    pub(crate) fn launch_settling(&self, plan: &LaunchPlan, settle: Duration) -> Run {
        let mut plan = plan.clone();
        let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
        plan.env.extend([
            EnvVar::new("HTTPS_PROXY", &proxy),
            EnvVar::new("HTTP_PROXY", &proxy),
            EnvVar::new("NO_PROXY", "127.0.0.1,localhost"),
            EnvVar::new("NODE_EXTRA_CA_CERTS", self.s("bin/ca.pem")),
        ]);
        let api_port = self.api.url.rsplit(':').next().unwrap();
        let network = Network::Door(vec![
            Endpoint::new(PROXY_PORT, format!("127.0.0.1:{}", self.proxy.port)),
            Endpoint::new(API_PORT, format!("127.0.0.1:{api_port}")),
        ]);
        let options = crate::common::carry::reach(
            Options::default()
                .with_handshake_timeout(BOUND)
                .with_dialog_quiet(Duration::from_secs(5))
                .with_die_with_parent(true)
                .with_network(network),
            &[&self.bin, &self.path("bin")],
            &[&self.path("records")],
        );
        let what = format!("claude {}", self.version);
        let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
        let reviewer = launch::launch_with_parent_env(&plan, &self.bin, &options, &daemon_env)
            .unwrap_or_else(|e| panic!("{what}: {}", kcap_mcp_registry::text::error_chain(&e)));
        let Reviewer::Terminal(mut session) = reviewer else {
            panic!("{what}: the Claude Code plan runs in a terminal")
        };
        let started = Instant::now();
        let mut screen = Vec::new();
        let mut turned: Option<Instant> = None;
        loop {
            match session.next_event(Duration::from_millis(100)) {
                Ok(Some(TerminalEvent::Output(bytes))) => screen.extend_from_slice(&bytes),
                Ok(Some(TerminalEvent::Exited(status))) => panic!(
                    "{what} exited: {status:?}; {}",
                    claude_oracle::screen(&screen)
                ),
                Ok(_) => {}
                Err(e) => panic!("{what}: {e}; {}", claude_oracle::screen(&screen)),
            }
            if turned.is_none() && self.turn().is_some() {
                turned = Some(Instant::now());
            }
            if turned.is_some_and(|t| t.elapsed() >= settle) || started.elapsed() >= BOUND {
                break;
            }
        }
        // The launch directory goes with the client: read while it runs.
        let cached = std::fs::read_to_string(self.path("launch/home/.claude/remote-settings.json"))
            .ok()
            .map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)));
        session.stop().unwrap_or_else(|e| panic!("{what}: {e}"));
        let run = Run {
            targets: self.proxy.targets(),
            tunnel: self.proxy.requests(),
            api: self.api.requests(),
            turn: self.turn(),
            cached,
            screen: claude_oracle::screen(&screen),
        };
        eprintln!(
            "{what}: {:.1} s; {}",
            started.elapsed().as_secs_f64(),
            run.requests()
        );
        run
    }

    /// The body of the first model request (at either stand-in) that offers tools and names
    /// [`RESULT_TOOL`]: the turn typed once the servers listed their tools (2.1.197 lists MCP
    /// tools in `tools`, 2.1.328 names them, deferred, in the system prompt).
    fn turn(&self) -> Option<String> {
        let mut requests = self.proxy.requests();
        requests.extend(self.api.requests());
        requests.into_iter().find_map(|r| {
            let body = r.json()?;
            let tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
            (r.path.starts_with("/v1/messages") && tools && r.body.contains(RESULT_TOOL))
                .then_some(r.body)
        })
    }
}

/// The stand-ins' answer, at the proxy's `api.anthropic.com` and at the control's model API:
/// the settings document ([`served`]) to [`SETTINGS_PATH`], a streamed turn whose text is
/// `done` to a streamed Messages API request, `404` to everything else (the policy limits,
/// the telemetry).
fn answer(req: &Request) -> Vec<u8> {
    if req.method == "GET" && req.path.starts_with(SETTINGS_PATH) {
        let doc = serde_json::json!({"uuid": "u", "checksum": "c", "settings": served()});
        return response("200 OK", "application/json", doc.to_string().as_bytes());
    }
    let streamed = req.json().is_some_and(|b| b["stream"] == true);
    if req.method == "POST" && req.path.starts_with("/v1/messages?") && streamed {
        let turn = anthropic_turn("claude-stand-in", None);
        return response("200 OK", "text/event-stream", &turn);
    }
    response("404 Not Found", "application/json", b"{}")
}

/// What one launch showed.
pub(crate) struct Run {
    /// What the proxy was asked for (`CONNECT api.anthropic.com:443`, …).
    pub(crate) targets: Vec<String>,
    /// The requests in its tunnels to `api.anthropic.com`.
    pub(crate) tunnel: Vec<Request>,
    /// The requests at the control's model API.
    pub(crate) api: Vec<Request>,
    /// The first turn offering our tools ([`World::turn`]).
    pub(crate) turn: Option<String>,
    /// The launch's `$CLAUDE_CONFIG_DIR/remote-settings.json`, if it was written.
    cached: Option<serde_json::Value>,
    screen: String,
}

impl Run {
    /// Every request, as `method path` (and ` (the key)` when a header carries it), at each
    /// stand-in.
    pub(crate) fn requests(&self) -> String {
        let list = |rs: &[Request]| -> Vec<String> {
            let keyed = |r: &Request| {
                let key = ["x-api-key", "authorization"]
                    .iter()
                    .any(|h| r.header(h).iter().any(|v| v.contains("dummy")));
                if key { " (the key)" } else { "" }
            };
            (rs.iter())
                .map(|r| format!("{} {}{}", r.method, r.path, keyed(r)))
                .collect()
        };
        format!(
            "proxy targets {:?}; {HOST}: {:?}; model API: {:?}; cached settings {:?}",
            self.targets
                .iter()
                .collect::<std::collections::BTreeSet<_>>(),
            list(&self.tunnel),
            list(&self.api),
            self.cached,
        )
    }

    /// [`Run::requests`], the turn's MCP tools and the screen, for a failure.
    pub(crate) fn summary(&self) -> String {
        let tools: std::collections::BTreeSet<String> = (self.turn.iter())
            .flat_map(|t| t.match_indices("mcp__").map(|(i, _)| &t[i..]))
            .map(|t| {
                t.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                    .collect()
            })
            .collect();
        format!(
            "{}; turn's tools {tools:?}; screen {}",
            self.requests(),
            self.screen
        )
    }
}
