//! GitHub Copilot CLI (pinned 1.0.102): its registration file.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;
