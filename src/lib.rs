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
//! use kcap_mcp_registry::{Client, LaunchCommand, LaunchRequest, Policy};
//!
//! // The launch command as the daemon receives it.
//! let cmd: LaunchCommand = serde_json::from_str(
//!     r#"{"agent_id":"a1","mcp_allowlist":["KCAP-Review","kcap-flows"],"prompt":"Review PR 7"}"#,
//! )?;
//! // One request for any client; the policy is strict unless told otherwise.
//! let launch = LaunchRequest::new(Client::Codex, cmd)
//!     .server("http://127.0.0.1:5100", "/usr/local/bin/kcap")
//!     .worktree("/srv/kcap/worktrees/review-7")
//!     .launch_dir("/srv/kcap/launches/a1")
//!     .policy(Policy::Lenient)
//!     .plan()?;
//! // kcap-flows can start flows: the recursion guard skips it, with a warning to log.
//! assert!(launch.warnings[0].contains(r#""kcap-flows" skipped"#));
//! // The result channel first, then the allowlisted server under its canonical id.
//! let ids: Vec<&str> = launch.plan.servers.iter().map(|s| s.id.as_str()).collect();
//! assert_eq!(ids, ["kcap-flow-result", "kcap-review"]);
//! // The reviewer's HOME is its launch directory's, never the daemon's.
//! assert_eq!(launch.plan.env_value("HOME"), Some("/srv/kcap/launches/a1/home"));
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
mod error;
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
pub use error::Error;
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
