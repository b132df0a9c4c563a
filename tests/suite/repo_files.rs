//! Files the repository ships for users' tools: the JSON Schema editors validate
//! `registry/*.toml` against (`.taplo.toml` points at it), the pre-commit hook, and the
//! licence texts `Cargo.toml` declares.
#![cfg(feature = "cli")]

use crate::common;

use common::stdout_of;

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_checked_in_schema_is_what_export_json_schema_writes() {
    assert_eq!(
        read("registry.schema.json"),
        stdout_of(&["export", "json-schema"]),
        "registry.schema.json is stale: run `cargo run -- export json-schema > registry.schema.json`"
    );
}

#[test]
fn taplo_associates_the_registry_files_with_the_checked_in_schema() {
    let config: toml::Table = toml::from_str(&read(".taplo.toml")).unwrap();
    let rules = config["rule"].as_array().unwrap();
    let rule = rules
        .iter()
        .find(|r| r["include"].as_array().unwrap()[0].as_str() == Some("registry/*.toml"))
        .expect("a rule for registry/*.toml");
    assert_eq!(
        rule["schema"]["path"].as_str(),
        Some("./registry.schema.json")
    );
}

#[test]
fn the_pre_commit_hook_runs_check_on_registry_changes() {
    let hooks = read(".pre-commit-hooks.yaml");
    for line in [
        "- id: kcap-mcp-registry-check",
        "  entry: kcap-mcp-registry check",
        "  language: rust",
        "  files: ^registry/",
        "  pass_filenames: false",
    ] {
        assert!(
            hooks.lines().any(|l| l == line),
            "missing `{line}`:\n{hooks}"
        );
    }
}

#[test]
fn both_licence_texts_cargo_toml_declares_are_present() {
    let manifest = read("Cargo.toml");
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""));
    assert!(read("LICENSE-MIT").contains("Permission is hereby granted, free of charge"));
    assert!(
        read("LICENSE-APACHE")
            .contains("Apache License\n                           Version 2.0, January 2004")
    );
}
