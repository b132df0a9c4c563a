//! The CI snippets of `docs/ci.md`, run as written on a copy of this repository: the GitHub
//! Actions job (each `run:` step with bash, the GitHub expressions it uses evaluated here) on
//! a push without and with `.mcp.json`, a push with a broken registry, and a pull request
//! that adds a read-only server, without and with its acceptance; and both pre-commit
//! configs (`pre-commit run --all-files`). "How these snippets are tested" in `docs/ci.md`
//! says what is run and what is not.
//!
//! The copy: a git repository made from the working tree (tracked and untracked files, not
//! ignored ones), one branch per case, committed with fixed dates so that an unchanged tree
//! gives the same commits. It is cloned once into `target/tmp/ci-snippets/work/repo`, where
//! each case checks out its branch: only the files that differ are rewritten, so the cargo
//! builds there serve every case and every run. The cases share that checkout, one at a time.
//!
//! The builds keep the steps' `--release` with the release profile overridden to build fast
//! (`CARGO_PROFILE_RELEASE_OPT_LEVEL=0`, no debug info), offline, with one cargo build
//! directory for every build of the test (`CARGO_BUILD_BUILD_DIR`), so the dependencies
//! compile once.

#[path = "ci_snippets/actions.rs"]
mod actions;
use crate::common;
#[path = "ci_snippets/copy.rs"]
mod copy;

use std::path::Path;

use actions::{Outcome, PULL_REQUEST, PUSH, doc_block, pre_commit_run, run_job};
use common::peers::peer;
use copy::{checkout, git, one_at_a_time, read, seed};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        job_on_a_push_without_mcp_json_skips_that_step,
        job_on_a_push_checks_a_matching_mcp_json,
        job_on_a_push_with_a_broken_registry_fails_at_the_check,
        job_on_a_pull_request_adding_a_read_only_server_fails_unaccepted,
        job_on_the_pull_request_with_its_acceptance_passes,
        pre_commit_in_this_repository,
        pre_commit_in_another_repository,
    ]
}

pub(crate) const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
/// Everything the test keeps between runs: the copy, its checkout, the cargo build directory.
pub(crate) const ROOT: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/ci-snippets");
/// How long one step or one pre-commit run may take before its process group is killed.
pub(crate) const STEP_TIMEOUT_SECS: &str = "900";

/// The server the pull request adds: read-only, with one unattended-safe tool.
pub(crate) const SEARCH_SERVER: &str = r#"id = "kcap-search"
description = "Searches the team's notes."
args = ["mcp", "search"]
starts_flows = false
read_only = true

[[tools]]
name = "search"
unattended_safe = true
"#;

/// A registry file with a misspelled key.
pub(crate) const BROKEN_SERVER: &str = r#"id = "kcap-broken"
description = "A server whose file breaks a rule."
args = ["mcp", "broken"]
starts_flows = false
read_onyl = true
"#;

// ------------------------------------------------------------------------------------------
// The cases
// ------------------------------------------------------------------------------------------

fn job_on_a_push_without_mcp_json_skips_that_step() {
    let _one = one_at_a_time();
    let run = run_job("main", PUSH);
    assert_eq!(
        run.outcomes(),
        [
            ("actions/checkout@v4", Outcome::NotRun),
            ("dtolnay/rust-toolchain@stable", Outcome::NotRun),
            (
                "Check the registry (annotates the pull request)",
                Outcome::Passed
            ),
            (
                "Build the full CLI (for --against and diff)",
                Outcome::Passed
            ),
            (
                "Registration files match the registry (skipped where the repository keeps none)",
                Outcome::Skipped
            ),
            ("Security review of the registry change", Outcome::Skipped),
        ]
    );
    assert!(run.passed());
    // `--format github` prints annotations only: a clean registry prints nothing.
    assert_eq!(run.step("Check the registry").stdout, "");
    assert_eq!(run.summary, "");
}

fn job_on_a_push_checks_a_matching_mcp_json() {
    let _one = one_at_a_time();
    let run = run_job("mcp-json", PUSH);
    let against = run.step("Registration files match the registry");
    assert_eq!(against.outcome, Outcome::Passed, "{against:?}");
    assert_eq!((against.stdout.as_str(), against.stderr.as_str()), ("", ""));
    assert_eq!(
        run.step("Security review").outcome,
        Outcome::Skipped,
        "not a pull request"
    );
    assert!(run.passed());
}

fn job_on_a_push_with_a_broken_registry_fails_at_the_check() {
    let _one = one_at_a_time();
    let run = run_job("broken", PUSH);
    let check = run.step("Check the registry");
    assert_eq!(check.outcome, Outcome::Failed(1), "{check:?}");
    assert!(
        check
            .stdout
            .starts_with("::error file=registry/kcap-broken.toml,line=5,"),
        "an annotation on the misspelled key:\n{}",
        check.stdout
    );
    assert!(check.stdout.contains("read_onyl"), "{}", check.stdout);
    // A failed step skips the rest, as on Actions.
    for name in [
        "Build the full CLI",
        "Registration files",
        "Security review",
    ] {
        assert_eq!(run.step(name).outcome, Outcome::Skipped, "{name}");
    }
    assert!(!run.passed());
}

