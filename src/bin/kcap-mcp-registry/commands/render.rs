//! `render <client>`: the reviewer launch of one client, as argv or as the whole plan; and
//! [`RenderFor`], the `<client>` subcommands `render` and `launch` share, built from each
//! client's [`ClientSpec`](kcap_mcp_registry::clients::spec::ClientSpec): the generic flags
//! ([`RenderArgs`]), `--launch-id` and `--allow-unverified-isolation` where the client's
//! launch takes them, and the hidden flags of earlier releases its room still accepts.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches, ValueEnum};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::dispatch::UnverifiedIsolation;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchId, LaunchPlan};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials};
use kcap_mcp_registry::clients::version::ClientVersion;
use kcap_mcp_registry::ops;
use kcap_mcp_registry::ops::render::{ArgvFormat, LaunchOverrides};
use kcap_mcp_registry::{LaunchContext, LaunchError, RenderError};

use super::{CliError, RegistrySource, policy, registry};

/// A client and its `render` flags: `render <client> …`, `launch <client> …`.
pub(crate) struct RenderFor {
    /// The client.
    pub(crate) client: Client,
    /// The flags every client takes.
    pub(crate) common: RenderArgs,
    /// `--launch-id HEX` ([`ClientSpec::uses_launch_id`] clients).
    ///
    /// [`ClientSpec::uses_launch_id`]: kcap_mcp_registry::clients::spec::ClientSpec::uses_launch_id
    launch_id: Option<String>,
    /// `--allow-unverified-isolation` ([`ClientSpec::unverified_isolation`] clients).
    ///
    /// [`ClientSpec::unverified_isolation`]: kcap_mcp_registry::clients::spec::ClientSpec::unverified_isolation
    allow_unverified_isolation: bool,
    /// The deprecated flags given, as `--name`.
    deprecated: Vec<String>,
    /// The client version the launch runs on: `render --client-version V`, or what
    /// `launch --strict` read from `--client-bin` (and whether `verify` passed for it).
    pub(crate) client_version: Option<ClientVersion>,
}

/// `--launch-id`'s argument id.
const LAUNCH_ID: &str = "launch_id";
/// `--client-version`'s argument id (`render` only: `launch` reads it from the binary).
const CLIENT_VERSION: &str = "client_version";
/// `--allow-unverified-isolation`'s argument id.
const ALLOW_UNVERIFIED: &str = "allow_unverified_isolation";

