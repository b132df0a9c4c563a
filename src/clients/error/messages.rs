//! [`RenderError`]'s messages: each says what cannot be rendered, for which client, and how
//! to fix it.

use std::fmt;

use super::RenderError;
use crate::clients::{Client, plan, root};

impl RenderError {
    /// The messages of a worktree with a parent that holds or may hold an environment file;
    /// `None` for another error.
    fn fmt_parent(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        Some(match self {
            RenderError::ParentEnvFile { client, file } => write!(
                f,
                "cannot isolate the {client} reviewer: {} exists in a parent directory of the \
                 worktree, and {client} loads the first environment file it finds from the \
                 worktree up into its own environment and every MCP server's, adding variables \
                 the launch plan did not set; remove it, or put the worktree where no parent \
                 directory has one",
                crate::text::ShownPath(file)
            ),
            RenderError::ParentInSandbox { client, dir, path } => write!(
                f,
                "cannot isolate the {client} reviewer: the worktree's parent directory {} lies \
                 in {path:?}, which the reviewer's sandbox lets it read, so an environment \
                 file written there after this check would reach its MCP servers; put the \
                 worktree outside the sandbox's paths (the system's directories, the launch \
                 and cache directories)",
                crate::text::ShownPath(dir)
            ),
            _ => return None,
        })
    }

