//! `render <client>`: the reviewer launch, as an operator previews it.
//! Reads a launch command JSON ([`read_launch_command`]), builds the [`LaunchContext`] with
//! command-line values applied
//! ([`launch_context`]), names every skipped allowlist entry ([`skip_warnings`]), and prints
//! the argv in one of three forms ([`format_argv`]).
//!
//! (Named `preview`, not `launch`: the daemon's launch types are [`crate::LaunchCommand`],
//! [`LaunchContext`] and [`crate::LaunchError`].)

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::allowlist::{Resolution, SkipKind};
use crate::clients::{LaunchContext, ResultDelivery, Snapshot};
use crate::ops::list::suggest_id;
use crate::text::{ShownPath, is_forbidden_char, printable};
use crate::wire::LaunchCommand;

/// The launch values given on the command line; each one that is set overrides the launch
/// command's field of the same meaning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchOverrides {
    /// `--server-url`.
    pub server_url: Option<String>,
    /// `--kcap-bin` (the kcap binary).
    pub kcap_bin: Option<String>,
    /// `--agent-id`.
    pub agent_id: Option<String>,
    /// `--allowlist`, every comma-separated entry of every occurrence, in order.
    pub allowlist: Option<Vec<String>>,
    /// `--model`.
    pub model: Option<String>,
    /// `--effort`.
    pub effort: Option<String>,
    /// `--prompt`.
    pub prompt: Option<String>,
    /// `--worktree`.
    pub worktree: Option<String>,
    /// `--result-capability-url`: brokered result delivery.
    pub result_capability_url: Option<String>,
    /// `--review-context-url`: a borrowed snapshot with this review-context URL.
    pub review_context_url: Option<String>,
    /// `--launch-dir`.
    pub launch_dir: Option<String>,
    /// `--credential NAME`, each with its value from the invoking environment.
    pub credentials: crate::clients::root::Credentials,
    /// `--cache-dir`.
    pub cache_dir: Option<String>,
    /// `--door`.
    pub door: bool,
}

/// The [`LaunchContext`] for `launch` (the launch command JSON, if given) with `overrides`
/// applied: a value given on the command line replaces the launch command's.
pub fn launch_context(launch: Option<LaunchCommand>, overrides: LaunchOverrides) -> LaunchContext {
    let launch = launch.unwrap_or_default();
    LaunchContext {
        server_url: overrides.server_url,
        kcap_bin: overrides.kcap_bin,
        agent_id: overrides.agent_id.unwrap_or(launch.agent_id),
        mcp_allowlist: overrides
            .allowlist
            .map(|a| a.into_iter().map(Some).collect())
            .or(launch.mcp_allowlist),
        model: overrides.model.or(launch.model),
        effort: overrides.effort.or(launch.effort),
        prompt: overrides.prompt.or(launch.prompt),
        worktree: overrides.worktree,
        launch_dir: overrides.launch_dir,
        result_delivery: ResultDelivery::from_capability_url(
            overrides
                .result_capability_url
                .or(launch.result_capability_url),
        ),
        snapshot: Snapshot::from_launch(
            launch.borrowed_snapshot,
            overrides.review_context_url.or(launch.review_context_url),
        ),
        credentials: overrides.credentials,
        cache_dir: overrides.cache_dir,
        door: overrides.door,
    }
}

/// A command-line or launch-JSON value refused before anything is rendered or exported.
///
/// `Display` names the input (`--kcap-bin`, or `agent_id` of the launch JSON), shows the
/// value escaped ([`printable`]) and says how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ValueError {
    /// The flag (`--server-url`) or launch JSON field (`` `agent_id` of the launch JSON ``).
    pub input: String,
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub problem: ValueProblem,
}

