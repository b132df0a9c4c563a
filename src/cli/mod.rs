//! What the command line needs beyond the launch (feature `cli`), one module per command:
//! [`check`] (`check --against`: drift between the registry and a client's registration
//! file), [`list`] (`list`, `resolve`), [`diff`], [`render`] (the launch JSON, argv formats),
//! [`export`] (registration files and their formats), [`install`] (`install`, `uninstall`),
//! [`doctor`] and [`verify`]. The binary's own side of each command is
//! `src/commands/<command>.rs`.

pub mod check;
pub mod diff;
pub mod doctor;
pub mod export;
pub mod install;
pub mod list;
pub mod render;
pub mod verify;
