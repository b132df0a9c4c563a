//! Kiro (not installable here; facts from the original system \[K\], measured there on
//! 2.15.2/2.16.0): its registration file.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;
