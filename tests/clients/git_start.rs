//! Issue 34, "Git at start", on the real clients: Codex CLI (0.169.0 `KCAP_CODEX_BIN`,
//! 0.171.0 `KCAP_CODEX_NEXT_BIN`) and Claude Code (2.1.197 `KCAP_CLAUDE_BIN`, 2.1.332
//! `KCAP_CLAUDE_NEXT_BIN`) run git in the worktree when they start, and git runs what the
//! worktree's own configuration names (`kcap_mcp_registry::clients::git`). Each hostile key
//! runs `sh -c 'echo <key> >> <marks>/log'`, in a directory the reviewer's sandbox lets it
//! write, so a line there is a command the configuration made run.
//!
//! Every launch is the plan of `Client::plan` (the result channel and `kcap-review`, a
//! stand-in kcap binary listing their tools) carried out by the executor as a daemon would,
//! until the stand-in model API (127.0.0.1) got the first turn and [`SETTLE`] after; offline:
//! dummy keys, a dead proxy for the rest. Three classes:
//!
//! 1. A filter (`filter.<driver>.clean` in a file `.git/config` includes): `Client::plan`
//!    refuses the launch naming the key and the file. The bite: the same configuration
//!    written after the check, before the start: the filter ran (0.169.0, 0.171.0, 2.1.197;
//!    2.1.332 overrides each driver it finds and ran none).
//! 2. `core.fsmonitor` (from an `includeIf`) and a submodule's own `core.fsmonitor` and
//!    clean filter, in the reviewer's sandbox: the plan's overrides (`git::OVERRIDES` in its
//!    environment) let none run. The bite, without them: on 2.1.197 all three ran (`git
//!    status --short`); Codex and 2.1.332 ran none (their own `-c core.fsmonitor`,
//!    `--ignore-submodules=dirty`).
//! 3. `gpg.program` with `log.showSignature` and a signed commit, with the sandbox off (in
//!    it the program, a file of the repository's world, is not executable): none ran; the
//!    bite: 2.1.197's `git log --oneline -n 5` ran it, 2.1.332 (its own
//!    `-c log.showSignature=false`) did not.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::model_api::{Request, anthropic_turn, response};
use crate::common::peers::{inherited_path, peer};
use crate::first_turn::{BOUND, Bench, codex_answer};
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::git::GitRefusal;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials};
use kcap_mcp_registry::clients::{Client, LaunchError, RenderError};
use kcap_mcp_registry::launch::sandbox::Confinement;
use kcap_mcp_registry::launch::{self, Reviewer};
use kcap_mcp_registry::{LaunchContext, Policy};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        codex_a_repository_filter_is_refused,
        codex_next_a_repository_filter_is_refused,
        claude_a_repository_filter_is_refused,
        claude_next_a_repository_filter_is_refused,
        codex_git_config_commands_are_neutralized,
        codex_next_git_config_commands_are_neutralized,
        claude_git_config_commands_are_neutralized,
        claude_next_git_config_commands_are_neutralized,
        claude_signature_program_is_neutralized_without_the_sandbox,
        claude_next_signature_program_is_neutralized_without_the_sandbox,
    ]
}

/// How long a launch keeps running after its first turn, so that a late git call shows.
const SETTLE: Duration = Duration::from_secs(5);

fn codex_a_repository_filter_is_refused() {
    filter(Client::Codex, "KCAP_CODEX_BIN", true);
}

fn codex_next_a_repository_filter_is_refused() {
    filter(Client::Codex, "KCAP_CODEX_NEXT_BIN", true);
}

fn claude_a_repository_filter_is_refused() {
    filter(Client::Claude, "KCAP_CLAUDE_BIN", true);
}

/// 2.1.332 neutralizes the filters it finds itself: the bite shows none.
fn claude_next_a_repository_filter_is_refused() {
    filter(Client::Claude, "KCAP_CLAUDE_NEXT_BIN", false);
}

