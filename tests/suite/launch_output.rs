//! What `kcap-mcp-registry launch` prints of a client's output reaches the operator's
//! terminal escaped: a terminal client (or a model through it) printing a title change
//! (`ESC ] 0;x BEL`), a screen clear (`ESC [2J`), a C1 control or a bidirectional override
//! cannot drive the terminal; line breaks stay line breaks.

use crate::common;
use crate::launch::{bare_plan, launch_plan};

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
