//! The kcap MCP server registry.
//!
//! kcap launches unattended reviewer agents for review flows on nine coding-agent clients
//! (Claude Code, OpenAI Codex CLI, Gemini CLI, OpenCode, GitHub Copilot CLI, Cursor, Kiro,
//! Antigravity, Qwen Code). A flow's MCP allowlist names kcap-owned MCP servers; this crate is the one
//! authority those names resolve against:
//!
//! - [`lookup`], [`servers`], [`result_channel`]: the registry, validated from
//!   `registry/*.toml` by `build.rs` and compiled into a `phf` perfect-hash table.
//! - [`resolve_allowlist`]: which servers an allowlist materializes (recursion guard,
//!   injection-only entries, duplicates, strict policy).
//! - [`clients`]: one room per coding-agent client, each rendering the reviewer's launch
//!   ([`clients::plan::LaunchPlan`]), rooted in a per-launch directory
//!   ([`clients::root`]); [`clients::Client::plan`] is the one call from a launch to a plan
//!   for any client ([`clients::dispatch`]).
//! - [`LaunchCommand`]: the launch payload's wire shape.
//! - [`text`]: how user input is shown in every message ([`text::printable`],
//!   [`text::ShownPath`]).
//! - `schema::validate_dir` (feature `validate`): the registry rules at run time, for CI.
//!
//! # Quick start
//!
//! ```
//! use kcap_mcp_registry::clients::{claude::claude_reviewer_args, codex::codex_reviewer_args};
//! use kcap_mcp_registry::{LaunchCommand, LaunchContext, Policy, SkipKind};
//!
//! // The launch command as the daemon receives it.
//! let cmd: LaunchCommand = serde_json::from_str(
//!     r#"{"agent_id":"a1","mcp_allowlist":["KCAP-Review","kcap-flows"],"prompt":"Review PR 7"}"#,
//! )?;
//! let ctx = LaunchContext::from_command(cmd, "http://127.0.0.1:5100", "/usr/local/bin/kcap");
//! // kcap-flows can start flows: the recursion guard strips it (log the skip).
//! let resolution = ctx.resolve(Policy::Lenient)?;
//! let skipped: Vec<SkipKind> = resolution.skipped().map(|s| s.kind).collect();
//! assert_eq!(skipped, [SkipKind::StartsFlows]);
//!
//! let claude = claude_reviewer_args(&ctx, &resolution)?;
//! assert_eq!(claude[2..4], ["--strict-mcp-config", "--mcp-config"]);
//! assert!(claude[4].contains(r#""kcap-review":{"command":"/usr/local/bin/kcap""#));
//! assert!(!claude[4].contains("kcap-flows"));
//!
//! // Codex's argv; `clients::codex::codex_plan` (or `Client::plan`) gives the launch that
//! // isolates it.
//! let codex = codex_reviewer_args(&ctx, &resolution)?;
//! assert!(codex.contains(&"mcp_servers.kcap-review.enabled=true".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! Items behind a feature say so in their documentation (on docs.rs, a "Available on crate
//! feature … only" note).
//!
//! - `cli` (default): the `kcap-mcp-registry` binary and what only it needs: `report` (check
//!   output formats), `ops` (the operations behind the commands, one module each:
//!   `check --against`, `list`/`resolve`, `diff`, `render`, `export`, `install`/`uninstall`,
//!   `doctor`, `verify`), and in the client layer each room's registration file and loader
//!   model (`clients::registration`) and `verify`'s hostile configuration
//!   (`clients::hostile`).
//! - `launch` (on with `cli`): the module `launch`, the executor that carries a launch
//!   plan out (creates the per-launch directory, starts the client in its own process
//!   group, drives it over ACP or in a pseudo-terminal); adds the `rustix` crate.
//! - `validate`: the runtime registry rules (`schema::validate_dir`, the `diagnostic`
//!   rendering), as `build.rs` runs them, and `Registry::from_entries` (a registry checked
//!   at run time).
//!
//! With `default-features = false` the library depends at run time on `getrandom`, `phf`,
//! `serde` and `serde_json` only.
#![deny(missing_docs)]
// Issue 16: library functions stay short, or say why in an `#[allow(…, reason)]` (the unit
// tests are exempt); a plain `cargo clippy` checks it.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod allowlist;
pub mod clients;
pub mod decode;
#[cfg(feature = "launch")]
#[cfg_attr(docsrs, doc(cfg(feature = "launch")))]
pub mod launch;
mod model;
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub mod ops;
pub mod registry;
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub mod report;
#[cfg(feature = "validate")]
#[cfg_attr(docsrs, doc(cfg(feature = "validate")))]
pub mod schema;
pub mod text;
mod wire;

pub use allowlist::{
    Policy, RejectReason, Rejection, Resolution, SkipKind, Skipped, resolve_allowlist,
};
pub use clients::dispatch::PlannedLaunch;
pub use clients::plan::LaunchPlan;
pub use clients::{
    Client, LaunchContext, LaunchError, LaunchRequest, RenderError, ResultDelivery, Snapshot,
};
pub use model::{
    ALIASING_CLIENTS, AliasedToolNames, EnvSource, GEMINI_TOOL_NAMES, Inject, LAUNCH_ID_HEX_LEN,
    MAX_ID_LEN, McpServer, QWEN_TOOL_NAMES, RESULT_CHANNEL_ID, Tool,
};
#[cfg(feature = "validate")]
#[cfg(feature = "validate")]
#[cfg_attr(docsrs, doc(cfg(feature = "validate")))]
pub use registry::NoResultChannel;
pub use registry::{Registry, lookup, result_channel, servers};
#[cfg(feature = "validate")]
#[cfg_attr(docsrs, doc(cfg(feature = "validate")))]
pub use schema::diagnostic;
#[cfg(feature = "validate")]
#[cfg_attr(docsrs, doc(cfg(feature = "validate")))]
pub use schema::{CheckError, RegistryEntry, validate_dir, validate_path};
pub use wire::LaunchCommand;

/// The README's Rust examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "cli"))]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/launch-plan.md`, compiled and run as doctests so they stay true.
#[doc = include_str!("../docs/launch-plan.md")]
#[cfg(all(doctest, feature = "cli"))]
pub struct LaunchPlanDoctests;
