//! `/etc` in a private mount namespace: a client's administrator files (`/etc/codex`,
//! `/etc/claude-code`, `/etc/github-copilot`, `/etc/opencode`, `/etc/gemini-cli`) shown on the
//! real client without writing the machine's `/etc`. The client runs under
//! `unshare -m --propagation private` after `mount -t overlay … /etc`, which needs root: where
//! that fails, [`can_overlay`] reports the test skipped with the reason (a failure under
//! `KCAP_REQUIRE_PEERS=1`). A wrapped command exits 97 when the overlay cannot be mounted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::stand_in::sh_script;

/// How `/etc` is overlaid.
#[derive(Clone, Copy, Debug)]
pub enum Etc<'a> {
    /// A writable `/etc` whose upper layer is `<dir>/u` and work directory `<dir>/w` (both
    /// created here): what a test writes under `<dir>/u/x` is `/etc/x` in the namespace.
    Writable(&'a Path),
    /// The files of this directory laid over `/etc`, read-only (`lowerdir=<layer>:/etc`).
    Layer(&'a Path),
}

impl<'a> Etc<'a> {
    /// The shell step that mounts the overlay (`$0` is [`Etc::dir`]), then runs `"$@"`.
    fn mount(self) -> String {
        let options = match self {
            Etc::Writable(dir) => {
                for d in ["u", "w"] {
                    std::fs::create_dir_all(dir.join(d)).unwrap();
                }
                "lowerdir=/etc,upperdir=$0/u,workdir=$0/w"
            }
            Etc::Layer(_) => "lowerdir=$0:/etc",
        };
        format!("/usr/bin/mount -t overlay overlay -o \"{options}\" /etc || exit 97; exec \"$@\"")
    }

    fn dir(self) -> &'a Path {
        match self {
            Etc::Writable(dir) | Etc::Layer(dir) => dir,
        }
    }
}

/// `cmd`'s program and arguments (not its environment or directory, which the caller sets on
/// the result) run in a private mount namespace with `/etc` overlaid as `etc` says.
pub fn command(etc: Etc<'_>, cmd: &Command) -> Command {
    let mut wrapped = Command::new("/usr/bin/unshare");
    wrapped
        .args(["-m", "--propagation", "private", "/bin/sh", "-c"])
        .arg(etc.mount())
        .arg(etc.dir())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    wrapped
}

/// A wrapper script `dir/name` that runs `client` with the wrapper's arguments as [`command`]
/// does: what a test gives the executor as the client binary, so the plan is carried out
/// unchanged.
pub fn wrapper(dir: &Path, name: &str, etc: Etc<'_>, client: &Path) -> PathBuf {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let path = |p: &Path| quote(p.to_str().expect("a UTF-8 path"));
    sh_script(
        dir,
        name,
        &format!(
            "exec /usr/bin/unshare -m --propagation private /bin/sh -c {} {} {} \"$@\"",
            quote(&etc.mount()),
            path(etc.dir()),
            path(client)
        ),
    )
}

/// Whether `/etc` can be overlaid in a private mount namespace here; when not, the test is
/// reported as skipped with the reason.
///
/// # Panics
/// When it cannot, under `KCAP_REQUIRE_PEERS=1` (as `.ci/run` sets).
pub fn can_overlay() -> bool {
    let t = tempfile::tempdir().unwrap();
    let ok = command(Etc::Writable(t.path()), &Command::new("/bin/true"))
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("KCAP_REQUIRE_PEERS").is_none_or(|v| v != "1"),
            "`unshare -m` with an overlay on /etc failed (needs root); KCAP_REQUIRE_PEERS=1"
        );
        super::peers::skip(
            "cannot overlay /etc in a private mount namespace (unshare -m, as root)".into(),
        );
    }
    ok
}