/// What is wrong with a [`ValueError`]'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueProblem {
    /// Empty, or whitespace only, where a value is required.
    Blank,
    /// It holds this control or invisible character ([`crate::text::is_forbidden_char`]):
    /// no binary path, URL or agent id needs one, and each would reach a registration
    /// file, a launch argv or a terminal.
    ForbiddenChar(char),
    /// A directory that must be absolute (`--worktree`, `--launch-dir`, `--cache-dir`) is
    /// relative: the plan points the client there wherever it starts.
    Relative,
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (input, value) = (&self.input, printable(&self.value));
        match self.problem {
            ValueProblem::Blank if self.value.is_empty() => {
                write!(f, "{input} is empty; give a value, or leave it out")
            }
            ValueProblem::Blank => write!(
                f,
                "{input} `{value}` is only whitespace; give a value, or leave it out"
            ),
            ValueProblem::ForbiddenChar(c) => write!(
                f,
                "{input} `{value}` contains {}; give it without one",
                crate::text::char_name(c)
            ),
            ValueProblem::Relative => write!(
                f,
                "{input} `{value}` is a relative path; give it as an absolute path, e.g. \
                 {input} \"$PWD/{value}\""
            ),
        }
    }
}

impl std::error::Error for ValueError {}

/// Refuses `value` of `input` (a flag name, or a launch JSON field as `ValueError::input`
/// shows it) when it holds a control or invisible character, or, unless `blank_ok`, when it
/// is blank.
///
/// # Errors
/// [`ValueError`].
///
/// ```
/// use kcap_mcp_registry::ops::render::check_value;
///
/// assert!(check_value("--kcap-bin", "/usr/bin/kcap", false).is_ok());
/// assert_eq!(
///     check_value("--kcap-bin", " ", false).unwrap_err().to_string(),
///     "--kcap-bin ` ` is only whitespace; give a value, or leave it out"
/// );
/// assert_eq!(
///     check_value("--server-url", "http://h/\u{1b}[2J", true).unwrap_err().to_string(),
///     r"--server-url `http://h/\u{1b}[2J` contains an escape character (U+001B); give it without one"
/// );
/// ```
pub fn check_value(input: &str, value: &str, blank_ok: bool) -> Result<(), ValueError> {
    let problem = if let Some(c) = value.chars().find(|&c| is_forbidden_char(c)) {
        ValueProblem::ForbiddenChar(c)
    } else if !blank_ok && value.trim().is_empty() {
        ValueProblem::Blank
    } else {
        return Ok(());
    };
    Err(ValueError {
        input: input.to_string(),
        value: value.to_string(),
        problem,
    })
}

/// Refuses, as [`check_value`] does (blank values are left to the renderer, which gates or
/// refuses them), a control or invisible character in the values that name the reviewer and
/// the kcap server it reports to: `--server-url`, `--kcap-bin`, and the agent id, result
/// capability URL and review-context URL, each from its flag when given, else from the
/// launch JSON; and the directories `--worktree`, `--launch-dir` and `--cache-dir`, which
/// must also be absolute ([`ValueProblem::Relative`], echoing the value given).
///
/// # Errors
/// [`ValueError`] for the first such value.
pub fn check_launch_values(
    launch: Option<&LaunchCommand>,
    overrides: &LaunchOverrides,
) -> Result<(), ValueError> {
    let flag_or_field = |flag: &'static str,
                         given: &Option<String>,
                         field: &'static str,
                         json: Option<&str>| {
        match (given, json) {
            (Some(v), _) => check_value(flag, v, true),
            (None, Some(v)) => check_value(&format!("`{field}` of the launch JSON"), v, true),
            (None, None) => Ok(()),
        }
    };
    for (flag, value) in [
        ("--server-url", &overrides.server_url),
        ("--kcap-bin", &overrides.kcap_bin),
    ] {
        flag_or_field(flag, value, "", None)?;
    }
    flag_or_field(
        "--agent-id",
        &overrides.agent_id,
        "agent_id",
        launch.map(|l| l.agent_id.as_str()),
    )?;
    flag_or_field(
        "--result-capability-url",
        &overrides.result_capability_url,
        "result_capability_url",
        launch.and_then(|l| l.result_capability_url.as_deref()),
    )?;
    flag_or_field(
        "--review-context-url",
        &overrides.review_context_url,
        "review_context_url",
        launch.and_then(|l| l.review_context_url.as_deref()),
    )?;
    for (flag, dir) in [
        ("--worktree", &overrides.worktree),
        ("--launch-dir", &overrides.launch_dir),
        ("--cache-dir", &overrides.cache_dir),
    ] {
        flag_or_field(flag, dir, "", None)?;
        // A blank one is left to the renderer, which names what the client needs it for.
        if let Some(value) = dir.as_ref().filter(|v| !v.trim().is_empty())
            && !std::path::Path::new(value).is_absolute()
        {
            return Err(ValueError {
                input: flag.to_owned(),
                value: value.clone(),
                problem: ValueProblem::Relative,
            });
        }
    }
    Ok(())
}