    /// The messages of the door's refusals, of a worktree in another repository, of remote
    /// managed settings and of an unsafe cache; `None` for another error.
    fn fmt_door(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        Some(match self {
            RenderError::DoorUnsupported { client } => write!(
                f,
                "cannot put the {} reviewer behind the door: how its model API goes through \
                 the door is not measured; launch it without the door",
                client.display_name()
            ),
            RenderError::DoorUpstream {
                client,
                field,
                url,
                problem,
            } => {
                let (shown, hint) = match url.is_empty() {
                    true => (
                        String::new(),
                        "; hand it over as a credential, an http:// or https:// URL (the CLI: \
                         `--credential NAME`, its value from the environment)",
                    ),
                    false => (format!(" \"{}\"", url.escape_debug()), ""),
                };
                write!(
                    f,
                    "cannot put the {} reviewer behind the door: `{field}`{shown} {problem}{hint}",
                    client.display_name()
                )
            }
            RenderError::DoorCredential {
                client,
                name,
                problem,
            } => write!(
                f,
                "cannot put the {} reviewer behind the door: credential `{name}` {problem}; \
                 hand over the model key as one of {}",
                client.display_name(),
                client
                    .spec()
                    .door
                    .iter()
                    .flat_map(|d| {
                        let vars = d.keys.iter().map(|k| format!("`{}`", k.var));
                        let files = (d.key_files.iter())
                            .map(|k| format!("`{}` (its `{}`)", k.file, k.field));
                        vars.chain(files)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            RenderError::WorktreeInRepository { client, git } => write!(
                f,
                "cannot render the {client} launch: its worktree has no .git of its own and lies \
                 in the repository of {}: the client would run git with that repository's \
                 configuration and read its hooks, which no plan removes; give the reviewer a \
                 checkout of its own (`git worktree add`, a clone) or a directory outside any \
                 repository",
                git.display()
            ),
            RenderError::RemoteSettings {
                client,
                source,
                fix,
            } => write!(
                f,
                "cannot isolate the {client} reviewer: with this credential at the default API \
                 endpoint {client} fetches its remote managed settings from {source} when it \
                 starts, an administrator's policy the plan can neither see nor keep out; {fix}"
            ),
            RenderError::UnsafeCache {
                client,
                cache,
                path,
                tree,
                problem,
            } => crate::clients::cache::fmt_unsafe_cache(
                f,
                *client,
                cache,
                path,
                tree.as_deref(),
                problem,
            ),
            _ => return None,
        })
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::Expansion {
                client,
                server,
                field,
                expands,
            } => write!(
                f,
                "cannot render the {} launch: `{server}.{field}` contains `${{`, {expands}; \
                 remove `${{` from that value",
                client.display_name()
            ),
            RenderError::BlankAgentId => f.write_str(
                "the reviewer's agent id is blank, and the result channel needs it \
                 (KCAP_FLOW_AGENT_ID); give the launch its agent id",
            ),
            RenderError::ArgvUnpassable {
                client,
                prompt,
                bytes,
                nul,
            } => fmt_argv_unpassable(*client, *prompt, *bytes, *nul, f),
            RenderError::PromptIsCommand { .. } | RenderError::LaunchValueExpands { .. } => {
                self.fmt_launch_value(f).unwrap_or(Ok(()))
            }
            RenderError::DoorUnsupported { .. }
            | RenderError::DoorUpstream { .. }
            | RenderError::DoorCredential { .. } => self.fmt_door(f).unwrap_or(Ok(())),
            RenderError::ParentEnvFile { .. } | RenderError::ParentInSandbox { .. } => {
                self.fmt_parent(f).unwrap_or(Ok(()))
            }
            RenderError::NotUtf8 { field } => write!(
                f,
                "the reviewer's `{field}` is not UTF-8, and the client reads it as text; use a \
                 path of UTF-8 characters"
            ),
            RenderError::ForbiddenChar {
                field,
                value,
                found,
            } => fmt_forbidden_char(field, value, *found, f),
            RenderError::OptionLike { field } => write!(
                f,
                "the reviewer's `{field}` starts with `-`, so the client would read it as an \
                 option; use a value that does not start with `-`"
            ),
            RenderError::NeedsAbsolute { client, field } => fmt_needs_absolute(f, *client, field),
            RenderError::BlankCapabilityUrl => f.write_str(
                "brokered result delivery needs the result channel's capability URL \
                 (KCAP_FLOW_CAPABILITY_URL), but it is blank; give the launch its capability URL",
            ),
            RenderError::MissingReviewContextUrl => f.write_str(
                "a borrowed-snapshot review needs the review-context URL \
                 (KCAP_REVIEW_CONTEXT_URL of its review-context server), but none is set; \
                 give the launch its review-context URL",
            ),
            RenderError::Gated { client } => fmt_gated(*client, f),
            RenderError::UnverifiedIsolation { client } => fmt_unverified(*client, f),
            RenderError::UnaskedTools { client, tools } => fmt_unasked(*client, tools, f),
            RenderError::UnprovenVersion { .. } => crate::clients::version::fmt_unproven(self, f),
            RenderError::NeedsBrokeredDelivery { client } => fmt_needs_brokered(*client, f),
            RenderError::Vetoed(vetoes) => crate::clients::veto::fmt_vetoes(vetoes, f),
            RenderError::GitConfig(refusal) => refusal.fmt(f),
            RenderError::CredentialNotAccepted { client, name, kind } => {
                fmt_credential_not_accepted(*client, name, *kind, f)
            }
            RenderError::CredentialFile {
                client,
                name,
                problem,
            } => fmt_credential_file(*client, name, problem, f),
            RenderError::Unsupported { client, field } => write!(
                f,
                "the {client} launch has no setting for the reviewer's `{field}`, so it would be \
                 dropped; leave it out for {client}, or use the lenient policy to launch without it"
            ),
            RenderError::Managed {
                client,
                file,
                effect,
            } => fmt_managed(*client, file, effect, f),
            RenderError::RemoteSettings { .. }
            | RenderError::WorktreeInRepository { .. }
            | RenderError::UnsafeCache { .. } => self.fmt_door(f).unwrap_or(Ok(())),
            RenderError::UnreadableConfig {
                client,
                file,
                problem,
            } => write!(
                f,
                "cannot tell which MCP servers {} would start: {} {problem}; fix or remove it",
                client.display_name(),
                crate::text::ShownPath(file)
            ),
        }
    }
}

impl RenderError {
    /// The message of a launch value the client would not take as given:
    /// [`RenderError::PromptIsCommand`], [`RenderError::LaunchValueExpands`]; `None` for
    /// the other variants.
    fn fmt_launch_value(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        Some(match self {
            RenderError::PromptIsCommand {
                client,
                prefix,
                runs,
            } => write!(
                f,
                "cannot render the {} launch: the reviewer's prompt starts with `{prefix}`, \
                 {runs}; start the prompt with text (e.g. `Review: …`)",
                client.display_name()
            ),
            RenderError::LaunchValueExpands {
                client,
                field,
                marker,
                expands,
            } => write!(
                f,
                "cannot render the {} launch: its `{field}` contains `{marker}`, {expands}; \
                 give the {field} without `{marker}`",
                client.display_name()
            ),
            _ => return None,
        })
    }
}

/// [`RenderError::ArgvUnpassable`]'s message.
fn fmt_argv_unpassable(
    client: Client,
    prompt: bool,
    bytes: usize,
    nul: bool,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    let what = if prompt {
        "the reviewer's prompt"
    } else {
        "an argument"
    };
    write!(
        f,
        "cannot render the {client} launch: {client} takes {what} in argv, "
    )?;
    if nul {
        return f.write_str("and it holds a NUL byte, which no argument can pass; remove it");
    }
    write!(
        f,
        "and it is {bytes} bytes, more than the {} one argument holds (Linux's MAX_ARG_STRLEN, \
         its NUL included); shorten it, or review on a client that takes the prompt over ACP",
        plan::MAX_ARG_BYTES - 1
    )
}

/// [`RenderError::ForbiddenChar`]'s message.
fn fmt_forbidden_char(
    field: &str,
    value: &str,
    found: char,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(
        f,
        "the reviewer's `{field}` `{}` contains {}; give it without one",
        value.escape_debug(),
        crate::text::char_name(found)
    )
}

/// [`RenderError::UnaskedTools`]'s message.
fn fmt_unasked(client: Client, tools: &[String], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "the strict policy refuses the {client} launch: {client} runs its built-in tools {} \
         unasked (they write files, run commands, reach the web or start agents) and cannot \
         hide them from the reviewer's model; launch it under the lenient policy if the flow \
         allows them, or use a client that hides them (docs/launch-plan.md, \"Built-in tools \
         that run unasked\")",
        tools.join(", ")
    )
}

/// [`RenderError::Gated`]'s message.
fn fmt_gated(client: Client, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "cannot plan the {client} launch: it has no kcap server URL or no kcap binary, so every \
         MCP server, the result channel included, would be gated off and the reviewer could not \
         report; give both (`LaunchRequest::server`; --server-url and --kcap-bin), or plan with \
         the lenient policy, which launches it without MCP servers and warns"
    )
}

