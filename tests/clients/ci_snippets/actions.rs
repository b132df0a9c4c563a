//! The GitHub Actions side of `tests/clients/ci_snippets.rs`: the code blocks of `docs/ci.md`, its job
//! as steps, the GitHub expressions it uses, and a run of the job as Actions would run it.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use super::copy::{Out, checkout, output, read, tool_command};
use super::{MANIFEST_DIR, ROOT, STEP_TIMEOUT_SECS};
// ------------------------------------------------------------------------------------------
// docs/ci.md
// ------------------------------------------------------------------------------------------

/// The one top-level code block of docs/ci.md in `lang` (```yaml) that contains `marker`.
pub(crate) fn doc_block(lang: &str, marker: &str) -> String {
    let docs = read(&Path::new(MANIFEST_DIR).join("docs/ci.md"));
    let fence = format!("```{lang}");
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in docs.lines() {
        match (&mut open, line) {
            (None, line) if line == fence => open = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                open = None;
            }
            (Some(block), line) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    let mut found = blocks.into_iter().filter(|b| b.contains(marker));
    let block = found
        .next()
        .unwrap_or_else(|| panic!("docs/ci.md has no {fence} block with `{marker}`"));
    assert!(
        found.next().is_none(),
        "docs/ci.md has two {fence} blocks with `{marker}`"
    );
    block
}

/// One step of the job.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) name: String,
    pub(crate) uses: Option<String>,
    pub(crate) run: Option<String>,
    pub(crate) condition: Option<String>,
    pub(crate) env: Vec<(String, String)>,
}

/// The job of docs/ci.md: its `env` and its steps.
pub(crate) struct Job {
    pub(crate) env: Vec<(String, String)>,
    pub(crate) steps: Vec<Step>,
}

pub(crate) fn job() -> Job {
    let text = doc_block("yaml", "jobs:");
    let docs = YamlLoader::load_from_str(&text).expect("the job in docs/ci.md is YAML");
    let workflow = &docs[0];
    // The events the cases stand for.
    assert_eq!(
        workflow["on"]["pull_request"],
        Yaml::Null,
        "on: pull_request"
    );
    assert_eq!(
        workflow["on"]["push"]["branches"],
        Yaml::Array(vec![Yaml::String("main".into())])
    );
    let jobs = workflow["jobs"].as_hash().expect("jobs:");
    assert_eq!(jobs.len(), 1, "one job");
    let job = jobs.values().next().unwrap();
    for key in job.as_hash().expect("a job").keys() {
        let key = key.as_str().unwrap();
        assert!(
            ["runs-on", "env", "steps"].contains(&key),
            "the job has `{key}:`, which this test does not carry out; teach it"
        );
    }
    assert_eq!(job["runs-on"].as_str(), Some("ubuntu-latest"));
    let steps = job["steps"].as_vec().expect("steps:");
    Job {
        env: pairs(&job["env"]),
        steps: steps.iter().map(step).collect(),
    }
}

pub(crate) fn step(y: &Yaml) -> Step {
    for key in y.as_hash().expect("a step").keys() {
        let key = key.as_str().unwrap();
        assert!(
            ["name", "uses", "with", "run", "if", "env"].contains(&key),
            "a step has `{key}:`, which this test does not carry out; teach it"
        );
    }
    let text = |key: &str| y[key].as_str().map(str::to_string);
    Step {
        name: text("name")
            .or_else(|| text("uses"))
            .expect("a name or uses"),
        uses: text("uses"),
        run: text("run"),
        condition: text("if"),
        env: pairs(&y["env"]),
    }
}

pub(crate) fn pairs(y: &Yaml) -> Vec<(String, String)> {
    let Some(map) = y.as_hash() else {
        assert!(y.is_badvalue(), "env: a mapping");
        return Vec::new();
    };
    map.iter()
        .map(|(k, v)| {
            let value = match v {
                Yaml::String(s) | Yaml::Real(s) => s.clone(),
                Yaml::Integer(i) => i.to_string(),
                Yaml::Boolean(b) => b.to_string(),
                other => panic!("env value {other:?}"),
            };
            (k.as_str().expect("an env name").to_string(), value)
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// GitHub expressions: the ones docs/ci.md uses, evaluated as Actions would
// ------------------------------------------------------------------------------------------

/// The event a job run stands for.
pub(crate) struct Event {
    pub(crate) name: &'static str,
    pub(crate) base_ref: &'static str,
}

pub(crate) const PUSH: Event = Event {
    name: "push",
    base_ref: "",
};

pub(crate) const PULL_REQUEST: Event = Event {
    name: "pull_request",
    base_ref: "main",
};

/// The value of one operand: a string literal, a `github.*` context value, `hashFiles('PATH')`
/// (non-empty when the file exists; a glob is not evaluated).
pub(crate) fn operand(text: &str, repo: &Path, event: &Event) -> String {
    let text = text.trim();
    if let Some(literal) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        return literal.to_string();
    }
    if let Some(path) = text
        .strip_prefix("hashFiles('")
        .and_then(|t| t.strip_suffix("')"))
    {
        assert!(
            !path.contains(['*', '?', '[', ',']),
            "hashFiles({path}): this test evaluates one plain path; teach it globs"
        );
        // Actions returns the files' SHA-256; only whether it is empty matters here.
        return if repo.join(path).is_file() {
            format!("sha256-of-{path}")
        } else {
            String::new()
        };
    }
    match text {
        "github.event_name" => event.name.into(),
        "github.base_ref" => event.base_ref.into(),
        other => panic!("docs/ci.md uses `{other}`, which this test does not evaluate; teach it"),
    }
}

/// An `if:` condition: `A == B` or `A != B`. (A step runs only when the steps before it
/// passed, as Actions' implicit `success() &&` has it.)
pub(crate) fn condition(expr: &str, repo: &Path, event: &Event) -> bool {
    let expr = expr.trim();
    let expr = expr
        .strip_prefix("${{")
        .and_then(|e| e.strip_suffix("}}"))
        .unwrap_or(expr);
    for (op, equal) in [(" == ", true), (" != ", false)] {
        if let Some((a, b)) = expr.split_once(op) {
            return (operand(a, repo, event) == operand(b, repo, event)) == equal;
        }
    }
    panic!("docs/ci.md has the condition `{expr}`, which this test does not evaluate; teach it")
}

/// `text` with each `${{ X }}` replaced by its value.
pub(crate) fn expand(text: &str, repo: &Path, event: &Event) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = rest[start..].find("}}").expect("a closed ${{ … }}") + start;
        out.push_str(&rest[..start]);
        out.push_str(&operand(&rest[start + 3..end], repo, event));
        rest = &rest[end + 2..];
    }
    out + rest
}