/// One warning line per allowlist entry `resolution` skipped, naming the entry (escaped,
/// counted from 1) and the agent id (escaped): `agent "a1": MCP allowlist entry 1
/// "kcap-flows" skipped: can start flows (recursion guard)`; an unknown name gets a
/// did-you-mean suggestion ([`suggest_id`]). Every skipped entry has its line; for a person,
/// [`shown_skip_warnings`] caps them.
pub fn skip_warnings(ctx: &LaunchContext, resolution: &Resolution<'_, String>) -> Vec<String> {
    resolution
        .skipped()
        .map(|s| skip_warning(ctx, resolution, &s))
        .collect()
}

/// How many skipped allowlist entries `render` names one by one on standard error; the rest
/// are counted ([`shown_skip_warnings`]).
pub const SHOWN_SKIP_WARNINGS: usize = 20;

/// [`skip_warnings`] for a person to read: the lines of the first `max` skipped entries,
/// then, when more were skipped, one line counting them: `agent "a1": … and 3 more skipped
/// MCP allowlist entries (`kcap-mcp-registry resolve` lists each)`. Only the shown lines
/// are built, so a huge allowlist costs one line per shown entry.
///
/// ```
/// use kcap_mcp_registry::ops::render::shown_skip_warnings;
/// use kcap_mcp_registry::{LaunchContext, Policy};
///
/// let ctx = LaunchContext {
///     agent_id: "a1".into(),
///     mcp_allowlist: Some((0..5).map(|i| Some(format!("x{i}"))).collect()),
///     ..LaunchContext::default()
/// };
/// let lines = shown_skip_warnings(&ctx, &ctx.resolve(Policy::Lenient).unwrap(), 2);
/// assert_eq!(lines.len(), 3);
/// assert!(lines[1].starts_with(r#"agent "a1": MCP allowlist entry 2 "x1" skipped"#));
/// assert_eq!(
///     lines[2],
///     r#"agent "a1": … and 3 more skipped MCP allowlist entries (`kcap-mcp-registry resolve` lists each)"#
/// );
/// ```
pub fn shown_skip_warnings(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    max: usize,
) -> Vec<String> {
    let mut skipped = resolution.skipped();
    let mut lines: Vec<String> = skipped
        .by_ref()
        .take(max)
        .map(|s| skip_warning(ctx, resolution, &s))
        .collect();
    let more = skipped.count();
    if more > 0 {
        lines.push(format!(
            "agent \"{}\": … and {more} more skipped MCP allowlist entr{} (`kcap-mcp-registry \
             resolve` lists each)",
            ctx.agent_id.escape_debug(),
            if more == 1 { "y" } else { "ies" }
        ));
    }
    lines
}

/// The [`skip_warnings`] line of one skipped entry.
fn skip_warning(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    s: &crate::allowlist::Skipped<'_>,
) -> String {
    let mut line = format!("agent \"{}\": {s}", ctx.agent_id.escape_debug());
    if let (SkipKind::Unknown, Some(id)) = (
        s.kind,
        s.entry.and_then(|e| suggest_id(resolution.registry(), e)),
    ) {
        line.push_str(&format!("; did you mean \"{id}\"?"));
    }
    line
}

