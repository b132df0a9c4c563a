//! The executor's check of what the kernel must pass to the client: every argv element and
//! the plan's environment (names, values, sizes), before anything is created.

use std::collections::BTreeSet;

use super::error::ExecError;
use crate::clients::plan::LaunchPlan;

pub use crate::clients::plan::MAX_ARG_BYTES;

/// Refuses an argv element the kernel cannot pass: a NUL byte, or more than
/// [`MAX_ARG_BYTES`].
pub(crate) fn check_argv(plan: &LaunchPlan) -> Result<(), ExecError> {
    for (index, arg) in plan.argv.iter().enumerate() {
        let problem = if arg.contains('\0') {
            "holds a NUL byte, which no argument can pass".to_owned()
        } else if arg.len() + 1 > MAX_ARG_BYTES {
            format!(
                "is {} bytes, more than the {MAX_ARG_BYTES} the kernel passes as one argument \
                 (MAX_ARG_STRLEN): shorten it (a long prompt goes to an ACP client in \
                 session/prompt instead)",
                arg.len()
            )
        } else {
            continue;
        };
        return Err(ExecError::BadArg { index, problem });
    }
    Ok(())
}

pub(crate) fn check_env(plan: &LaunchPlan) -> Result<(), ExecError> {
    let bad = |name: &str, problem| ExecError::BadEnv {
        name: name.to_owned(),
        problem,
    };
    let name_problem = |name: &str| {
        if name.is_empty() {
            Some("has an empty name")
        } else if name.contains('=') {
            Some("has a `=` in its name")
        } else if name.contains('\0') {
            Some("has a NUL byte in its name")
        } else {
            None
        }
    };
    let mut names = BTreeSet::new();
    for var in &plan.env {
        if let Some(problem) = name_problem(&var.name) {
            return Err(bad(&var.name, problem));
        }
        if var.value.contains('\0') {
            return Err(bad(&var.name, "has a NUL byte in its value"));
        }
        if var.name.len() + var.value.len() + 2 > MAX_ARG_BYTES {
            return Err(bad(
                &var.name,
                "is longer than the 128 KiB the kernel passes as one variable (MAX_ARG_STRLEN)",
            ));
        }
        if !names.insert(var.name.as_str()) {
            return Err(bad(&var.name, "is set twice in env"));
        }
    }
    for name in &plan.env_inherit {
        if let Some(problem) = name_problem(name) {
            return Err(bad(name, problem));
        }
        if names.contains(name.as_str()) {
            return Err(bad(name, "is both in env and in env_inherit"));
        }
    }
    Ok(())
}
