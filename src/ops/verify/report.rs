//! The checks `verify` judges a run by, and its report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::Scenario;
use super::recorder::{Attack, Record};
use crate::clients::Client;
use crate::clients::hostile::{HOSTILE_ARG, Kind, Scope, Source};
use crate::clients::plan::LaunchPlan;
use crate::clients::version::ClientVersion;

/// A server the launch injects, as its recorder should see it start.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Expected {
    /// Its registry id.
    pub id: String,
    /// Its argv: the kcap binary (the recorder), then the registry's `args`.
    pub argv: Vec<String>,
    /// Its `KCAP_*` variables with this launch's values.
    pub env: BTreeMap<String, String>,
}

impl Expected {
    fn matches(&self, record: &Record) -> bool {
        record.argv == self.argv && record.kcap_env() == self.env
    }
}

/// What a started recorder stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Origin {
    /// An injected server, by id (its argv and `KCAP_*` variables are exactly the launch's).
    Injected {
        /// The registry id.
        id: String,
    },
    /// A server or hook of the hostile configuration.
    Hostile(Source),
    /// Anything else: a server started with argv or variables the launch did not give.
    Unknown,
}

/// One recorder start and what it stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Started {
    /// What the recorder saw.
    pub record: Record,
    /// What it stands for.
    pub origin: Origin,
}

/// One check of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Its name (`injected-started`, `no-user-server`, `no-project-server`,
    /// `no-environment-server`, `argv-exact`, `env-exact`, `no-daemon-env`, `server-cwd`,
    /// and `sandbox` when the client ran in one).
    pub name: &'static str,
    /// Whether it holds.
    pub passed: bool,
    /// What was seen, naming every server that broke it.
    pub detail: String,
}

/// How the client run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every injected server listed its tools; the client ran on for the settle time and was
    /// stopped.
    Complete,
    /// Not every injected server listed its tools within the bound.
    TimedOut(Duration),
    /// The client exited (or stopped at a dialog, or broke the protocol) first: why.
    Ended(String),
}

/// The verdict of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every check holds.
    Holds,
    /// A check failed: what the client started proves it (exit 1).
    Fails,
    /// The run could not show either (exit 2): why.
    Incomplete(String),
}

/// The report of one `verify` run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The client.
    pub client: Client,
    /// The client binary.
    pub client_bin: PathBuf,
    /// The first line of `<client_bin> --version`, or why it could not be read.
    pub client_version: Result<String, String>,
    /// The launch verified.
    pub scenario: Scenario,
    /// The plan carried out (with the proxy variables `verify` adds to stay offline).
    pub plan: LaunchPlan,
    /// The servers the launch injects.
    pub expected: Vec<Expected>,
    /// Every recorder start, in argv order.
    pub started: Vec<Started>,
    /// The checks, in a fixed order.
    pub checks: Vec<Check>,
    /// How the client run ended.
    pub outcome: Outcome,
    /// The tail of the client's standard error (ACP clients) or screen (terminal clients).
    pub client_output: String,
    /// The worktree the client ran in.
    pub worktree: PathBuf,
    /// From the client's start to its stop.
    pub elapsed: Duration,
}

impl Report {
    /// The verdict: [`Verdict::Fails`] when a check other than `injected-started` failed
    /// (a server that must not start did; `sandbox` only once a server started and could
    /// try its attacks), or when the run completed and a check failed;
    /// [`Verdict::Incomplete`] when the run did not complete and nothing else failed;
    /// [`Verdict::Holds`] otherwise.
    pub fn verdict(&self) -> Verdict {
        let proven = self.checks.iter().any(|c| {
            !c.passed
                && c.name != INJECTED_STARTED
                && !(c.name == SANDBOX && self.started.is_empty())
        });
        match &self.outcome {
            _ if proven => Verdict::Fails,
            Outcome::Complete if self.checks.iter().all(|c| c.passed) => Verdict::Holds,
            Outcome::Complete => Verdict::Fails,
            Outcome::TimedOut(bound) => Verdict::Incomplete(format!(
                "wait for the injected servers: not every one listed its tools within {} s",
                bound.as_secs()
            )),
            Outcome::Ended(why) => Verdict::Incomplete(why.clone()),
        }
    }

    /// Whether the client's version is one this crate's tests prove
    /// ([`Client::proven_on`]): `Some(false)` when the version was read and is another.
    pub fn proven_version(&self) -> Option<bool> {
        let version = self.client_version.as_ref().ok()?;
        Some(self.client.is_proven(&ClientVersion::new(version.as_str())))
    }