/// A launch input `render` cannot read or use.
///
/// `Display` names the input and what went wrong with it; the underlying error is returned
/// from [`source`](std::error::Error::source), not displayed.
#[derive(Debug)]
#[non_exhaustive]
pub enum PreviewError {
    /// A file (or standard input, `-`) cannot be read.
    Read {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A credential file (`--credential-file`) is larger than [`MAX_CREDENTIAL_FILE`].
    TooLarge {
        /// The path given.
        path: PathBuf,
    },
    /// `--launch-json` is not a launch command JSON.
    LaunchJson {
        /// The path given.
        path: PathBuf,
        /// The parser's error, with its line and column.
        source: serde_json::Error,
    },
}

impl fmt::Display for PreviewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreviewError::Read { path, .. } if path == Path::new("-") => {
                f.write_str("cannot read standard input")
            }
            PreviewError::Read { path, .. } => write!(f, "cannot read {}", ShownPath(path)),
            PreviewError::TooLarge { path } => write!(
                f,
                "{} is larger than {} KiB, more than any client's credential file; give the \
                 file the client itself stored",
                ShownPath(path),
                MAX_CREDENTIAL_FILE / 1024
            ),
            PreviewError::LaunchJson { path, .. } => {
                write!(f, "{} is not a launch command JSON", shown_input(path))
            }
        }
    }
}

impl std::error::Error for PreviewError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PreviewError::Read { source, .. } => Some(source),
            PreviewError::LaunchJson { source, .. } => Some(source),
            PreviewError::TooLarge { .. } => None,
        }
    }
}

/// `standard input` for `-`, else the escaped path.
fn shown_input(path: &Path) -> String {
    if path == Path::new("-") {
        "standard input".into()
    } else {
        ShownPath(path).to_string()
    }
}

/// Reads the launch command JSON at `path` (`-`: standard input). `agent_id` (the
/// `--agent-id` flag) stands in for a payload that lacks one; otherwise the parser's own
/// error, with its line and column, stands.
///
/// # Errors
/// [`PreviewError::Read`] or [`PreviewError::LaunchJson`].
pub fn read_launch_command(
    path: &Path,
    agent_id: Option<&str>,
) -> Result<LaunchCommand, PreviewError> {
    let text = read_input(path)?;
    parse_launch_command(&text, agent_id).map_err(|source| PreviewError::LaunchJson {
        path: path.to_path_buf(),
        source,
    })
}

/// [`read_launch_command`] of text.
///
/// # Errors
/// The parser's error.
///
/// ```
/// use kcap_mcp_registry::ops::render::parse_launch_command;
///
/// let cmd = parse_launch_command(r#"{"model":"m"}"#, Some("a1")).unwrap();
/// assert_eq!((cmd.agent_id.as_str(), cmd.model.as_deref()), ("a1", Some("m")));
/// let err = parse_launch_command(r#"{"model":"m"}"#, None).unwrap_err();
/// assert_eq!(err.to_string(), "missing field `agent_id` at line 1 column 13");
/// ```
pub fn parse_launch_command(
    text: &str,
    agent_id: Option<&str>,
) -> Result<LaunchCommand, serde_json::Error> {
    LaunchCommand::from_json(text, agent_id)
}

/// How `render` prints the argv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgvFormat {
    /// One argument per line, for reading: each control or invisible character is shown
    /// escaped ([`crate::text::printable`]: `\n`, `\r`, `\t`, others `\u{…}`), so a prompt
    /// cannot break a line, forge one or send terminal escapes. Not reversible (a backslash
    /// is not escaped): use `Json` or `Shell`, which are exact, to get the argv back.
    Lines,
    /// A compact JSON array of strings, then a newline.
    Json,
    /// One line of POSIX shell words (quoted by the `shlex` crate), then a newline: `sh -c
    /// 'printf "%s\n" "$@"' _ <line>` gives back the argv.
    Shell,
}

/// An argv that cannot be printed in the chosen form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgvError {
    /// The position of the offending argument, from 0 (the message counts from 1).
    pub index: usize,
    /// Why `shlex` cannot quote it (described by `Display`).
    pub source: shlex::QuoteError,
}

impl fmt::Display for ArgvError {
    /// Says what the quoting error means for the launch (so `source()` is `None`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.index + 1;
        match self.source {
            shlex::QuoteError::Nul => write!(
                f,
                "argument {n} contains a NUL character, which no shell word or process argument \
                 can carry; remove it from the launch values"
            ),
            _ => write!(
                f,
                "argument {n} cannot be quoted as a shell word ({})",
                self.source
            ),
        }
    }
}

impl std::error::Error for ArgvError {}

