//! Proof on the operator's machine that a reviewer starts exactly the injected MCP servers:
//! `kcap-mcp-registry verify <client> --client-bin PATH`, and the real-client conformance
//! tests, are this module (feature `launch`).
//!
//! [`verify`] runs the installed client once, offline, in a throwaway root (a directory under
//! the temporary directory, removed afterwards):
//!
//! 1. **Hostile configuration.** The daemon user's files in a throwaway `HOME` (and XDG
//!    directories), the reviewed repository's files in a throwaway worktree and its parent,
//!    and variables of the daemon's environment pointing the client at more (per client:
//!    [`Source`]); each declares MCP servers named like the injected ones and otherwise, and
//!    hooks where the client has them.
//! 2. **The real plan**, rendered through [`Client::plan`] for a launch whose kcap binary is
//!    the recorder ([`recorder`]: this crate's binary under the name [`RECORDER_NAME`],
//!    logging each start's argv, environment and working directory), with dummy credentials
//!    and the model API at a dead local port (`127.0.0.1:9`); `verify` adds `HTTP_PROXY` and
//!    `HTTPS_PROXY` at that port (and `NO_PROXY` for the loopback interface) to the plan's
//!    environment so nothing else leaves the machine.
//! 3. **Carried out by the executor** ([`launch::launch_with_parent_env`](crate::launch::launch_with_parent_env)), from a daemon
//!    environment of the hostile values: ACP `initialize` and `session/new` for ACP clients,
//!    a pseudo-terminal for the others. It waits (bounded) until every injected server has
//!    listed its tools, lets the client run on for a settle time, and stops its process
//!    group.
//! 4. **Judged** by what the recorders saw ([`Check`]): every injected server started with
//!    exactly its argv and `KCAP_*` variables; no server or hook of the user's, the project's
//!    or the environment's configuration ran; no other start; no value of the daemon's
//!    environment reached a server; the servers ran in the worktree (where the client does
//!    that). The report names the client version (`<client> --version`) and whether this
//!    crate's tests prove it ([`Client::proven_on`]).
//!
//! When every scenario holds, the CLI records the pass for the binary and version it ran
//! ([`record`]), which lets the strict policy launch a version the tests do not prove.
//!
//! ```no_run
//! use kcap_mcp_registry::clients::Client;
//! use kcap_mcp_registry::ops::verify::{self, Request, Verdict};
//!
//! let request = Request::new(
//!     Client::Gemini,
//!     "/usr/local/bin/gemini".into(),
//!     std::env::current_exe()?, // the kcap-mcp-registry binary, which is the recorder
//! );
//! let report = verify::verify(&request)?;
//! print!("{}", report.human());
//! assert_eq!(report.verdict(), Verdict::Holds);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod hostile;
mod probe;
pub mod record;
pub mod recorder;
mod report;
mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clients::hostile::{Source, VerifySpec};
pub use error::VerifyError;
pub use probe::installed_version;
pub use recorder::{
    ATTACKS_FILE, Attack, AttackKind, RECORDER_NAME, Record, read_records, run_if_recorder,
};
pub use report::{Check, Expected, INJECTED_STARTED, Origin, Outcome, Report, Started, Verdict};

use crate::clients::Client;
use crate::clients::dispatch::PlanInputs;
use crate::clients::plan::{EnvVar, LaunchPlan};
use crate::clients::root::{Credentials, INHERITED_ENV};
use crate::launch::Options;
use crate::launch::sandbox::Confinement;
use crate::{LaunchContext, Policy, ResultDelivery, Snapshot};

/// Which launch `verify` carries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Direct result delivery, the reviewer's own snapshot: the result channel and
    /// `kcap-review`.
    Direct,
    /// A brokered result (a capability URL instead of the server URL on the result channel)
    /// and a borrowed snapshot: the result channel, `kcap-review` and `kcap-review-context`.
    BrokeredBorrowed,
}

impl Scenario {
    /// Every scenario, in the order `verify` runs them.
    pub const ALL: [Scenario; 2] = [Scenario::Direct, Scenario::BrokeredBorrowed];

    /// `direct`, `brokered-borrowed`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Direct => "direct",
            Scenario::BrokeredBorrowed => "brokered-borrowed",
        }
    }
}

