//! CLI cases as files, run by trycmd: every `tests/cmd/*.toml` (with its `.stdout` and
//! `.stderr`) and `tests/cmd/*.md`, and every ```console block of README.md and
//! docs/cli-doctor.md, so their examples print what they show. `TRYCMD=overwrite cargo test
//! --test cli_cases` rewrites the expected output after a reviewed change.
#![cfg(feature = "cli")]

#[test]
fn cli_cases_and_readme_examples() {
    trycmd::TestCases::new()
        .env("NO_COLOR", "1")
        .case("tests/cmd/*.toml")
        .case("tests/cmd/*.md")
        .case("docs/cli-doctor.md")
        .case("README.md");
}