/// `args` in `format`, ending in a newline.
///
/// # Errors
/// [`ArgvError`] for [`ArgvFormat::Shell`] when an argument contains NUL.
pub fn format_argv(args: &[String], format: ArgvFormat) -> Result<String, ArgvError> {
    Ok(match format {
        ArgvFormat::Lines => args
            .iter()
            .map(|a| format!("{}\n", crate::text::printable(a)))
            .collect(),
        ArgvFormat::Json => {
            let mut out = serde_json::to_string(args).expect("strings serialize");
            out.push('\n');
            out
        }
        ArgvFormat::Shell => {
            let mut words = Vec::with_capacity(args.len());
            for (index, a) in args.iter().enumerate() {
                words.push(shlex::try_quote(a).map_err(|source| ArgvError { index, source })?);
            }
            let mut out = words.join(" ");
            out.push('\n');
            out
        }
    })
}

/// Reads `path` as UTF-8 text without one leading byte order mark
/// ([`crate::decode::strip_bom`]); `-` reads standard input.
///
/// # Errors
/// [`PreviewError::Read`], including for invalid UTF-8.
pub fn read_input(path: &Path) -> Result<String, PreviewError> {
    let read = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map(|_| s)
    } else {
        std::fs::read_to_string(path)
    };
    let s = read.map_err(|source| PreviewError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    match crate::decode::strip_bom(&s).len() {
        n if n == s.len() => Ok(s),
        n => Ok(s[s.len() - n..].to_string()),
    }
}

/// The largest credential file [`read_credential_file`] reads, in bytes: a client's stored
/// key or token file is a few hundred bytes to a few KiB.
pub const MAX_CREDENTIAL_FILE: u64 = 64 * 1024;

/// Reads the credential file at `path` (`--credential-file NAME=PATH`) as UTF-8 text, at
/// most [`MAX_CREDENTIAL_FILE`] bytes (a FIFO or device is not read without end). The
/// client's room then keeps only its credential fields, as for any launch
/// ([`crate::clients::root::CredentialFileSpec::keep`]).
///
/// # Errors
/// [`PreviewError::Read`] (with the OS error, or invalid UTF-8) or
/// [`PreviewError::TooLarge`].
pub fn read_credential_file(path: &Path) -> Result<String, PreviewError> {
    let read = |source| PreviewError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut bytes = Vec::new();
    file.take(MAX_CREDENTIAL_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > MAX_CREDENTIAL_FILE {
        return Err(PreviewError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    String::from_utf8(bytes)
        .map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// A bootstrap build asked to render or launch a reviewer from its compiled-in registry:
/// built with `KCAP_MCP_REGISTRY_DIR` naming another registry than the crate's own
/// ([`crate::registry::BUNDLED`] is `false`; the CI builds one on `.ci/bootstrap-registry`
/// to run `check` and `diff`). Its registry lacks the servers a review asks for, so an
/// allowlist resolved against it drops them; refused rather than launched without them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BootstrapBuild {
    /// The registry directory the build compiled in ([`crate::registry::SOURCE_DIR`]).
    pub source_dir: &'static str,
}

impl fmt::Display for BootstrapBuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this kcap-mcp-registry is a bootstrap build: it compiled in the registry {} \
             (KCAP_MCP_REGISTRY_DIR), not the crate's own, so a reviewer's allowlist would lose \
             the servers that registry lacks; give the registry to render from (--registry \
             DIR), or use a normal build (`cargo build --release` without \
             KCAP_MCP_REGISTRY_DIR)",
            ShownPath(Path::new(self.source_dir))
        )
    }
}

impl std::error::Error for BootstrapBuild {}

/// Refuses to render or launch a reviewer from the compiled-in registry of a bootstrap
/// build ([`BootstrapBuild`]); a registry given at run time (`--registry DIR`) is not
/// refused.
///
/// # Errors
/// [`BootstrapBuild`] when [`crate::registry::BUNDLED`] is `false`.
pub fn refuse_bootstrap_build() -> Result<(), BootstrapBuild> {
    if crate::registry::BUNDLED {
        Ok(())
    } else {
        Err(BootstrapBuild {
            source_dir: crate::registry::SOURCE_DIR,
        })
    }
}
