//! The operations behind the commands (feature `cli`; cargo's `ops` is the model), one module
//! per command: [`check`] (`check --against`: drift between the registry and a client's
//! registration file), [`list`] (`list`, `resolve`), [`diff`], [`render`] (the launch JSON,
//! argv formats), [`export`] (the deny-list, the JSON Schema), [`install`] (`install`,
//! `uninstall`), [`doctor`] and [`verify`]. They sit above the client layer and the executor
//! and are imported by nothing below (`tests/suite/layers.rs`). The binary's own side of each
//! command (arguments, output, exit code) is
//! `src/bin/kcap-mcp-registry/commands/<command>.rs`.

pub mod check;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod install;
pub mod list;
pub mod render;
pub mod verify;
