//! The kcap MCP server registry.
//!
//! kcap launches unattended reviewer agents (Claude Code, OpenAI Codex CLI) for review
//! flows. A flow's MCP allowlist names kcap-owned MCP servers; this crate is the one
//! authority those names resolve against:
//!
//! - [`lookup`], [`servers`], [`result_channel`]: the registry, validated from
//!   `registry/*.toml` by `build.rs` and compiled into a `phf` perfect-hash table.
//! - `validate_dir` (feature `validate`): the same registry rules at run time, for CI.
#![deny(missing_docs)]

#[cfg(feature = "validate")]
pub mod diagnostic;
mod model;
mod registry;
#[cfg(feature = "validate")]
pub mod schema;

pub use model::{EnvSource, MAX_ID_LEN, McpServer, RESULT_CHANNEL_ID, Tool};
pub use registry::{lookup, result_channel, servers};
#[cfg(feature = "validate")]
pub use schema::{CheckError, Entry, validate_dir};
