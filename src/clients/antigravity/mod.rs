//! Antigravity, `agy` (not installable here; facts from the original system \[K\], measured
//! there on 1.1.10/1.1.13): its registration file.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;
