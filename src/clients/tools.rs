//! The client's own tools that run unasked (issue 34 item 3): each room lists the built-in
//! tools its reviewer's model is offered and that run without a question
//! ([`ClientSpec::builtins`](super::spec::ClientSpec::builtins), measured on the real client
//! from the tools of its first model request); the plan names them
//! ([`LaunchPlan::unasked`](super::plan::LaunchPlan::unasked)); under
//! [`Policy::Strict`] a room hides each one of a [`ToolKind`] with
//! effects ([`ToolKind::has_effects`]: writing files, running commands, the web, other
//! agents) from the model, or the plan is refused ([`RenderError::UnaskedTools`]).
//!
//! One rule, two users: [`hidden`] gives a room the names to hide, and [`unasked`] fills
//! the plan with the rest, or refuses a client that cannot hide them.

use serde::{Deserialize, Serialize};

use super::Client;
use super::RenderError;
use super::spec::ClientSpec;
use crate::Policy;

/// What a built-in tool does, as far as the flow's policy is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files (the worktree, the launch directory, the system's), lists or searches
    /// them, views images, reads the injected servers' resources.
    Read,
    /// Writes or edits files, or makes a worktree.
    Write,
    /// Runs a command, or reads or stops one it started.
    Run,
    /// Fetches a URL or searches the web.
    Web,
    /// Starts or messages another agent, or a task of the client's, with tools of its own.
    Agent,
    /// Everything else: the session's own state (a to-do list, a plan mode, a goal, a
    /// schedule), a question to a user nobody is, tool search, a skill's text.
    Other,
}

impl ToolKind {
    /// Whether a tool of this kind acts beyond reading: writing, running, the web, another
    /// agent. [`Policy::Strict`] lets none of them run unasked.
    pub const fn has_effects(self) -> bool {
        matches!(
            self,
            ToolKind::Write | ToolKind::Run | ToolKind::Web | ToolKind::Agent
        )
    }
}

/// A built-in tool of a client, as its room lists it ([`ClientSpec::builtins`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Builtin {
    /// The tool's name as the client offers it to the model (`Bash`, `run_shell_command`,
    /// `exec_command`); `*` for every built-in tool of a client whose tools are not listed.
    pub name: &'static str,
    /// What it does.
    pub kind: ToolKind,
}

impl Builtin {
    /// A built-in tool named `name` of kind `kind`.
    pub const fn new(name: &'static str, kind: ToolKind) -> Builtin {
        Builtin { name, kind }
    }
}

/// A built-in tool that runs unasked in a launch: one entry of
/// [`LaunchPlan::unasked`](super::plan::LaunchPlan::unasked), JSON `{"name":…,"kind":…}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnaskedTool {
    /// [`Builtin::name`].
    pub name: String,
    /// [`Builtin::kind`], in snake case (`read`, `write`, `run`, `web`, `agent`, `other`).
    pub kind: ToolKind,
}

/// The built-in tools of `spec` a room hides from the model under `policy`: under
/// [`Policy::Strict`] those with effects ([`ToolKind::has_effects`]), by name;
/// none under [`Policy::Lenient`].
pub fn hidden(spec: &ClientSpec, policy: Policy) -> impl Iterator<Item = &'static str> {
    let builtins: &'static [Builtin] = spec.builtins;
    builtins
        .iter()
        .filter(move |b| policy == Policy::Strict && b.kind.has_effects())
        .map(|b| b.name)
}

/// The plan's [`LaunchPlan::unasked`](super::plan::LaunchPlan::unasked) for `client` under
/// `policy`: its built-in tools, by name, without those it hides
/// ([`hidden`]).
///
/// # Errors
/// [`RenderError::UnaskedTools`] under [`Policy::Strict`] when the client has a built-in tool
/// with effects and cannot hide it ([`ClientSpec::hides_builtins`] false).
pub fn unasked(client: Client, policy: Policy) -> Result<Vec<UnaskedTool>, RenderError> {
    let spec = client.spec();
    let refused = refused(spec, policy);
    if !refused.is_empty() {
        return Err(RenderError::UnaskedTools {
            client,
            tools: refused,
        });
    }
    let hide: Vec<&str> = hidden(spec, policy).collect();
    Ok(spec
        .builtins
        .iter()
        .filter(|b| !hide.contains(&b.name))
        .map(|b| UnaskedTool {
            name: b.name.to_owned(),
            kind: b.kind,
        })
        .collect())
}

/// The built-in tools the strict policy refuses for `spec`: those [`hidden`] would hide,
/// when the client cannot hide them; empty otherwise.
fn refused(spec: &ClientSpec, policy: Policy) -> Vec<String> {
    if spec.hides_builtins {
        return Vec::new();
    }
    hidden(spec, policy).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lenient_policy_lists_every_builtin_and_hides_none() {
        for client in Client::ALL {
            let spec = client.spec();
            let plan = unasked(client, Policy::Lenient).unwrap();
            let names: Vec<&str> = plan.iter().map(|t| t.name.as_str()).collect();
            let listed: Vec<&str> = spec.builtins.iter().map(|b| b.name).collect();
            assert_eq!(names, listed, "{client}");
            assert_eq!(hidden(spec, Policy::Lenient).count(), 0, "{client}");
        }
    }

    #[test]
    fn the_strict_policy_leaves_only_tools_without_effects_or_refuses() {
        for client in Client::ALL {
            let effects: Vec<&str> = client
                .spec()
                .builtins
                .iter()
                .filter(|b| b.kind.has_effects())
                .map(|b| b.name)
                .collect();
            match unasked(client, Policy::Strict) {
                Ok(plan) => {
                    assert!(plan.iter().all(|t| !t.kind.has_effects()), "{client}");
                    let hidden: Vec<&str> = hidden(client.spec(), Policy::Strict).collect();
                    assert_eq!(hidden, effects, "{client}");
                }
                Err(RenderError::UnaskedTools { client: c, tools }) => {
                    assert_eq!(c, client);
                    assert!(!client.spec().hides_builtins, "{client}");
                    assert_eq!(tools, effects, "{client}");
                }
                Err(other) => panic!("{client}: {other}"),
            }
        }
    }

    #[test]
    fn every_room_lists_its_builtins_once_each_in_ascii_order() {
        for client in Client::ALL {
            let names: Vec<&str> = client.spec().builtins.iter().map(|b| b.name).collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(names, sorted, "{client}");
        }
    }

    #[test]
    fn every_kind_with_effects_is_refused_and_the_others_are_not() {
        use ToolKind::*;
        let effects: Vec<ToolKind> = [Read, Write, Run, Web, Agent, Other]
            .into_iter()
            .filter(|k| k.has_effects())
            .collect();
        assert_eq!(effects, [Write, Run, Web, Agent]);
    }
}
