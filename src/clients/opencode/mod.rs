//! OpenCode (pinned 1.18.33): its registration file.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;
