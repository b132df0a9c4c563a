//! A reviewer's command and the other processes of the daemon's user, by the calls that check
//! a uid rather than `ptrace` (the red team of stop 53): `prlimit`, `setpriority`,
//! `sched_setaffinity`, `sched_setscheduler`, `ioprio_set`
//! (`tests/fixtures/sandbox_reach/sched.py`, a file of the hostile worktree, sets each to what
//! it is). In the whole sandbox a reviewer set another reviewer's limits, nice value, CPUs,
//! policy and I/O priority (a reviewer holds no capability, so commoncap's `cap_safe_nice`
//! lets an equal through), and the executor's limits (`RLIMIT_NOFILE` 4 failed the stop of
//! `launch` with `EMFILE`; `RLIMIT_CPU` has the kernel kill it). The seccomp filter refuses
//! them now (`src/launch/seccomp.rs`); done with `Confinement::Off` (the bite).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, until_exit, worktree_plan};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options};

/// The hostile worktree's changer of another process's limits and scheduling.
const SCHED: &str = include_str!("../fixtures/sandbox_reach/sched.py");

/// The calls `sched.py` makes, each a probe `<target>_<call>`.
const CALLS: [&str; 5] = [
    "prlimit",
    "setpriority",
    "setaffinity",
    "scheduler",
    "ioprio",
];

/// Launches, under `confinement`, a victim reviewer (a `sleep`) and then an attacker reviewer
/// whose command runs `sched.py` against the victim (`reviewer_*`) and against its own parent,
/// the executor (`executor_*`: this test process); each `name=yes|no` the attacker printed.
fn attack(confinement: Confinement) -> BTreeMap<String, bool> {
    let root = tempfile::Builder::new()
        .prefix("kcap-others-")
        .tempdir()
        .unwrap();
    let at = |p: &str| root.path().join(p);
    for dir in ["tree", "bin"] {
        std::fs::create_dir(at(dir)).unwrap();
    }
    std::fs::write(at("tree/sched.py"), SCHED).unwrap();
    let options = Options::default().with_confinement(confinement);
    let victim_bin = sh_script(&at("bin"), "victim", "exec /bin/sleep 30\n");
    let victim_plan = worktree_plan(Client::Codex, &at("tree"), &at("victim"), "/usr/bin:/bin");
    let victim = launch::launch(&victim_plan, &victim_bin, &options).unwrap();
    let sched = at("tree/sched.py").display().to_string();
    let body = format!(
        "/usr/bin/python3 {sched} {victim} reviewer\n\
         /usr/bin/python3 {sched} $PPID executor\n\
         echo probes-done\n",
        victim = victim.pid()
    );
    let attacker_bin = sh_script(&at("bin"), "attacker", &body);
    let plan = worktree_plan(Client::Codex, &at("tree"), &at("attacker"), "/usr/bin:/bin");
    let mut attacker = launch::launch(&plan, &attacker_bin, &options).unwrap();
    let (output, _) = until_exit(&mut attacker, Duration::from_secs(30));
    attacker.stop().unwrap();
    victim.stop().unwrap();
    assert!(output.contains("probes-done"), "{output}");
    probe_answers(&output)
}

#[test]
fn a_reviewers_command_changes_no_limit_or_priority_of_another_reviewer_or_the_executor() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX") {
        return;
    }
    let open = attack(Confinement::Off);
    let confined = attack(Confinement::BestEffort);
    for call in CALLS {
        for target in ["reviewer", "executor"] {
            let probe = format!("{target}_{call}");
            if target == "reviewer" || call == "prlimit" {
                // Done unconfined: the bite. (The executor's nice value and the rest need
                // the capabilities a root executor holds: `Off` keeps them when this test
                // runs as root, not otherwise.)
                assert_eq!(open.get(&probe), Some(&true), "sandbox off: {open:?}");
            }
            assert_eq!(
                confined.get(&probe),
                Some(&false),
                "{probe} done in the default sandbox: {confined:?}"
            );
        }
    }
}

