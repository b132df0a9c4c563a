//! Cursor (not installable here; facts from the original system \[K\] only): its registration
//! file.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;