/// The `<client>` subcommand of `cmd_name` (`render`, `launch`) for `client`.
fn client_command(client: Client, cmd_name: &str) -> clap::Command {
    let spec = client.spec();
    let cli = spec.cli;
    let mut usage = cli.render_usage.replace(
        "{cmd}",
        &format!("kcap-mcp-registry {cmd_name} {}", spec.name),
    );
    let mut after_help = cli.render_after_help.to_owned();
    if cmd_name == "launch" {
        // The room's example is a `render`: the same launch, carried out.
        usage = usage.replace(" [OPTIONS]", " --client-bin <PATH> [OPTIONS]");
        let render = format!("kcap-mcp-registry render {}", spec.name);
        after_help = after_help
            .lines()
            .map(|line| match line.find(&render) {
                Some(at) => {
                    let example = line[at + render.len()..]
                        .split(" --format ")
                        .next()
                        .unwrap_or_default();
                    format!(
                        "{}kcap-mcp-registry launch {}{example} --client-bin {}",
                        &line[..at],
                        spec.name,
                        spec.binary
                    )
                }
                None => line.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    let mut cmd = RenderArgs::augment_args(
        clap::Command::new(spec.name)
            .about(cli.render_about)
            .override_usage(usage)
            .after_help(format!("{}\n\n{after_help}", credentials_help(client))),
    );
    if spec.uses_launch_id {
        cmd = cmd.arg(
            Arg::new(LAUNCH_ID)
                .long("launch-id")
                .value_name("HEX")
                .help(
                    "Fix the per-launch random suffix of server names (16 hex digits), for \
                     reproducible output; absent: drawn from the OS random source",
                ),
        );
    }
    if cmd_name == "render" {
        cmd = cmd.arg(
            Arg::new(CLIENT_VERSION)
                .long("client-version")
                .value_name("VERSION")
                .help(
                    "The client version the launch will run on (its `--version`): with \
                     --strict, one this crate's tests do not prove is refused (`launch` reads \
                     it from --client-bin, and accepts a version `verify` passed for there)",
                ),
        );
    }
    if spec.unverified_isolation {
        cmd = cmd.arg(
            Arg::new(ALLOW_UNVERIFIED)
                .long("allow-unverified-isolation")
                .action(ArgAction::SetTrue)
                .help(format!(
                    "Render {} even though its isolation from the user's MCP servers is not \
                     verified",
                    spec.display_name
                )),
        );
    }
    for flag in cli.deprecated_flags {
        let arg = Arg::new(flag.long).long(flag.long).hide(true);
        cmd = cmd.arg(match flag.value_name {
            Some(name) => arg
                .value_name(name)
                .value_parser(clap::value_parser!(PathBuf)),
            None => arg.action(ArgAction::SetTrue),
        });
    }
    cmd
}

/// The `--help` section listing what `client` accepts as `--credential` and
/// `--credential-file`, from its room's [`ClientSpec::credentials`].
///
/// [`ClientSpec::credentials`]: kcap_mcp_registry::clients::spec::ClientSpec::credentials
fn credentials_help(client: Client) -> String {
    let spec = client.spec();
    let accepted = &spec.credentials;
    if accepted.env.is_empty() && accepted.files.is_empty() {
        return format!(
            "Credentials: {} takes none (--credential and --credential-file are refused).",
            spec.display_name
        );
    }
    let mut text = format!(
        "Credentials {} accepts, each at most once (any other is refused):",
        spec.display_name
    );
    for name in accepted.env {
        text.push_str(&format!("\n  --credential {name}"));
    }
    for file in accepted.files {
        text.push_str(&format!(
            "\n  --credential-file {}=PATH  keeps only {}",
            file.name, file.kept
        ));
    }
    text
}

impl RenderFor {
    /// Every client's subcommand, for `cmd_name`.
    pub(crate) fn augment(cmd: clap::Command, cmd_name: &str) -> clap::Command {
        Client::ALL
            .into_iter()
            .fold(cmd, |cmd, c| cmd.subcommand(client_command(c, cmd_name)))
    }
}

impl FromArgMatches for RenderFor {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let missing = || clap::Error::new(clap::error::ErrorKind::MissingSubcommand);
        let (name, sub) = matches.subcommand().ok_or_else(missing)?;
        let client = Client::from_name(name).ok_or_else(missing)?;
        let spec = client.spec();
        let deprecated = spec
            .cli
            .deprecated_flags
            .iter()
            .filter(|f| match f.value_name {
                Some(_) => sub.contains_id(f.long) && sub.get_raw(f.long).is_some(),
                None => sub.get_flag(f.long),
            })
            .map(|f| format!("--{}", f.long))
            .collect();
        Ok(RenderFor {
            client,
            common: RenderArgs::from_arg_matches(sub)?,
            launch_id: if spec.uses_launch_id {
                sub.get_one::<String>(LAUNCH_ID).cloned()
            } else {
                None
            },
            allow_unverified_isolation: spec.unverified_isolation && sub.get_flag(ALLOW_UNVERIFIED),
            deprecated,
            client_version: sub
                .try_get_one::<String>(CLIENT_VERSION)
                .ok()
                .flatten()
                .map(ClientVersion::new),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Subcommand for RenderFor {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        Self::augment(cmd, "render")
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment(cmd, "render")
    }

    fn has_subcommand(name: &str) -> bool {
        Client::from_name(name).is_some()
    }
}

/// [`RenderFor`] as `launch <client>` takes it (its usage lines say `launch`).
pub(crate) struct LaunchFor(pub(crate) RenderFor);

impl FromArgMatches for LaunchFor {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        RenderFor::from_arg_matches(matches).map(LaunchFor)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl clap::Subcommand for LaunchFor {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        RenderFor::augment(cmd, "launch")
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        RenderFor::augment(cmd, "launch")
    }

    fn has_subcommand(name: &str) -> bool {
        RenderFor::has_subcommand(name)
    }
}

/// `render <client>`: prints the argv, or the plan, of the launch.
pub(crate) fn render(r: RenderFor) -> Result<ExitCode, CliError> {
    let (plan, _, format) = render_plan(r)?;
    let text = match format {
        RenderFormat::Lines => ops::render::format_argv(&plan.argv, ArgvFormat::Lines),
        RenderFormat::Json => ops::render::format_argv(&plan.argv, ArgvFormat::Json),
        RenderFormat::Shell => ops::render::format_argv(&plan.argv, ArgvFormat::Shell),
        RenderFormat::Plan => Ok(plan.to_json()),
    }
    .map_err(CliError::found)?;
    if format != RenderFormat::Plan
        && let Some(typed) = &plan.typed_prompt
    {
        errln!(
            "note: the prompt is not in this argv: {} would send an argv prompt before its MCP \
             servers listed their tools; `launch` types it once {} says they have (the plan's \
             `typed_prompt`, `--format plan`)",
            plan.client.spec().display_name,
            typed.log
        );
    }
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// The plan `render` prints (and `launch` carries out), its launch context and the output
/// format asked for; warnings are printed. The plan is the one call's
/// ([`Client::plan_resolved`]), against the registry `--registry` names.
pub(crate) fn render_plan(
    r: RenderFor,
) -> Result<(LaunchPlan, LaunchContext, RenderFormat), CliError> {
    let RenderFor {
        client,
        common,
        launch_id: hex,
        allow_unverified_isolation,
        deprecated,
        client_version,
    } = r;
    if !deprecated.is_empty() {
        errln!(
            "warning: {} ignored (deprecated, to be removed): {}",
            deprecated.join(", "),
            client.spec().cli.deprecated_because
        );
    }
    let launch = common
        .launch_json
        .as_deref()
        .map(|path| ops::render::read_launch_command(path, common.agent_id.as_deref()))
        .transpose()
        .map_err(CliError::usage)
        .map_err(super::in_flag("--launch-json"))?;
    let overrides = LaunchOverrides {
        server_url: common.server_url,
        kcap_bin: common.kcap_bin,
        agent_id: common.agent_id,
        allowlist: common.allowlist,
        model: common.model,
        effort: common.effort,
        prompt: common.prompt,
        worktree: common.worktree,
        result_capability_url: common.result_capability_url,
        review_context_url: common.review_context_url,
        launch_dir: common.launch_dir,
        credentials: credentials(&common.credentials, &common.credential_files)?,
        cache_dir: common.cache_dir,
        door: common.door,
    };
    ops::render::check_launch_values(launch.as_ref(), &overrides).map_err(CliError::usage)?;
    if common.source.registry.is_none() {
        ops::render::refuse_bootstrap_build().map_err(CliError::found)?;
    }
    let registry = registry(common.source.registry.as_deref())?;
    let ctx = ops::render::launch_context(launch, overrides);
    let mut inputs = PlanInputs::new(policy(common.strict));
    inputs.launch_id = hex
        .map(|hex| {
            LaunchId::from_hex(&hex).map_err(|e| CliError::usage(format!("--launch-id: {e}")))
        })
        .transpose()?;
    inputs.client_version = client_version;
    inputs.unverified_isolation = if allow_unverified_isolation {
        UnverifiedIsolation::Allow
    } else {
        UnverifiedIsolation::Refuse
    };
    let resolution = ctx
        .resolve_in(registry, inputs.policy)
        .map_err(CliError::found)?;
    let skipped =
        ops::render::shown_skip_warnings(&ctx, &resolution, ops::render::SHOWN_SKIP_WARNINGS);
    let planned = client
        .plan_resolved(&ctx, &resolution, &inputs)
        .map_err(|e| match e {
            // A relative or missing --worktree/--launch-dir is how the command was called.
            LaunchError::Render(e @ RenderError::NeedsAbsolute { .. }) => CliError::usage(e),
            e => CliError::found(e),
        });
    for warning in &skipped {
        errln!("warning: {warning}");
    }
    let planned = planned?;
    for warning in &planned.warnings {
        errln!("warning: {warning}");
    }
    Ok((planned.plan, ctx, common.format))
}

/// The `--credential` variables with their values from this process's environment, and the
/// `--credential-file` files as read (bounded: [`ops::render::read_credential_file`]); which
/// the client accepts, and what of a file it keeps, is the plan's to decide.
fn credentials(names: &[String], files: &[(String, PathBuf)]) -> Result<Credentials, CliError> {
    let mut credentials = Credentials::default();
    for name in names {
        let value = std::env::var(name).map_err(|_| {
            CliError::usage(match name.split_once('=') {
                // A value on the command line would be in every process listing.
                Some((var, _)) => format!(
                    "--credential {}: takes a variable's name, not NAME=VALUE (a value \
                     given here would show in the process list); its value is read from \
                     this environment: `export {}=…` and give `--credential {}`",
                    var.escape_debug(),
                    var.escape_debug(),
                    var.escape_debug()
                ),
                None => format!(
                    "--credential {}: not set in this environment (or not UTF-8); the flag \
                     takes a variable's name and reads its value from this environment: \
                     `export {}=…` first, or leave the flag out",
                    name.escape_debug(),
                    name.escape_debug()
                ),
            })
        })?;
        credentials.env.push(EnvVar::new(name.clone(), value));
    }
    for (name, path) in files {
        let contents = ops::render::read_credential_file(path).map_err(|e| {
            CliError::usage(format!(
                "--credential-file {}: {}",
                name.escape_debug(),
                super::chain(&e)
            ))
        })?;
        credentials.files.push(CredentialFile {
            name: name.clone(),
            contents,
        });
    }
    Ok(credentials)
}

/// `--credential-file`'s `NAME=PATH`, split at the first `=`.
fn credential_file_arg(arg: &str) -> Result<(String, PathBuf), String> {
    match arg.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok((name.to_owned(), PathBuf::from(path)))
        }
        _ => Err(
            "expected NAME=PATH, the file's name as the client's list gives it and \
                  where to read it: auth.json=$HOME/.codex/auth.json (`render <client> --help` \
                  lists the names)"
                .into(),
        ),
    }
}

#[derive(Args)]
pub(crate) struct RenderArgs {
    /// The reviewer's agent id (required unless --launch-json gives one).
    #[arg(
        long,
        value_name = "ID",
        required_unless_present = "launch_json",
        allow_hyphen_values = true
    )]
    pub(crate) agent_id: Option<String>,
    /// The kcap server URL (absent: every MCP server is gated off).
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    pub(crate) server_url: Option<String>,
    /// The kcap binary, the command of every MCP server (absent: gated off).
    #[arg(
        long,
        value_name = "PATH",
        allow_hyphen_values = true,
        alias = "capacitor-path"
    )]
    pub(crate) kcap_bin: Option<String>,
    /// MCP allowlist entries, comma-separated (repeatable).
    #[arg(
        long,
        value_name = "A,B,…",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub(crate) allowlist: Option<Vec<String>>,
    /// A launch command JSON (`agent_id`, `mcp_allowlist`, `model`, `effort`, `prompt`,
    /// `result_capability_url`, `borrowed_snapshot`, `review_context_url`; other fields
    /// ignored), `-` for stdin. Flags given as well override its fields.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) launch_json: Option<PathBuf>,
    /// Use the strict policy: refuse unknown, flow-starting and non-read-only entries, and
    /// hide the client's built-in tools that write, run commands, reach the web or start
    /// agents (or refuse a client that cannot). Without it the command line is lenient; the
    /// library's `LaunchRequest` is strict by default.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Model name.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) model: Option<String>,
    /// Reasoning effort.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) effort: Option<String>,
    /// The reviewer's prompt (Claude Code's is typed once its MCP servers listed their tools, not
    /// passed in its argv: the plan's `typed_prompt`).
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) prompt: Option<String>,
    /// The worktree the reviewer runs in.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub(crate) worktree: Option<String>,
    /// The per-launch directory the daemon creates (absolute): the client's root, from which
    /// it reads its user-level configuration.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub(crate) launch_dir: Option<String>,
    /// Hand the reviewer this credential or provider variable, with its value from this
    /// environment (repeatable; the help's Credentials section lists each client's).
    #[arg(long = "credential", value_name = "NAME")]
    pub(crate) credentials: Vec<String>,
    /// Hand the reviewer this credential file, read from PATH, by its NAME in the client's
    /// list (`auth.json`); only its credential fields are kept (repeatable; the help's
    /// Credentials section lists each client's).
    #[arg(long = "credential-file", value_name = "NAME=PATH", value_parser = credential_file_arg)]
    pub(crate) credential_files: Vec<(String, PathBuf)>,
    /// A directory kept across launches for the client's caches (absolute): its
    /// XDG_CACHE_HOME instead of the per-launch one.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub(crate) cache_dir: Option<String>,
    /// Put the reviewer behind the door: a network of its own whose only way out is the
    /// endpoints the plan names (its model API, the kcap server), with the model key kept
    /// outside (docs/network.md). Needs the model API's base URL as a --credential
    /// (http:// or https://) and a client whose model API is measured through the door.
    #[arg(long)]
    pub(crate) door: bool,
    /// Brokered result delivery: the result channel gets this capability URL
    /// (KCAP_FLOW_CAPABILITY_URL) instead of KCAP_URL.
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    pub(crate) result_capability_url: Option<String>,
    /// A borrowed-snapshot review: inject the review-context server with this URL
    /// (KCAP_REVIEW_CONTEXT_URL).
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    pub(crate) review_context_url: Option<String>,
    /// Output: one argument per line (for reading: control and invisible characters are
    /// shown as escapes), a JSON array, one POSIX-quoted shell line, or the whole launch
    /// plan as JSON (schema in docs/launch-plan.md; json, shell and plan are exact).
    #[arg(long, value_enum, default_value_t = RenderFormat::Lines)]
    pub(crate) format: RenderFormat,
    #[command(flatten)]
    pub(crate) source: RegistrySource,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RenderFormat {
    Lines,
    Json,
    Shell,
    Plan,
}