/// Class 1 (module docs); `runs`: whether the filter runs without the refusal.
fn filter(client: Client, var: &'static str, runs: bool) {
    let Some(bin) = peer(var) else { return };
    let hostile = |world: &World| {
        let evil = world.wt().join(".git/evil.inc");
        let clean = world.mark("filter.clean", true);
        std::fs::write(&evil, format!("[filter \"evil\"]\n\tclean = {clean}\n")).unwrap();
        git(&world.wt(), &["config", "include.path", "evil.inc"]);
        evil
    };
    let world = World::new(client);
    let evil = hostile(&world);
    let refusal = match client.plan(&world.context(), &PlanInputs::new(Policy::Lenient)) {
        Err(LaunchError::Render(RenderError::GitConfig(refusal))) => *refusal,
        Err(e) => panic!("{var}: refused otherwise: {e}"),
        Ok(_) => panic!("{var}: not refused"),
    };
    let GitRefusal::Command { key, file, .. } = &refusal else {
        panic!("{var}: {refusal}")
    };
    assert_eq!(
        (key.as_str(), file.as_path()),
        ("filter.evil.clean", &*evil)
    );
    let message = refusal.to_string();
    assert!(
        message.contains("--unset-all filter.evil.clean"),
        "{message}"
    );

    // The bite: the check passed, then the configuration came.
    let world = World::new(client);
    let plan = world.plan();
    hostile(&world);
    let ran = world.run(&plan, &bin, Confinement::BestEffort);
    let expected: &[&str] = if runs { &["filter.clean"] } else { &[] };
    assert_eq!(
        ran, expected,
        "{var}: what the filter ran without the refusal"
    );
}

fn codex_git_config_commands_are_neutralized() {
    neutralized(Client::Codex, "KCAP_CODEX_BIN", false);
}

fn codex_next_git_config_commands_are_neutralized() {
    neutralized(Client::Codex, "KCAP_CODEX_NEXT_BIN", false);
}

fn claude_git_config_commands_are_neutralized() {
    neutralized(Client::Claude, "KCAP_CLAUDE_BIN", true);
}

fn claude_next_git_config_commands_are_neutralized() {
    neutralized(Client::Claude, "KCAP_CLAUDE_NEXT_BIN", false);
}

/// Class 2 (module docs), in the reviewer's sandbox; `runs`: whether the commands run
/// without the plan's overrides.
fn neutralized(client: Client, var: &'static str, runs: bool) {
    let Some(bin) = peer(var) else { return };
    let world = World::new(client);
    world.submodule();
    let fsmonitor = world.mark("core.fsmonitor", false);
    let config = format!("[core]\n\tfsmonitor = {fsmonitor}\n");
    std::fs::write(world.wt().join(".git/evil.inc"), config).unwrap();
    git(
        &world.wt(),
        &["config", "includeIf.gitdir:/.path", "evil.inc"],
    );
    let plan = world.plan();
    let ran = world.run(&plan, &bin, Confinement::BestEffort);
    assert_eq!(
        ran,
        Vec::<String>::new(),
        "{var}: with the plan's overrides"
    );
    assert_eq!(plan.env_value("GIT_CONFIG_COUNT"), Some("4"), "{var}");

    // The bite: the plan without them.
    let ran = world.run(&without_overrides(plan), &bin, Confinement::BestEffort);
    let expected: &[&str] = match runs {
        true => &["core.fsmonitor", "sub.core.fsmonitor", "sub.filter.clean"],
        false => &[],
    };
    assert_eq!(ran, expected, "{var}: without the plan's overrides");
}

fn claude_signature_program_is_neutralized_without_the_sandbox() {
    signature(Client::Claude, "KCAP_CLAUDE_BIN", true);
}

fn claude_next_signature_program_is_neutralized_without_the_sandbox() {
    signature(Client::Claude, "KCAP_CLAUDE_NEXT_BIN", false);
}

/// Class 3 (module docs), the sandbox off; `runs`: whether `gpg.program` runs without the
/// plan's overrides.
fn signature(client: Client, var: &'static str, runs: bool) {
    let Some(bin) = peer(var) else { return };
    let world = World::new(client);
    let program = crate::common::stand_in::sh_script(
        world.bench.scene.root(),
        "gpg",
        &format!("echo gpg.program >> {}/log", world.marks().display()),
    );
    world.signed_commit();
    git(&world.wt(), &["config", "log.showSignature", "true"]);
    git(
        &world.wt(),
        &["config", "gpg.program", &program.display().to_string()],
    );
    let plan = world.plan();
    let ran = world.run(&plan, &bin, Confinement::Off);
    assert_eq!(
        ran,
        Vec::<String>::new(),
        "{var}: with the plan's overrides"
    );

    let ran = world.run(&without_overrides(plan), &bin, Confinement::Off);
    let expected: &[&str] = if runs { &["gpg.program"] } else { &[] };
    assert_eq!(ran, expected, "{var}: without the plan's overrides");
}

