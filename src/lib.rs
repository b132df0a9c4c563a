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
//! - [`clients`]: one room per coding-agent client: [`clients::claude`],
//!   [`clients::codex`], [`clients::gemini`] and [`clients::opencode`] render the reviewer's
//!   launch ([`clients::plan::LaunchPlan`]);
//!   [`clients::codex::inventory`] finds the MCP servers Codex inherits from the user's
//!   configuration.
//! - [`LaunchCommand`]: the launch payload's wire shape.
//! - `schema::validate_dir` (feature `validate`): the registry rules at run time, for CI.
//!
//! # Quick start
//!
//! ```
//! use kcap_mcp_registry::{LaunchCommand, LaunchContext, Policy, SkipKind};
//! use kcap_mcp_registry::clients::{claude::claude_reviewer_args, codex::codex_reviewer_args};
//!
//! // The launch command as the daemon receives it.
//! let cmd: LaunchCommand = serde_json::from_str(
//!     r#"{"agent_id":"a1","mcp_allowlist":["KCAP-Review","kcap-flows"],"prompt":"Review PR 7"}"#,
//! )?;
//! let ctx = LaunchContext {
//!     server_url: Some("http://127.0.0.1:5100".into()),
//!     kcap_bin: Some("/usr/local/bin/kcap".into()),
//!     agent_id: cmd.agent_id,
//!     mcp_allowlist: cmd.mcp_allowlist,
//!     prompt: cmd.prompt,
//!     ..LaunchContext::default()
//! };
//! // kcap-flows can start flows: the recursion guard strips it (log the skip).
//! let skipped: Vec<SkipKind> = ctx.resolve(Policy::Lenient)?.skipped().map(|s| s.kind).collect();
//! assert_eq!(skipped, [SkipKind::StartsFlows]);
//!
//! let claude = claude_reviewer_args(&ctx, Policy::Lenient)?;
//! assert_eq!(claude[2..4], ["--strict-mcp-config", "--mcp-config"]);
//! assert!(claude[4].contains(r#""kcap-review":{"command":"/usr/local/bin/kcap""#));
//! assert!(!claude[4].contains("kcap-flows"));
//!
//! // For Codex, pass the inherited servers (`clients::codex::inventory::codex_inventory`) so they are disabled.
//! let codex = codex_reviewer_args(&ctx, Policy::Lenient, &[])?;
//! assert!(codex.contains(&"mcp_servers.kcap-review.enabled=true".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! - `cli` (default): the `kcap-mcp-registry` binary and what only it needs.
//! - `validate`: the runtime registry rules ([`schema`], [`diagnostic`]), as `build.rs` runs them.
//! - `cli` also brings, for the binary: [`report`] (check output formats), [`drift`]
//!   (registry vs a client's registration file), [`export`] (generated registration files,
//!   deny-list, JSON Schema), [`diff`] (what a registry change means), [`inspect`] (`list`,
//!   `resolve`) and [`launch`] (`render`).
//!
//! With `default-features = false` the library depends at run time on `getrandom`, `phf`,
//! `serde` and `serde_json` only.
#![deny(missing_docs)]

mod allowlist;
pub mod clients;
pub mod decode;
#[cfg(feature = "cli")]
pub mod diff;
#[cfg(feature = "cli")]
pub mod drift;
#[cfg(feature = "cli")]
pub mod export;
#[cfg(feature = "cli")]
pub mod inspect;
#[cfg(feature = "cli")]
pub mod launch;
mod model;
mod registry;
#[cfg(feature = "cli")]
pub mod report;
#[cfg(feature = "validate")]
pub mod schema;
mod wire;

pub use allowlist::{
    Policy, RejectReason, Rejection, Resolution, SkipKind, Skipped, resolve_allowlist,
};
pub use clients::{LaunchContext, LaunchError, RenderError};
pub use model::{EnvSource, MAX_ID_LEN, McpServer, RESULT_CHANNEL_ID, Tool};
pub use registry::{lookup, result_channel, servers};
#[cfg(feature = "validate")]
pub use schema::diagnostic;
#[cfg(feature = "validate")]
pub use schema::{CheckError, RegistryEntry, validate_dir, validate_path};
pub use wire::LaunchCommand;