/// [`RenderError::UnverifiedIsolation`]'s message.
fn fmt_unverified(client: Client, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "cannot render the {client} launch: its isolation from the MCP servers the user or the \
         reviewed repository configured is not verified, so one of them (a flow-starting one \
         included) could start beside kcap's; opt in explicitly \
         (`LaunchRequest::allow_unverified_isolation`, or `PlanInputs::unverified_isolation = \
         UnverifiedIsolation::Allow`; --allow-unverified-isolation)"
    )
}

/// [`RenderError::CredentialFile`]'s message.
fn fmt_credential_file(
    client: Client,
    name: &str,
    problem: &str,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(
        f,
        "cannot render the {client} launch: credential file `{}` {problem}; hand over the file \
         as {client} stored it",
        name.escape_debug()
    )
}

/// [`RenderError::Managed`]'s message.
fn fmt_managed(
    client: Client,
    file: &std::path::Path,
    effect: &str,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    write!(
        f,
        "cannot isolate the {client} reviewer: {} exists, an administrator's file that {client} \
         reads whatever the launch's environment says, and that {effect}; remove it, or run \
         reviewers on a machine without it",
        crate::text::ShownPath(file)
    )
}

/// [`RenderError::CredentialNotAccepted`]'s message: what was refused, and everything the
/// client does accept, variables and files, so a refused name points at the accepted way
/// (Codex's API key is a file, not a variable).
fn fmt_credential_not_accepted(
    client: Client,
    name: &str,
    kind: root::CredentialKind,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    let kind = match kind {
        root::CredentialKind::Variable => "credential or provider variable",
        root::CredentialKind::File => "credential file",
    };
    let accepted = &client.spec().credentials;
    write!(
        f,
        "cannot render the {client} launch: `{}` is not a {kind} {client} accepts, or is given \
         twice; {client} accepts {accepted}",
        name.escape_debug(),
    )?;
    if accepted.env.is_empty() && accepted.files.is_empty() {
        Ok(())
    } else {
        f.write_str(", each at most once")
    }
}

/// [`RenderError::NeedsBrokeredDelivery`]'s message.
fn fmt_needs_brokered(client: Client, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
        f,
        "cannot render the {client} launch: it runs with a HOME of its own, so the result \
         channel needs brokered delivery; give the launch its capability URL \
         (`result_capability_url` in the launch command; --result-capability-url URL)"
    )
}

/// [`RenderError::NeedsAbsolute`]'s message.
fn fmt_needs_absolute(f: &mut fmt::Formatter<'_>, client: Client, field: &str) -> fmt::Result {
    let (what, flag) = match field {
        // A client not driven over ACP starts in the worktree.
        "worktree" if !client.spec().acp => (
            "the reviewer's worktree (the directory it starts in)",
            "--worktree",
        ),
        "worktree" => (
            "the reviewer's worktree (the ACP session's `cwd`)",
            "--worktree",
        ),
        "cache_dir" => ("a cache directory kept across launches", "--cache-dir"),
        _ => ("a per-launch directory", "--launch-dir"),
    };
    write!(
        f,
        "cannot render the {client} launch: it needs {what} as an absolute path; \
         give the launch its `{field}` ({flag} DIR)"
    )
}
