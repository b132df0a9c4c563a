//! The kcap MCP server registry.
//!
//! kcap launches unattended reviewer agents (Claude Code, OpenAI Codex CLI) for review
//! flows. A flow's MCP allowlist names kcap-owned MCP servers; this crate is the one
//! authority those names resolve against:
//!
//! - [`lookup`], [`servers`], [`result_channel`]: the registry, validated from
//!   `registry/*.toml` by `build.rs` and compiled into a `phf` perfect-hash table.
//! - [`resolve_allowlist`]: which servers an allowlist materializes (recursion guard,
//!   injection-only entries, duplicates, strict policy).
//! - [`render::claude`] and [`render::codex`]: the reviewer's MCP configuration and argv.
//! - [`LaunchCommand`]: the launch payload's wire shape.
//! - `validate_dir` (feature `validate`): the registry rules at run time, for CI.
//! - Feature `cli` (default), for the `kcap-mcp-registry` binary: [`report`] (check output
//!   formats), [`drift`] (registry vs a client's registration file), [`export`] (generated
//!   registration files, deny-list, JSON Schema), [`diff`] (what a registry change means),
//!   [`inspect`] (`list`, `resolve`) and [`launch`] (`render`).
#![deny(missing_docs)]

mod allowlist;
#[cfg(feature = "validate")]
pub mod diagnostic;
#[cfg(feature = "cli")]
pub mod diff;
#[cfg(feature = "cli")]
pub mod drift;
#[cfg(feature = "cli")]
pub mod export;
#[cfg(feature = "cli")]
pub mod inspect;
pub mod inventory;
#[cfg(feature = "cli")]
pub mod launch;
mod model;
mod registry;
pub mod render;
#[cfg(feature = "cli")]
pub mod report;
#[cfg(feature = "validate")]
pub mod schema;
mod wire;

pub use allowlist::{
    Policy, RejectReason, Rejection, Resolution, SkipKind, Skipped, resolve_allowlist,
};
pub use model::{EnvSource, MAX_ID_LEN, McpServer, RESULT_CHANNEL_ID, Tool};
pub use registry::{lookup, result_channel, servers};
pub use render::{LaunchContext, LaunchError, RenderError};
#[cfg(feature = "validate")]
pub use schema::{CheckError, Entry, validate_dir};
pub use wire::LaunchCommand;
