//! Gemini CLI (pinned 0.61.0): its registration file. (Its reviewer launch, over ACP, is
//! described in the facts; this crate does not render it yet.)

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;