/// `plan` without the variables of `git::override_env`.
fn without_overrides(mut plan: LaunchPlan) -> LaunchPlan {
    let before = plan.env.len();
    plan.env.retain(|v| {
        let n = v.name.as_str();
        !(n == "GIT_CONFIG_COUNT"
            || n.starts_with("GIT_CONFIG_KEY_")
            || n.starts_with("GIT_CONFIG_VALUE_"))
    });
    assert_eq!(before - plan.env.len(), 9, "{:?}", plan.env);
    plan
}

/// Runs `git args` in `dir`, with no configuration but the repository's, and a name.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c"])
        .arg("protocol.file.allow=always")
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `text` to `path` as a new file (a new inode: git's `status` then reads it again,
/// through its filter, whatever the clock says).
fn rewrite(path: &Path, text: &str) {
    let tmp = path.with_extension("kcap-tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One launch's world: a [`Bench`] (worktree, launch directory, stand-in kcap and model API)
/// whose worktree is a repository with a change, and the marks directory.
struct World {
    client: Client,
    bench: Bench,
}

impl World {
    /// The repository: `README.md`, `src.txt` and `.gitattributes` (`* filter=evil`)
    /// committed on `main`, then `src.txt` changed and `README.md` rewritten as it was.
    fn new(client: Client) -> World {
        let answer = match client {
            Client::Codex => codex_answer as fn(&Request) -> Vec<u8>,
            _ => claude_answer,
        };
        let server = crate::common::records::listing_server_source(Duration::ZERO);
        let world = World {
            client,
            bench: Bench::serving(answer, server),
        };
        std::fs::create_dir_all(world.marks()).unwrap();
        let wt = world.wt();
        git(&wt, &["init", "-q", "-b", "main"]);
        std::fs::write(wt.join("src.txt"), "line\n").unwrap();
        std::fs::write(wt.join(".gitattributes"), "* filter=evil\n").unwrap();
        git(&wt, &["add", "-A"]);
        git(&wt, &["commit", "-q", "-m", "init"]);
        std::fs::write(wt.join("src.txt"), "line\nchanged\n").unwrap();
        rewrite(&wt.join("README.md"), "the change under review\n");
        world
    }

    fn wt(&self) -> PathBuf {
        self.bench.scene.worktree()
    }

    /// Where the hostile commands write; the reviewer's sandbox lets it write there.
    fn marks(&self) -> PathBuf {
        self.bench.scene.root().join("marks")
    }

    /// The command (a value for git's configuration) that writes `name` to the marks;
    /// `filter`: and passes its input through, as a filter does.
    fn mark(&self, name: &str, filter: bool) -> String {
        let pass = if filter { "; cat" } else { "" };
        format!(
            "\"sh -c 'echo {name} >> {}/log{pass}'\"",
            self.marks().display()
        )
    }

    /// The marks so far, sorted and once each; the log is emptied.
    fn take_marks(&self) -> Vec<String> {
        let log = self.marks().join("log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        let mut marks: Vec<String> = text.lines().map(str::to_owned).collect();
        marks.sort();
        marks.dedup();
        marks
    }

    /// A submodule `sub` whose own configuration sets `core.fsmonitor` and a clean filter,
    /// with a file it filters rewritten.
    fn submodule(&self) {
        let src = self.bench.scene.root().join("subsrc");
        std::fs::create_dir_all(&src).unwrap();
        git(&src, &["init", "-q", "-b", "main"]);
        std::fs::write(src.join("f"), "x\n").unwrap();
        std::fs::write(src.join(".gitattributes"), "* filter=evil\n").unwrap();
        git(&src, &["add", "-A"]);
        git(&src, &["commit", "-q", "-m", "s"]);
        let wt = self.wt();
        git(
            &wt,
            &["submodule", "add", "-q", &src.display().to_string(), "sub"],
        );
        git(&wt, &["commit", "-q", "-m", "sub"]);
        let config = wt.join(".git/modules/sub/config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[filter \"evil\"]\n\tclean = {}\n[core]\n\tfsmonitor = {}\n",
            self.mark("sub.filter.clean", true),
            self.mark("sub.core.fsmonitor", false)
        ));
        std::fs::write(&config, text).unwrap();
        rewrite(&wt.join("sub/f"), "x\n");
    }

    /// A commit with a signature (an OpenPGP armour git hands to `gpg.program`) on `main`.
    fn signed_commit(&self) {
        let wt = self.wt();
        let rev = |r: &str| {
            let out = Command::new("git")
                .arg("-C")
                .arg(&wt)
                .args(["rev-parse", r])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        let commit = format!(
            "tree {}\nparent {}\nauthor t <t@t> 1700000000 +0000\ncommitter t <t@t> \
             1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n -----END PGP \
             SIGNATURE-----\n\nsigned\n",
            rev("HEAD^{tree}"),
            rev("HEAD")
        );
        let file = self.bench.scene.root().join("commit.txt");
        std::fs::write(&file, commit).unwrap();
        let out = Command::new("git")
            .arg("-C")
            .arg(&wt)
            .args(["hash-object", "-t", "commit", "-w"])
            .arg(&file)
            .output()
            .unwrap();
        let id = String::from_utf8(out.stdout).unwrap();
        git(&wt, &["update-ref", "refs/heads/main", id.trim()]);
    }

    /// The launch of the client: the result channel and `kcap-review`, the stand-in model
    /// API as the client's, a dummy key.
    fn context(&self) -> LaunchContext {
        let (model, credentials) = match self.client {
            Client::Codex => (
                Some("gpt-5"),
                Credentials {
                    env: vec![EnvVar::new(
                        "OPENAI_BASE_URL",
                        format!("{}/v1", self.bench.api.url),
                    )],
                    files: vec![CredentialFile {
                        name: "auth.json".into(),
                        contents: r#"{"OPENAI_API_KEY":"sk-kcap-dummy"}"#.into(),
                    }],
                },
            ),
            _ => (
                None,
                Credentials {
                    env: vec![
                        EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
                        EnvVar::new("ANTHROPIC_BASE_URL", &self.bench.api.url),
                        EnvVar::new("IS_SANDBOX", "1"),
                    ],
                    files: Vec::new(),
                },
            ),
        };
        self.bench.context(model, credentials)
    }

    /// The plan `Client::plan` renders for [`World::context`], offline.
    fn plan(&self) -> LaunchPlan {
        let planned = self
            .client
            .plan(&self.context(), &PlanInputs::new(Policy::Lenient))
            .unwrap_or_else(|e| panic!("{}: {e}", self.client));
        self.bench.offline(planned.plan)
    }

    /// Carries `plan` out with `bin` under `confinement` until the first turn and
    /// [`SETTLE`] more; the marks it left.
    fn run(&self, plan: &LaunchPlan, bin: &Path, confinement: Confinement) -> Vec<String> {
        let client = plan.client;
        let marks = self.marks();
        let options = self.bench.options(&[&marks]).with_confinement(confinement);
        let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
        let requests = self.bench.api.requests().len();
        let before = self.take_marks();
        assert_eq!(
            before,
            Vec::<String>::new(),
            "{client}: ran before the launch"
        );
        let reviewer = launch::launch_with_parent_env(plan, bin, &options, &daemon_env)
            .unwrap_or_else(|e| panic!("{client}: {}", kcap_mcp_registry::text::error_chain(&e)));
        let Reviewer::Terminal(mut session) = reviewer else {
            panic!("{client} runs in a terminal")
        };
        // Until SETTLE after the first model request.
        let mut turned: Option<Instant> = None;
        crate::common::carry::drive_terminal(
            &mut session,
            client,
            (Instant::now(), BOUND),
            "no model request",
            || {
                if turned.is_none() && self.bench.api.requests().len() > requests {
                    turned = Some(Instant::now());
                }
                turned.filter(|t| t.elapsed() >= SETTLE).map(|_| ())
            },
        );
        session.stop().unwrap();
        self.take_marks()
    }
}

/// Claude Code's model API: every turn ends at once.
fn claude_answer(_: &Request) -> Vec<u8> {
    response(
        "200 OK",
        "text/event-stream",
        &anthropic_turn("claude-stand-in", None),
    )
}
