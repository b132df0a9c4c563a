//! The synthetic registry of `examples/gen_registry.rs` (used by the scaling benchmarks)
//! passes every registry rule, and the generator refuses a directory that already holds one.
#![cfg(feature = "validate")]

use crate::synthetic;

use kcap_mcp_registry::validate_dir;

#[test]
fn a_generated_registry_is_valid_and_has_n_plus_one_entries() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_registry(120, dir.path()).unwrap();
    let entries = validate_dir(dir.path()).unwrap_or_else(|e| panic!("{e}: {e:?}"));
    assert_eq!(entries.len(), 121);
    assert_eq!(entries.iter().filter(|e| e.starts_flows).count(), 5); // 0, 25, …, 100
    assert_eq!(entries.iter().filter(|e| !e.allowlistable).count(), 1);
    assert!(entries.iter().any(|e| e.id == "syn-7-tickets-sessions"));
    let longest = entries.iter().map(|e| e.id.len()).max().unwrap();
    assert!((20..=64).contains(&longest), "{longest}");
}

#[test]
fn the_generator_refuses_a_directory_holding_toml_files() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_registry(2, dir.path()).unwrap();
    let err = synthetic::write_registry(2, dir.path()).unwrap_err();
    assert!(err.contains("already holds .toml files"), "{err}");
}