/// One `verify` run: the client, its binary, and the bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The client.
    pub client: Client,
    /// Its binary.
    pub client_bin: PathBuf,
    /// The program the recorder runs: this crate's `kcap-mcp-registry` binary (it records
    /// when started by the name [`RECORDER_NAME`]).
    pub recorder_program: PathBuf,
    /// The launch carried out. Default [`Scenario::Direct`].
    pub scenario: Scenario,
    /// Copilot CLI's package cache ([`LaunchContext::cache_dir`]); default a directory in
    /// the throwaway root (the first run unpacks some 235 MB there).
    pub cache_dir: Option<PathBuf>,
    /// How long the client may take from its start until every injected server listed its
    /// tools (and, before that, for each ACP handshake step). Default 120 s.
    pub timeout: Duration,
    /// How long the client runs on after that, so that a server it starts late shows.
    /// Default 3 s.
    pub settle: Duration,
    /// Where the throwaway root is made. Default the system's temporary directory.
    pub temp_dir: PathBuf,
    /// Keep the throwaway root afterwards (to look at what the client and the recorders
    /// wrote). Default off.
    pub keep_root: bool,
    /// The sandbox the client runs in ([`Options::confinement`]). Default
    /// [`Confinement::BestEffort`], as a launch's; unless [`Confinement::Off`], the report
    /// judges it (check `sandbox`: every attack a recorder tries from inside is denied).
    pub confinement: Confinement,
}

impl Request {
    /// A request for `client` at `client_bin`, the recorder running `recorder_program`, every
    /// other field at its default.
    pub fn new(client: Client, client_bin: PathBuf, recorder_program: PathBuf) -> Request {
        Request {
            client,
            client_bin,
            recorder_program,
            scenario: Scenario::Direct,
            cache_dir: None,
            timeout: Duration::from_secs(120),
            settle: Duration::from_secs(3),
            temp_dir: std::env::temp_dir(),
            keep_root: false,
            confinement: Confinement::BestEffort,
        }
    }

    /// This request with the client in `confinement`.
    pub fn with_confinement(mut self, confinement: Confinement) -> Request {
        self.confinement = confinement;
        self
    }

    /// This request for `scenario`.
    pub fn with_scenario(mut self, scenario: Scenario) -> Request {
        self.scenario = scenario;
        self
    }

    /// This request with Copilot CLI's package cache `dir`.
    pub fn with_cache_dir(mut self, dir: Option<PathBuf>) -> Request {
        self.cache_dir = dir;
        self
    }

    /// This request with `timeout` and `settle`.
    pub fn with_bounds(mut self, timeout: Duration, settle: Duration) -> Request {
        self.timeout = timeout;
        self.settle = settle;
        self
    }

    /// This request keeping the throwaway root (`keep`).
    pub fn with_keep_root(mut self, keep: bool) -> Request {
        self.keep_root = keep;
        self
    }
}

/// The clients `verify` can run: those installable here, whose isolation was measured
/// (their rooms declare a [`VerifySpec`]).
pub fn clients() -> impl Iterator<Item = Client> {
    Client::ALL
        .into_iter()
        .filter(|c| c.spec().verify.is_some())
}

/// The server URL the launches carry (never contacted: the recorders ignore it).
const SERVER_URL: &str = "http://127.0.0.1:9/kcap";
/// A leaked value in the daemon's environment.
const LEAKED: &str = "http://127.0.0.1:9/kcap-verify-leaked";
/// The proxy every other request of the client goes to.
const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// How long `verify` waits for more once a server the launch did not ask for started.
const FAIL_GRACE: Duration = Duration::from_secs(10);

