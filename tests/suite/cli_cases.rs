//! CLI cases as files, run by trycmd: every `tests/cmd/*.toml` (with its `.stdout` and
//! `.stderr`) and `tests/cmd/*.md`, and every ```console block of README.md and of
//! `docs/*.md` (`docs/cli.md`, `docs/cli-doctor.md`, …), so the documented examples print
//! what they show. `TRYCMD=overwrite cargo test --test suite cli_cases::` rewrites the expected
//! output after a reviewed change.
#![cfg(feature = "cli")]

#[test]
fn cli_cases_and_documented_examples() {
    trycmd::TestCases::new()
        .env("NO_COLOR", "1")
        .case("tests/cmd/*.toml")
        .case("tests/cmd/*.md")
        .case("README.md")
        .case("docs/*.md");
}