    /// The report as JSON (`verify --format json` prints an array of these).
    pub fn to_json(&self) -> Value {
        let (verdict, reason) = match self.verdict() {
            Verdict::Holds => ("holds", None),
            Verdict::Fails => ("fails", None),
            Verdict::Incomplete(why) => ("incomplete", Some(why)),
        };
        let servers: Vec<Value> = self
            .started
            .iter()
            .map(|s| {
                json!({"argv": s.record.argv, "kcap_env": s.record.kcap_env(),
                       "cwd": s.record.cwd, "listed_tools": s.record.listed_tools,
                       "reached": s.record.reached, "origin": s.origin})
            })
            .collect();
        json!({
            "client": self.client.name(),
            "client_bin": self.client_bin.to_string_lossy(),
            "client_version": self.client_version.as_ref().ok(),
            "client_version_error": self.client_version.as_ref().err(),
            "proven_on": self.client.proven_on(),
            "proven_version": self.proven_version(),
            "scenario": self.scenario.name(),
            "verdict": verdict,
            "incomplete": reason,
            "checks": self.checks,
            "expected": self.expected,
            "started": servers,
            "elapsed_ms": u64::try_from(self.elapsed.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// The report for a person: a heading, one line per check, the verdict.
    pub fn human(&self) -> String {
        let version = match &self.client_version {
            Ok(v) => v.clone(),
            Err(e) => format!("version unknown: {e}"),
        };
        let mut out = format!(
            "verify {} ({}; {}), {}: {} recorder start(s) in {:.1} s\n",
            self.client,
            version,
            self.client_bin.display(),
            self.scenario.name(),
            self.started.len(),
            self.elapsed.as_secs_f64()
        );
        let proven = self.client.proven_on().join(", ");
        match self.proven_version() {
            Some(true) => out.push_str(&format!(
                "  (a version this crate's tests prove: {proven})\n"
            )),
            Some(false) => out.push_str(&format!(
                "  (not a version this crate's tests prove, {proven}: this run is the proof)\n"
            )),
            None => {}
        }
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for check in &self.checks {
            let mark = if check.passed { "ok  " } else { "FAIL" };
            out.push_str(&format!(
                "  {mark} {:width$}  {}\n",
                check.name, check.detail
            ));
        }
        out.push_str(&match self.verdict() {
            Verdict::Holds => "  verdict: holds\n".to_owned(),
            Verdict::Fails => "  verdict: FAILS\n".to_owned(),
            Verdict::Incomplete(why) => format!("  verdict: could not run: {why}\n"),
        });
        if !matches!(self.verdict(), Verdict::Holds) && !self.client_output.trim().is_empty() {
            out.push_str("  the client's last output:\n");
            let lines: Vec<&str> = self.client_output.trim_end().lines().collect();
            for line in &lines[lines.len().saturating_sub(OUTPUT_LINES)..] {
                out.push_str(&format!("    | {line}\n"));
            }
        }
        out
    }
}

/// How many lines of the client's output a failed run's human report shows.
const OUTPUT_LINES: usize = 20;

/// The check that the injected servers started.
pub const INJECTED_STARTED: &str = "injected-started";

/// The check that judges the sandbox from inside the reviewer: every attack a recorder tried
/// was denied.
pub const SANDBOX: &str = "sandbox";

/// What the checks judge.
pub(super) struct Seen<'a> {
    pub expected: &'a [Expected],
    pub records: Vec<Record>,
    pub sources: &'a [Source],
    /// The daemon's environment the client was started from.
    pub parent_env: &'a BTreeMap<String, String>,
    pub plan: &'a LaunchPlan,
    /// The worktree, when the client is known to start servers there.
    pub cwd: Option<&'a str>,
    pub outcome: &'a Outcome,
    /// The attacks each recorder tried, when the client ran in a sandbox.
    pub sandbox: Option<&'a [Attack]>,
}

/// Classifies every record and runs the checks.
pub(super) fn judge(seen: Seen<'_>) -> (Vec<Started>, Vec<Check>) {
    let started: Vec<Started> = seen
        .records
        .into_iter()
        .map(|record| {
            let origin = origin(&record, seen.expected, seen.sources);
            Started { record, origin }
        })
        .collect();
    let mut checks = vec![injected_started(seen.expected, &started, seen.outcome)];
    for scope in [Scope::User, Scope::Project, Scope::Environment] {
        if seen.sources.iter().any(|s| s.scope == scope) {
            checks.push(none_of(scope, seen.sources, &started));
        }
    }
    checks.push(argv_exact(seen.expected, &started));
    checks.push(env_exact(seen.expected, &started));
    checks.push(no_daemon_env(seen.parent_env, seen.plan, &started));
    if let Some(cwd) = seen.cwd {
        checks.push(server_cwd(cwd, &started));
    }
    if let Some(attacks) = seen.sandbox {
        checks.push(sandbox(attacks, &started));
    }
    (started, checks)
}

/// Check `sandbox`: every recorder tried every attack, and none got through.
fn sandbox(attacks: &[Attack], started: &[Started]) -> Check {
    let mut reached = BTreeSet::new();
    let mut untried = BTreeSet::new();
    for s in started {
        for a in attacks {
            match s.record.reached.get(&a.name) {
                Some(true) => reached.insert(a.name.as_str()),
                Some(false) => false,
                None => untried.insert(a.name.as_str()),
            };
        }
    }
    let names = |set: &BTreeSet<&str>| set.iter().copied().collect::<Vec<_>>().join(", ");
    let all = attacks.iter().map(|a| a.name.as_str()).collect::<Vec<_>>();
    Check {
        name: SANDBOX,
        passed: !started.is_empty() && reached.is_empty() && untried.is_empty(),
        detail: if started.is_empty() {
            "no server started, so no attack was tried from inside".into()
        } else if !reached.is_empty() {
            format!(
                "from inside the reviewer a server reached: {}",
                names(&reached)
            )
        } else if !untried.is_empty() {
            format!("a server did not try: {}", names(&untried))
        } else {
            format!(
                "every server tried {} from inside the reviewer, and each was denied",
                all.join(", ")
            )
        },
    }
}

fn origin(record: &Record, expected: &[Expected], sources: &[Source]) -> Origin {
    if let Some(e) = expected.iter().find(|e| e.matches(record)) {
        return Origin::Injected { id: e.id.clone() };
    }
    if let [_, first, tag, name, ..] = record.argv.as_slice()
        && first == HOSTILE_ARG
        && let Some(source) = sources.iter().find(|s| &s.tag == tag && &s.name == name)
    {
        return Origin::Hostile(source.clone());
    }
    Origin::Unknown
}

/// `argv` as one line, the command by its file name.
fn argv_line(argv: &[String]) -> String {
    let mut parts: Vec<&str> = argv.iter().map(String::as_str).collect();
    if let Some(first) = parts.first_mut() {
        *first = first.rsplit('/').next().unwrap_or(first);
    }
    parts.join(" ")
}

fn check(name: &'static str, passed: bool, detail: String) -> Check {
    Check {
        name,
        passed,
        detail,
    }
}

fn injected_started(expected: &[Expected], started: &[Started], outcome: &Outcome) -> Check {
    let missing: Vec<&Expected> = expected
        .iter()
        .filter(|e| {
            !started
                .iter()
                .any(|s| s.record.listed_tools && e.matches(&s.record))
        })
        .collect();
    let ids = |list: &mut dyn Iterator<Item = &Expected>| {
        list.map(|e| format!("{} ({})", e.id, argv_line(&e.argv)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if missing.is_empty() {
        return check(
            INJECTED_STARTED,
            true,
            format!(
                "{} of {} listed their tools: {}",
                expected.len(),
                expected.len(),
                ids(&mut expected.iter())
            ),
        );
    }
    let when = match outcome {
        Outcome::TimedOut(bound) => format!(" within {} s", bound.as_secs()),
        _ => String::new(),
    };
    check(
        INJECTED_STARTED,
        false,
        format!(
            "{} of {} did not start with exactly their argv and KCAP_* variables and list \
             their tools{when}: {}",
            missing.len(),
            expected.len(),
            ids(&mut missing.into_iter())
        ),
    )
}

fn none_of(scope: Scope, sources: &[Source], started: &[Started]) -> Check {
    let name = match scope {
        Scope::User => "no-user-server",
        Scope::Project => "no-project-server",
        Scope::Environment => "no-environment-server",
    };
    let mut ran: BTreeSet<String> = BTreeSet::new();
    for s in started {
        if let Origin::Hostile(source) = &s.origin
            && source.scope == scope
        {
            let kind = match source.kind {
                Kind::Server => "server",
                Kind::Hook => "hook",
            };
            ran.insert(format!("{kind} `{}` of {}", source.name, source.file));
        }
    }
    let declared: Vec<&Source> = sources.iter().filter(|s| s.scope == scope).collect();
    let files: BTreeSet<&str> = declared.iter().map(|s| s.file.as_str()).collect();
    if ran.is_empty() {
        return check(
            name,
            true,
            format!(
                "none of the {} servers and hooks the {} configuration declares ran ({})",
                declared.len(),
                scope.name(),
                files.into_iter().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    check(
        name,
        false,
        format!(
            "the {} configuration's {} ran: {}",
            scope.name(),
            if ran.len() == 1 { "entry" } else { "entries" },
            ran.into_iter().collect::<Vec<_>>().join("; ")
        ),
    )
}

fn argv_exact(expected: &[Expected], started: &[Started]) -> Check {
    let odd: BTreeSet<String> = started
        .iter()
        .filter(|s| matches!(s.origin, Origin::Unknown))
        .filter(|s| !expected.iter().any(|e| e.argv == s.record.argv))
        .map(|s| format!("`{}`", argv_line(&s.record.argv)))
        .collect();
    if odd.is_empty() {
        let n = started
            .iter()
            .filter(|s| !matches!(s.origin, Origin::Hostile(_)))
            .count();
        return check(
            "argv-exact",
            true,
            format!("each of the {n} other start(s) had an injected server's argv"),
        );
    }
    check(
        "argv-exact",
        false,
        format!(
            "started with an argv no injected server has: {}",
            odd.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

fn env_exact(expected: &[Expected], started: &[Started]) -> Check {
    let odd: BTreeSet<String> = started
        .iter()
        .filter(|s| matches!(s.origin, Origin::Unknown))
        .filter_map(|s| {
            let wanted: Vec<&Expected> = expected
                .iter()
                .filter(|e| e.argv == s.record.argv)
                .collect();
            let first = wanted.first()?;
            Some(format!(
                "`{}` had KCAP_* {:?}, the launch gives {:?}",
                argv_line(&s.record.argv),
                s.record.kcap_env(),
                first.env
            ))
        })
        .collect();
    if odd.is_empty() {
        return check(
            "env-exact",
            true,
            "every injected server had exactly its KCAP_* variables".to_owned(),
        );
    }
    check(
        "env-exact",
        false,
        odd.into_iter().collect::<Vec<_>>().join("; "),
    )
}

/// No recorder saw a variable of the daemon's environment that the plan does not pass on.
fn no_daemon_env(
    parent_env: &BTreeMap<String, String>,
    plan: &LaunchPlan,
    started: &[Started],
) -> Check {
    let leaked: BTreeSet<String> = started
        .iter()
        .flat_map(|s| {
            s.record.env.iter().filter_map(move |(name, value)| {
                let from_parent = parent_env.get(name) == Some(value);
                let passed_on =
                    plan.env_inherit.contains(name) || plan.env_value(name) == Some(value);
                (from_parent && !passed_on)
                    .then(|| format!("{name} reached `{}`", argv_line(&s.record.argv)))
            })
        })
        .collect();
    if leaked.is_empty() {
        return check(
            "no-daemon-env",
            true,
            format!(
                "no server saw a value of the daemon's environment the plan does not pass on \
                 ({} variables there)",
                parent_env.len()
            ),
        );
    }
    check(
        "no-daemon-env",
        false,
        leaked.into_iter().collect::<Vec<_>>().join("; "),
    )
}

fn server_cwd(cwd: &str, started: &[Started]) -> Check {
    let odd: BTreeSet<String> = started
        .iter()
        .filter(|s| matches!(s.origin, Origin::Injected { .. }))
        .filter(|s| s.record.cwd != cwd)
        .map(|s| format!("`{}` in {}", argv_line(&s.record.argv), s.record.cwd))
        .collect();
    if odd.is_empty() {
        return check(
            "server-cwd",
            true,
            "every injected server ran in the worktree".to_owned(),
        );
    }
    check(
        "server-cwd",
        false,
        format!(
            "not in the worktree {cwd}: {}",
            odd.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::verify::recorder::AttackKind;

    fn started(reached: &[(&str, bool)]) -> Started {
        Started {
            record: Record {
                argv: vec!["kcap".into(), "mcp".into(), "review".into()],
                env: BTreeMap::new(),
                cwd: "/w".into(),
                pid: 7,
                listed_tools: true,
                reached: reached.iter().map(|(k, v)| ((*k).into(), *v)).collect(),
            },
            origin: Origin::Injected {
                id: "kcap-review".into(),
            },
        }
    }

    #[test]
    fn the_sandbox_check_holds_only_when_every_server_tried_every_attack_and_none_got_through() {
        let attacks = ["daemon-home", "signal-daemon"].map(|name| Attack {
            name: name.into(),
            kind: AttackKind::Signal { pid: 1 },
        });
        let denied = sandbox(
            &attacks,
            &[started(&[("daemon-home", false), ("signal-daemon", false)])],
        );
        assert!(denied.passed, "{denied:?}");
        let reached = sandbox(
            &attacks,
            &[started(&[("daemon-home", true), ("signal-daemon", false)])],
        );
        assert!(!reached.passed);
        assert_eq!(
            reached.detail,
            "from inside the reviewer a server reached: daemon-home"
        );
        let untried = sandbox(&attacks, &[started(&[("daemon-home", false)])]);
        assert!(!untried.passed);
        assert_eq!(untried.detail, "a server did not try: signal-daemon");
        let none = sandbox(&attacks, &[]);
        assert!(!none.passed);
    }
}