// ------------------------------------------------------------------------------------------
// Running the job
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A `uses:` step: an action, not run by this test.
    NotRun,
    /// Its condition was false, or a step before it failed.
    Skipped,
    Passed,
    Failed(i32),
}

#[derive(Debug)]
pub(crate) struct StepRun {
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) struct JobRun {
    pub(crate) steps: Vec<StepRun>,
    /// What the steps wrote to `$GITHUB_STEP_SUMMARY`.
    pub(crate) summary: String,
}

impl JobRun {
    pub(crate) fn outcomes(&self) -> Vec<(&str, Outcome)> {
        self.steps
            .iter()
            .map(|s| (s.name.as_str(), s.outcome))
            .collect()
    }

    /// The step whose name starts with `name`.
    pub(crate) fn step(&self, name: &str) -> &StepRun {
        self.steps
            .iter()
            .find(|s| s.name.starts_with(name))
            .unwrap_or_else(|| panic!("no step `{name}` in {:?}", self.outcomes()))
    }

    pub(crate) fn passed(&self) -> bool {
        self.steps
            .iter()
            .all(|s| !matches!(s.outcome, Outcome::Failed(_)))
    }
}

/// Runs the job of docs/ci.md on the copy's `branch` for `event`.
pub(crate) fn run_job(branch: &str, event: Event) -> JobRun {
    let job = job();
    let repo = checkout(branch);
    let work = repo.parent().unwrap().to_path_buf();
    let summary = work.join("step-summary.md");
    std::fs::write(&summary, "").unwrap();
    let script = work.join("step.sh");
    let mut failed = false;
    let mut steps = Vec::new();
    for step in &job.steps {
        let skipped = |outcome| StepRun {
            name: step.name.clone(),
            outcome,
            stdout: String::new(),
            stderr: String::new(),
        };
        if step.uses.is_some() {
            assert!(step.run.is_none(), "{step:?}");
            steps.push(skipped(Outcome::NotRun));
            continue;
        }
        let run = step.run.as_deref().expect("a step with uses: or run:");
        let wanted = step
            .condition
            .as_deref()
            .is_none_or(|c| condition(c, &repo, &event));
        if failed || !wanted {
            steps.push(skipped(Outcome::Skipped));
            continue;
        }
        std::fs::write(&script, expand(run, &repo, &event)).unwrap();
        let mut cmd = tool_command("timeout");
        // As Actions runs a `run:` step without `shell:` on Linux: `bash -e {0}`.
        cmd.args([
            "-k",
            "10",
            STEP_TIMEOUT_SECS,
            "bash",
            "--noprofile",
            "--norc",
            "-e",
        ])
        .arg(&script)
        .current_dir(&repo)
        .env("CI", "true")
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", event.name)
        .env("GITHUB_BASE_REF", event.base_ref)
        .env("GITHUB_WORKSPACE", &repo)
        .env("GITHUB_STEP_SUMMARY", &summary);
        for (name, value) in job.env.iter().chain(&step.env) {
            cmd.env(name, expand(value, &repo, &event));
        }
        let out = output(cmd, &step.name);
        failed = out.code != 0;
        steps.push(StepRun {
            name: step.name.clone(),
            outcome: if failed {
                Outcome::Failed(out.code)
            } else {
                Outcome::Passed
            },
            stdout: out.stdout,
            stderr: out.stderr,
        });
    }
    JobRun {
        steps,
        summary: read(&summary),
    }
}

/// `pre-commit run --all-files` in `repo`, with the copy's builds and its own pre-commit home.
pub(crate) fn pre_commit_run(pre_commit: &Path, repo: &Path) -> Out {
    let mut cmd = tool_command("timeout");
    cmd.args(["-k", "10", STEP_TIMEOUT_SECS])
        .arg(pre_commit)
        .args(["run", "--all-files", "--color", "never"])
        .current_dir(repo)
        .env("PRE_COMMIT_HOME", Path::new(ROOT).join("pre-commit-home"));
    output(cmd, "pre-commit run --all-files")
}