fn job_on_a_pull_request_adding_a_read_only_server_fails_unaccepted() {
    let _one = one_at_a_time();
    let run = run_job("pr", PULL_REQUEST);
    let review = run.step("Security review");
    assert_eq!(review.outcome, Outcome::Failed(1), "{review:?}");
    assert_eq!(
        run.summary,
        summary(&[" — **not accepted**", " — **not accepted**"])
    );
    // After git's lines about the worktree: the log docs/ci.md shows.
    let error = &review.stderr[review.stderr.find("error: ").expect("an error")..];
    assert_eq!(
        error,
        doc_block(
            "text",
            "error: 2 security-relevant changes are not accepted"
        )
    );
    assert!(error.contains(
        "\n[[accepted]]\nchange = \"kcap-search: tools.search.unattended_safe (absent) -> true\"\n"
    ));
    assert!(!run.passed());
}

fn job_on_the_pull_request_with_its_acceptance_passes() {
    let _one = one_at_a_time();
    let run = run_job("pr-accepted", PULL_REQUEST);
    let review = run.step("Security review");
    assert_eq!(review.outcome, Outcome::Passed, "{review:?}");
    assert_eq!(
        run.summary,
        summary(&[
            " — accepted by `@alice`: `Searches the index; writes nothing.`",
            " — accepted by `@alice`: `A read-only query.`",
        ])
    );
    assert!(run.passed());
}

/// The Markdown the security review writes to the job summary for the pull request, with
/// `marks` after its two security-relevant changes.
fn summary(marks: &[&str; 2]) -> String {
    format!(
        "## MCP server registry changes\n\n### Security-relevant changes (2)\n\n\
         - `kcap-search`: `read_only` (absent) → `true`{}\n\
         - `kcap-search`: `tools.search.unattended_safe` (absent) → `true`{}\n\n\
         ### Added servers (1)\n\n\
         - `kcap-search`: `Searches the team's notes.` (args `[\"mcp\",\"search\"]`, \
         starts_flows `false`, allowlistable `true`, read_only `true`)\n",
        marks[0], marks[1]
    )
}

fn pre_commit_in_this_repository() {
    let Some(pre_commit) = peer("KCAP_PRE_COMMIT_BIN") else {
        return; // reported as ignored, with the reason
    };
    let _one = one_at_a_time();
    let config = doc_block("yaml", "repo: local");
    assert_eq!(
        read(&Path::new(MANIFEST_DIR).join(".pre-commit-config.yaml")),
        config,
        ".pre-commit-config.yaml differs from the config docs/ci.md shows for this repository"
    );
    for (branch, code) in [("broken", 1), ("main", 0)] {
        let repo = checkout(branch);
        std::fs::write(repo.join(".pre-commit-config.yaml"), &config).unwrap();
        let out = pre_commit_run(&pre_commit, &repo);
        assert_eq!(out.code, code, "{branch}: {out:?}");
        let line = out.stdout.lines().next().unwrap_or_default();
        let verdict = if code == 0 { "Passed" } else { "Failed" };
        assert!(
            line.starts_with("kcap MCP registry check") && line.ends_with(verdict),
            "{branch}: {out:?}"
        );
        if code == 1 {
            assert!(
                out.stdout.contains("registry/kcap-broken.toml:5:1"),
                "the checker's report names the file and line: {out:?}"
            );
        }
    }
}

fn pre_commit_in_another_repository() {
    let Some(pre_commit) = peer("KCAP_PRE_COMMIT_BIN") else {
        return; // reported as ignored, with the reason
    };
    let _one = one_at_a_time();
    let seed = seed();
    // The config as docs/ci.md shows it, with its repository URL and `rev` pointed at the copy.
    let shown = doc_block(
        "yaml",
        "repo: https://github.com/kurrent-io/kcap-mcp-registry",
    );
    let rev_line = shown
        .lines()
        .find(|l| l.trim_start().starts_with("rev: "))
        .expect("a rev line");
    let config = shown
        .replace(
            "https://github.com/kurrent-io/kcap-mcp-registry",
            &seed.dir.display().to_string(),
        )
        .replace(
            rev_line,
            &format!("    rev: {} # the copy's main", seed.main_commit),
        );
    let other = Path::new(ROOT).join("another-repository");
    let _ = std::fs::remove_dir_all(&other);
    std::fs::create_dir_all(other.join("registry")).unwrap();
    std::fs::write(
        other.join("registry/kcap-flow-result.toml"),
        read(&seed.dir.join("registry/kcap-flow-result.toml")),
    )
    .unwrap();
    std::fs::write(other.join(".pre-commit-config.yaml"), config).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    git(&other, &["add", "-A"]);
    let out = pre_commit_run(&pre_commit, &other);
    assert_eq!(out.code, 0, "{out:?}");
    // After pre-commit's `[INFO]` lines on its first install.
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("kcap MCP registry check") && l.ends_with("Passed")),
        "{out:?}"
    );
    std::fs::write(other.join("registry/kcap-broken.toml"), BROKEN_SERVER).unwrap();
    git(&other, &["add", "-A"]);
    let out = pre_commit_run(&pre_commit, &other);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("Failed"), "{out:?}");
    assert!(
        out.stdout.contains("registry/kcap-broken.toml:5:1"),
        "the report names the file and line: {out:?}"
    );
}