/// A throwaway root, removed when dropped unless kept.
#[derive(Debug)]
struct Root {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Root {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A prepared run: the throwaway root with its hostile configuration, and the rendered plan.
/// [`Bench::run`] carries it out; dropping it removes the root.
#[derive(Debug)]
pub struct Bench {
    root: Root,
    request: Request,
    plan: LaunchPlan,
    expected: Vec<Expected>,
    sources: Vec<Source>,
    parent_env: BTreeMap<String, String>,
    worktree: PathBuf,
    attacks: Vec<Attack>,
}

/// Prepares and carries out `request`, and returns the report.
///
/// # Errors
/// [`VerifyError`] for what kept the client from being started (the report covers
/// everything after that).
pub fn verify(request: &Request) -> Result<Report, VerifyError> {
    prepare(request)?.run()
}

/// Makes the throwaway root, writes the hostile configuration and renders the plan.
///
/// # Errors
/// [`VerifyError::Unsupported`], [`VerifyError::Program`], [`VerifyError::Setup`],
/// [`VerifyError::Plan`].
pub fn prepare(request: &Request) -> Result<Bench, VerifyError> {
    let Some(spec) = request.client.spec().verify else {
        return Err(VerifyError::Unsupported {
            client: request.client,
        });
    };
    probe::check_executable(&request.client_bin)?;
    probe::check_executable(&request.recorder_program)?;
    let root = make_root(request)?;
    let path = |rel: &str| root.dir.join(rel);
    for rel in [
        "home",
        "xdg-config",
        "xdg-data",
        "xdg-cache",
        "xdg-state",
        "parent/worktree",
        "records",
        "extra",
    ] {
        std::fs::create_dir_all(path(rel)).map_err(VerifyError::setup(path(rel)))?;
    }
    let program = std::fs::canonicalize(&request.recorder_program)
        .map_err(VerifyError::setup(request.recorder_program.clone()))?;
    let recorder = recorder::install(&path("records"), &program)
        .map_err(VerifyError::setup(path("records")))?;
    let hostile = hostile::write(request.client, &root.dir, &recorder)
        .ok_or(VerifyError::Unsupported {
            client: request.client,
        })?
        .map_err(VerifyError::setup(root.dir.clone()))?;
    let worktree = path("parent/worktree");
    probe::git_init(&worktree);
    let cache = match &request.cache_dir {
        Some(dir) => Some(dir.clone()),
        None => spec.cache.then(|| path("cache")),
    };
    let ctx = context(
        request,
        spec,
        &root.dir,
        &recorder,
        cache,
        hostile.credentials,
    );
    let mut plan = request
        .client
        .plan(&ctx, &PlanInputs::new(Policy::Lenient))
        .map_err(VerifyError::Plan)?
        .plan;
    for (name, value) in [
        ("HTTP_PROXY", DEAD_PROXY),
        ("HTTPS_PROXY", DEAD_PROXY),
        ("NO_PROXY", "127.0.0.1,localhost"),
    ] {
        if plan.env_value(name).is_none() && !plan.env_inherit.iter().any(|n| n == name) {
            plan.env.push(EnvVar::new(name, value));
        }
    }
    let expected = expected(&ctx)?;
    let parent_env = parent_env(&root.dir, hostile.parent_env);
    let attacks = attacks(&root.dir)?;
    Ok(Bench {
        root,
        request: request.clone(),
        plan,
        expected,
        sources: hostile.sources,
        parent_env,
        worktree,
        attacks,
    })
}

/// What each recorder start tries from inside the reviewer ([`ATTACKS_FILE`], written here):
/// read the daemon's `HOME` (a secret `verify` puts there), another launch directory's
/// credentials and the daemon's `/proc/<pid>/environ`; signal the daemon; write outside the
/// launch directory. Without a sandbox each gets through.
fn attacks(root: &Path) -> Result<Vec<Attack>, VerifyError> {
    let path = |rel: &str| root.join(rel);
    for (rel, text) in [
        ("home/.kcap-daemon-secret", "daemon-secret\n"),
        (
            "other-launch/.credentials.json",
            "{\"other-reviewer\": \"secret\"}\n",
        ),
    ] {
        let file = path(rel);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(VerifyError::setup(dir.to_owned()))?;
        }
        std::fs::write(&file, text).map_err(VerifyError::setup(file.clone()))?;
    }
    let daemon = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let attack = |name: &str, kind| Attack {
        name: name.to_owned(),
        kind,
    };
    let attacks = vec![
        attack(
            "daemon-home",
            AttackKind::Read {
                path: path("home/.kcap-daemon-secret"),
            },
        ),
        attack(
            "other-launch-dir",
            AttackKind::Read {
                path: path("other-launch/.credentials.json"),
            },
        ),
        attack(
            "daemon-environ",
            AttackKind::Read {
                path: PathBuf::from(format!("/proc/{daemon}/environ")),
            },
        ),
        attack("signal-daemon", AttackKind::Signal { pid: daemon }),
        attack("write-outside", AttackKind::Write { dir: path("extra") }),
    ];
    let file = path("records").join(ATTACKS_FILE);
    let text = serde_json::to_vec(&attacks).map_err(|e| VerifyError::Setup {
        path: file.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&file, text).map_err(VerifyError::setup(file.clone()))?;
    Ok(attacks)
}

/// The executor's options for `request`: its bounds, and its sandbox with what the run needs
/// beyond the plan's boundary (the program the recorder script runs, the records).
fn options(request: &Request, root: &Path) -> Options {
    let mut options = Options::default()
        .with_handshake_timeout(request.timeout)
        .with_dialog_quiet(Duration::from_secs(5))
        .with_die_with_parent(true)
        .with_confinement(request.confinement);
    if request.confinement != Confinement::Off {
        let program = std::fs::canonicalize(&request.recorder_program)
            .unwrap_or_else(|_| request.recorder_program.clone());
        options = options
            .with_sandbox_read_exec(program)
            .with_sandbox_read_write(root.join("records"));
        // The run's own cache (no shared one given) is filled by this run's client: the
        // plan's sandbox lets a reviewer only read and run the daemon's shared cache.
        if request.cache_dir.is_none() {
            options = options.with_sandbox_read_write(root.join("cache"));
        }
    }
    options
}

/// The throwaway root: a new directory (mode 0700) under the request's temporary directory,
/// canonical (the worktree's path is compared with what the servers report).
fn make_root(request: &Request) -> Result<Root, VerifyError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| VerifyError::Setup {
        path: request.temp_dir.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let dir = request
        .temp_dir
        .join(format!("kcap-verify-{}-{hex}", request.client.name()));
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&dir)
        .map_err(VerifyError::setup(dir.clone()))?;
    let mut root = Root {
        dir,
        keep: request.keep_root,
    };
    root.dir = std::fs::canonicalize(&root.dir).map_err(VerifyError::setup(root.dir.clone()))?;
    Ok(root)
}

/// The launch: the recorder as the kcap binary, `kcap-review` (and `kcap-flows`, which the
/// recursion guard strips) allowlisted, the scenario's delivery and snapshot.
fn context(
    request: &Request,
    spec: &VerifySpec,
    root: &Path,
    recorder: &Path,
    cache: Option<PathBuf>,
    credentials: Credentials,
) -> LaunchContext {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut ctx = LaunchContext {
        server_url: Some(SERVER_URL.into()),
        kcap_bin: Some(s(recorder)),
        agent_id: "kcap-verify".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into()), Some("kcap-flows".into())]),
        worktree: Some(s(&root.join("parent/worktree"))),
        launch_dir: Some(s(&root.join("launch"))),
        cache_dir: cache.as_deref().map(s),
        credentials,
        ..LaunchContext::default()
    };
    if spec.prompt {
        ctx.prompt = Some("Reply with the word ok.".into());
    }
    if request.scenario == Scenario::BrokeredBorrowed {
        ctx.result_delivery = ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:9/cap/kcap-verify".into(),
        };
        ctx.snapshot = Snapshot::Borrowed {
            review_context_url: Some("http://127.0.0.1:9/review-context".into()),
        };
    }
    ctx
}

