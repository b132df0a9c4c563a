//! The offline tests: one libtest binary (`cargo test --test suite`), one module per subject.
//! The tests that run the real clients are in `tests/clients/`; the helpers both share are
//! `tests/common/`. A module that needs a feature is compiled with it only.

#[path = "../common/mod.rs"]
mod common;
/// The synthetic registry of the scaling benchmarks (`examples/gen_registry.rs`).
#[cfg(feature = "validate")]
#[path = "../../examples/gen_registry.rs"]
mod synthetic;

mod alloc;
mod build_script;
mod check_large;
mod claude_preflight;
mod cli_cases;
mod cli_check;
mod cli_credentials;
mod cli_diff;
mod cli_drift;
mod cli_drift_clients;
mod cli_export;
mod cli_fresh_user;
mod cli_inspect;
mod cli_io;
mod cli_plan;
mod cli_render;
#[cfg(feature = "cli")]
mod cli_unproven;
#[cfg(feature = "cli")]
mod cli_verify;
mod client_docs;
#[cfg(feature = "cli")]
mod client_list;
mod copilot_cache;
mod doctor;
mod doctor_project;
mod gen_registry;
mod git_config;
mod hostile_paths;
mod hygiene;
mod install;
mod json_schema;
#[cfg(feature = "launch")]
mod launch;
mod launch_api;
#[cfg(feature = "launch")]
mod launch_dirs;
#[cfg(feature = "launch")]
mod launch_door;
#[cfg(feature = "launch")]
mod launch_door_bounds;
#[cfg(feature = "launch")]
mod launch_door_budget;
#[cfg(feature = "launch")]
mod launch_door_caps;
#[cfg(feature = "launch")]
mod launch_door_tls;
#[cfg(feature = "cli")]
mod launch_door_unprivileged;
#[cfg(feature = "launch")]
mod launch_faults;
#[cfg(feature = "launch")]
mod launch_fd_limit;
#[cfg(feature = "cli")]
mod launch_guard_sweep;
#[cfg(feature = "cli")]
mod launch_memory;
#[cfg(feature = "launch")]
mod launch_other_user;
#[cfg(feature = "launch")]
mod launch_outlive;
#[cfg(feature = "cli")]
mod launch_output;
#[cfg(feature = "launch")]
mod launch_pr_config;
#[cfg(feature = "launch")]
mod launch_sandbox;
#[cfg(feature = "launch")]
mod launch_sandbox_install;
#[cfg(feature = "launch")]
mod launch_sandbox_others;
#[cfg(feature = "launch")]
mod launch_sandbox_reach;
#[cfg(feature = "launch")]
mod launch_servers_ready;
#[cfg(feature = "cli")]
mod launch_tasks;
#[cfg(feature = "launch")]
mod launch_typed_prompt;
mod layers;
mod lookup;
mod lookup_equivalence;
mod plan_door;
mod plan_golden;
mod plan_properties;
mod prompt_chars;
mod readme_embed;
mod render_escaping;
mod render_golden;
mod render_properties;
mod repo_files;
mod rules;
mod wire;
