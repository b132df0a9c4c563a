//! What `kcap-mcp-registry launch` prints of a client's output reaches the operator's
//! terminal escaped: a terminal client (or a model through it) printing a title change
//! (`ESC ] 0;x BEL`), a screen clear (`ESC [2J`), a C1 control or a bidirectional override
//! cannot drive the terminal; line breaks stay line breaks. And when nothing reads what it
//! prints any more (`launch … | head -n 1`), it stops the reviewer and cleans up.

use crate::common;
use crate::launch::{bare_plan, group_members, launch_plan};

use std::io::{BufRead as _, Read as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::stand_in::sh_script;
use tempfile::TempDir;

#[test]
fn launch_shows_a_terminal_clients_escape_sequences_escaped() {
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("launch");
    // Output and standard error share the client's terminal.
    let bin = sh_script(
        tmp.path(),
        "client",
        r"printf '\033]0;x\007title\n\033[2Jcleared\r\n'
printf 'a\302\233b \342\200\256c\n' >&2",
    );
    let plan = bare_plan(&tmp.path().join("record"), &launch_dir);
    let file = tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_json()).unwrap();

    let r = launch_plan(&file, &launch_dir, &bin, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stdout,
        "output \\u{1b}]0;x\\u{7}title\n\
         output \\u{1b}[2Jcleared\n\
         output a\\u{9b}b \\u{202e}c\n\
         exited exit status: 0\n",
        "{r:?}"
    );
    assert!(!r.stdout.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']));
}

/// `launch … | head -n 1`: the reader of its standard output goes away while the reviewer
/// runs (`EPIPE`: Rust ignores `SIGPIPE`). The run stops the reviewer, its process group
/// with it, and removes the launch directory, within seconds and not at `--timeout`, and
/// says so with exit 2, whether the client goes on printing (the next line fails) or prints
/// nothing more (the pipe's reader seen gone). Before, the next line ended the process
/// without a destructor: the launch directory stayed, with the client's credentials; and a
/// client printing nothing ran to `--timeout`.
#[test]
fn launch_whose_output_is_closed_stops_the_reviewer_and_removes_its_launch_directory() {
    for (case, body) in [
        (
            "printing",
            "sleep 60 &\nwhile :; do echo reviewing; sleep 0.1; done",
        ),
        ("quiet", "sleep 60 &\necho reviewing\nwait"),
    ] {
        let tmp = TempDir::new().unwrap();
        let bin = sh_script(tmp.path(), "client", body);
        let launch_dir = tmp.path().join("launch");
        let file = tmp.path().join("plan.json");
        std::fs::write(&file, bare_plan(Path::new("unused"), &launch_dir).to_json()).unwrap();
        let mut cli = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
            .args(["launch", "--timeout", "60", "--plan"])
            .arg(&file)
            .arg("--client-bin")
            .arg(&bin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(cli.stderr.take().unwrap());
        let mut started = String::new();
        stderr.read_line(&mut started).unwrap();
        let pid: u32 = started
            .split("pid ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{case}: {started}"));
        // `head -n 1`: one line read, then the pipe's only reader closed.
        let mut stdout = std::io::BufReader::new(cli.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert_eq!(first, "output reviewing\n", "{case}");
        assert!(launch_dir.is_dir(), "{case}");
        drop(stdout);
        let closed = Instant::now();
        let status = loop {
            if let Some(status) = cli.try_wait().unwrap() {
                break status;
            }
            if closed.elapsed() > Duration::from_secs(20) {
                let _ = cli.kill();
                panic!("{case}: launch still ran 20 s after its output was closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).unwrap();
        assert_eq!(status.code(), Some(2), "{case}: {started}{rest}");
        assert!(
            rest.contains("error: standard output cannot be written")
                && rest.contains("stopped the reviewer and its process group"),
            "{case}: {rest}"
        );
        assert_eq!(group_members(pid), Vec::<u32>::new(), "{case}");
        assert!(
            !launch_dir.exists(),
            "{case}: the launch directory is left: {rest}"
        );
    }
}