/// The servers `ctx` injects, as their recorders should see them: computed from the launch
/// and the registry, not read back from the plan.
fn expected(ctx: &LaunchContext) -> Result<Vec<Expected>, VerifyError> {
    let resolution = ctx
        .resolve(Policy::Lenient)
        .map_err(|e| VerifyError::Plan(e.into()))?;
    let bin = ctx.kcap_bin.clone().unwrap_or_default();
    Ok(ctx
        .servers(&resolution)
        .map(|(server, env)| Expected {
            id: server.id.to_owned(),
            argv: std::iter::once(bin.clone())
                .chain(server.args.iter().map(|a| (*a).to_owned()))
                .collect(),
            env: env
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .collect(),
        })
        .collect())
}

/// The daemon's environment the client is started from: this process's values of the
/// inherited names (`PATH`: the clients' launchers need `node`), the throwaway `HOME` and
/// XDG directories, leaked `KCAP_*` values, and the client's hostile variables.
fn parent_env(root: &Path, hostile: Vec<(String, String)>) -> BTreeMap<String, String> {
    let s = |rel: &str| root.join(rel).to_string_lossy().into_owned();
    let mut env: BTreeMap<String, String> = INHERITED_ENV
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), std::env::var(name).ok()?)))
        .collect();
    env.extend([
        ("HOME".to_owned(), s("home")),
        ("XDG_CONFIG_HOME".to_owned(), s("xdg-config")),
        ("XDG_DATA_HOME".to_owned(), s("xdg-data")),
        ("XDG_CACHE_HOME".to_owned(), s("xdg-cache")),
        ("XDG_STATE_HOME".to_owned(), s("xdg-state")),
        ("KCAP_URL".to_owned(), LEAKED.to_owned()),
        (
            "KCAP_FLOW_AGENT_ID".to_owned(),
            "kcap-verify-leaked-agent".to_owned(),
        ),
        ("KCAP_FLOW_CAPABILITY_URL".to_owned(), LEAKED.to_owned()),
    ]);
    env.extend(hostile);
    env
}

impl Bench {
    /// The plan [`Bench::run`] carries out.
    pub fn plan(&self) -> &LaunchPlan {
        &self.plan
    }

    /// The plan, to change before [`Bench::run`]: a negative control undoes part of the
    /// isolation and expects the checks to catch it.
    pub fn plan_mut(&mut self) -> &mut LaunchPlan {
        &mut self.plan
    }

    /// The daemon's environment the client is started from.
    pub fn parent_env(&self) -> &BTreeMap<String, String> {
        &self.parent_env
    }

    /// The throwaway worktree.
    pub fn worktree(&self) -> &Path {
        &self.worktree
    }

    /// The throwaway root.
    pub fn root(&self) -> &Path {
        &self.root.dir
    }

    /// The servers the launch injects.
    pub fn expected(&self) -> &[Expected] {
        &self.expected
    }

    /// The hostile servers and hooks.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
}