/// The watchers (`call`: a Python expression making one, `>= 0` when made) one reviewer
/// holds, made until the kernel refuses one or `cap` are held, under `confinement`.
fn watchers(confinement: Confinement, call: &str, cap: u64) -> u64 {
    let root = tempfile::Builder::new()
        .prefix("kcap-watch-")
        .tempdir()
        .unwrap();
    let at = |p: &str| root.path().join(p);
    for dir in ["tree", "bin"] {
        std::fs::create_dir(at(dir)).unwrap();
    }
    let body = format!(
        "/usr/bin/python3 -c '\n\
         import ctypes\n\
         c = ctypes.CDLL(None)\n\
         n = 0\n\
         while n < {cap} and {call} >= 0: n += 1\n\
         print(\"made\", n)'\n"
    );
    let client = sh_script(&at("bin"), "reviewer", &body);
    let plan = worktree_plan(Client::Codex, &at("tree"), &at("launch"), "/usr/bin:/bin");
    let options = Options::default().with_confinement(confinement);
    let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
    reviewer.stop().unwrap();
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix("made "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {output}"))
}

/// The kernel counts inotify instances and fanotify groups per user in every user namespace
/// up to the first, so one reviewer's command took all of the daemon's user's (128 of each
/// here) and no other process of that user made one while it lived (`EMFILE`: the daemon,
/// the next reviewers; red team of stop 53). Its user namespace now bounds each at an
/// eighth of the user's (`launch::WATCH_SHARE`): one more is refused in the sandbox, made
/// without it (the bite; no more than that one, so the user's own are never all taken).
#[test]
fn a_reviewer_holds_an_eighth_of_the_users_inotify_instances_and_fanotify_groups_at_most() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX") {
        return;
    }
    // `fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY)`: unprivileged since 5.13.
    for (limit, call) in [
        ("max_inotify_instances", "c.inotify_init1(0)"),
        ("max_fanotify_groups", "c.fanotify_init(0x200, 0)"),
    ] {
        let Ok(limit) = std::fs::read_to_string(format!("/proc/sys/user/{limit}")) else {
            eprintln!("ignored: this kernel has no user.{limit}");
            continue;
        };
        let share = (limit.trim().parse::<u64>().unwrap() / launch::WATCH_SHARE).max(1);
        assert_eq!(
            watchers(Confinement::Off, call, share + 1),
            share + 1,
            "{call}: sandbox off"
        );
        assert_eq!(
            watchers(Confinement::BestEffort, call, share + 1),
            share,
            "{call}: a reviewer holds more than an eighth of the user's {limit}"
        );
    }
}

/// A user namespace of the reviewer's own gave its command every capability over the
/// namespaces it made next: network namespace after network namespace, each held by a
/// socket (300 took ~60 MB of the kernel's memory, up to the user's `max_net_namespaces`,
/// 96,368 here: the machine's memory, and the namespaces the daemon's next launch needs),
/// and `CAP_NET_ADMIN` over them (red team of stop 53). In the sandbox no namespace of any
/// kind is made; without it (the bite) both are.
#[test]
fn a_reviewers_command_makes_no_namespace() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX") {
        return;
    }
    let probe = |confinement| {
        let root = tempfile::Builder::new()
            .prefix("kcap-ns-")
            .tempdir()
            .unwrap();
        let at = |p: &str| root.path().join(p);
        for dir in ["tree", "bin"] {
            std::fs::create_dir(at(dir)).unwrap();
        }
        let body = "/usr/bin/python3 -c '\n\
             import ctypes, socket\n\
             c = ctypes.CDLL(None)\n\
             print(\"user_namespace=\" + (\"yes\" if c.unshare(0x10000000) == 0 else \"no\"))\n\
             held = []\n\
             while len(held) < 8 and c.unshare(0x40000000) == 0:\n    \
                 held.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))\n\
             print(\"network_namespaces=\" + (\"yes\" if held else \"no\"))'\n\
             echo probes-done\n";
        let client = sh_script(&at("bin"), "reviewer", body);
        let plan = worktree_plan(Client::Codex, &at("tree"), &at("launch"), "/usr/bin:/bin");
        let options = Options::default().with_confinement(confinement);
        let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        reviewer.stop().unwrap();
        assert!(output.contains("probes-done"), "{output}");
        probe_answers(&output)
    };
    let open = probe(Confinement::Off);
    let confined = probe(Confinement::BestEffort);
    for item in ["user_namespace", "network_namespaces"] {
        assert_eq!(open.get(item), Some(&true), "sandbox off: {open:?}");
        assert_eq!(
            confined.get(item),
            Some(&false),
            "{item} made in the default sandbox: {confined:?}"
        );
    }
}
