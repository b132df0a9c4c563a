//! The harness for tests that run the real clients (Codex CLI, Claude Code): finding them,
//! reporting a test whose client is missing as *ignored* with the reason (or failing it under
//! `KCAP_REQUIRE_PEERS=1`), and running a client bounded by a timeout that kills its process
//! group. `tests/common/README.md` shows how to write a test file on it.
#![allow(dead_code)]

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// How long one client run may take before its process group is killed and the test fails.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------------------------------
// Finding the clients
// ------------------------------------------------------------------------------------------

thread_local! {
    /// Why the test running on this thread did not run its client (set by [`peer`]).
    static SKIPPED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The client binary named by the environment variable `var` (`KCAP_CODEX_BIN`,
/// `KCAP_CLAUDE_BIN`, … `KCAP_QWEN_BIN`: the names `scripts/install-peers.sh` prints).
///
/// - Set: it must name an existing file, else the test fails (a wrong path never skips).
/// - Unset or empty, with `KCAP_REQUIRE_PEERS=1` (as `.ci/run` sets): the test fails.
/// - Unset or empty otherwise: returns `None` and marks the running test as skipped, so the
///   harness reports it as `ignored (<reason>)` even though it returns normally. The test
///   returns at once (`let Some(bin) = peer(…) else { return; };`).
///
/// Call it on the test's own thread (the mark is thread-local).
pub fn peer(var: &'static str) -> Option<PathBuf> {
    match peer_in(var, |name| std::env::var_os(name)) {
        Ok(found) => found,
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// Marks the test running on this thread as skipped for `reason`: the harness reports it as
/// `ignored (<reason>)` when it returns. [`peer`] calls it; a test that finds another
/// precondition missing at run time may too, and then returns at once.
pub fn skip(reason: String) {
    SKIPPED.with(|s| *s.borrow_mut() = Some(reason));
}

/// [`peer`]'s decision with the environment given as `env`: `Ok(Some(path))` to run,
/// `Err(reason)` to skip; panics (fails the test) on a wrong path or a required client.
pub fn peer_in(
    var: &str,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<PathBuf>, String> {
    let required = env("KCAP_REQUIRE_PEERS").is_some_and(|v| v == "1");
    match env(var).filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "{var}={} does not name a file; run `bash scripts/install-peers.sh` and export \
                 the paths it prints",
                path.display()
            );
            Ok(Some(path))
        }
        None if required => panic!(
            "{var} is not set but KCAP_REQUIRE_PEERS=1; run `bash scripts/install-peers.sh` \
             and export the paths it prints"
        ),
        None => Err(format!(
            "{var} not set; `bash scripts/install-peers.sh` prints it; KCAP_REQUIRE_PEERS=1 \
             fails instead"
        )),
    }
}

// ------------------------------------------------------------------------------------------
// The harness
// ------------------------------------------------------------------------------------------

/// Runs `test` as the harness does: `Ignored` with [`peer`]'s reason if it asked for a
/// missing client, `Completed` if it returned otherwise. A panic propagates (a failure).
pub fn outcome(test: impl FnOnce()) -> Completion {
    SKIPPED.with(|s| s.borrow_mut().take());
    test();
    match SKIPPED.with(|s| s.borrow_mut().take()) {
        Some(reason) => Completion::ignored_with(reason),
        None => Completion::Completed,
    }
}

/// When the harness built its first trial: the origin of `KCAP_TEST_TIMES`' start column.
static PROCESS_START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// One test function of a real-client test module, named by its path in the binary
/// (`module_path!()::function`) without the crate's name: `conformance::codex_gated_enables_no_server`.
/// With `KCAP_TEST_TIMES=<file>` set, each test's wall time is appended to that file, a line
/// `<seconds>\t<name>\t<start>` (libtest-mimic prints none; `<start>`: when it started, in
/// seconds since the harness built its trials), for finding where a run's time goes.
pub fn trial(path: &'static str, test: fn()) -> Trial {
    std::sync::LazyLock::force(&PROCESS_START);
    let name = path.split_once("::").map_or(path, |(_, rest)| rest);
    Trial::ignorable_test(name, move || -> Result<Completion, Failed> {
        let started = std::time::Instant::now();
        let done = outcome(test);
        if let Some(file) = std::env::var_os("KCAP_TEST_TIMES") {
            use std::io::Write as _;
            let line = format!(
                "{:.1}\t{name}\t{:.1}\n",
                started.elapsed().as_secs_f64(),
                started.duration_since(*PROCESS_START).as_secs_f64()
            );
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .expect("KCAP_TEST_TIMES names a file this test can append to");
            f.write_all(line.as_bytes())
                .expect("KCAP_TEST_TIMES: a write");
        }
        Ok(done)
    })
}

/// The `main` of a real-client test file (`harness = false`): parses the usual libtest
/// arguments (filters, `--test-threads`, `--list`, `--ignored`), runs `trials` and exits
/// with libtest's summary line and exit code. Build `trials` with [`real_client_tests!`].
pub fn main(trials: Vec<Trial>) -> ! {
    libtest_mimic::run(&Arguments::from_args(), trials).exit()
}

/// `trials` in the order the harness should start them, for a run that ends when its last
/// test does: libtest-mimic 0.8.2 hands the trials to its threads in the order given (one
/// shared iterator, `run` in its `lib.rs`), so a long test listed late runs on alone at the
/// end while the other threads idle.
///
/// - `durations`: lines `<seconds>\t<name>…` as `KCAP_TEST_TIMES` writes them (the rest of
///   a line is ignored, so is a line starting with `#`). The trials are sorted by those
///   seconds, longest first; a trial not listed counts as 0 s and keeps its place among
///   those (after the listed ones). A name listed twice counts with its largest time.
/// - `serial`: the prefix of tests that run one at a time (they take one lock, as
///   `ci_snippets::` does for its checkout): a thread that picks one up while another runs
///   waits on the lock, idle. They are spread out instead, the longest first and then one
///   every `spread` others, so that each has mostly finished before the next one starts.
///
/// # Panics
/// On a line that is not `<seconds>\t<name>`, saying which.
pub fn longest_first(
    trials: Vec<Trial>,
    durations: &str,
    serial: &str,
    spread: usize,
) -> Vec<Trial> {
    let mut seconds = std::collections::HashMap::new();
    for line in durations
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut fields = line.split('\t');
        let (Some(time), Some(name)) = (fields.next(), fields.next()) else {
            panic!("durations: `{line}` is not `<seconds>\\t<name>`, as KCAP_TEST_TIMES writes");
        };
        let time: f64 = time.parse().unwrap_or_else(|e| {
            panic!("durations: `{line}`: `{time}` is not a number of seconds ({e})")
        });
        let at = seconds.entry(name).or_insert(time);
        *at = f64::max(*at, time);
    }
    let mut trials: Vec<(f64, Trial)> = trials
        .into_iter()
        .map(|t| (seconds.get(t.name()).copied().unwrap_or(0.0), t))
        .collect();
    // Stable: the unlisted trials keep their order.
    trials.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut one_at_a_time, mut rest): (Vec<Trial>, Vec<Trial>) = trials
        .into_iter()
        .map(|(_, t)| t)
        .partition(|t| t.name().starts_with(serial));
    let mut ordered = Vec::with_capacity(one_at_a_time.len() + rest.len());
    one_at_a_time.reverse();
    rest.reverse();
    while let Some(next) = one_at_a_time.pop() {
        ordered.push(next);
        for _ in 0..spread {
            ordered.extend(rest.pop());
        }
    }
    ordered.extend(rest.into_iter().rev());
    ordered
}

/// The trials of a real-client test file: each listed function by its own name, with any
/// `#[cfg(…)]` written before it. Every test function of the file must be listed here.
#[macro_export]
macro_rules! real_client_tests {
    ($($(#[$attr:meta])* $test:ident),* $(,)?) => {{
        // Added one by one, so that each can carry its own `#[cfg(…)]`.
        let mut trials = ::std::vec::Vec::new();
        $(
            $(#[$attr])*
            trials.extend([$crate::common::peers::trial(
                concat!(module_path!(), "::", stringify!($test)),
                $test,
            )]);
        )*
        trials
    }};
}

// ------------------------------------------------------------------------------------------
// Running a client
// ------------------------------------------------------------------------------------------

/// What one client run produced.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// Lossily decoded.
    pub stderr: String,
}

/// Runs `cmd` with stdin from `/dev/null` in its own process group and collects its output;
/// after [`CLIENT_TIMEOUT`] kills the whole group and panics. `what` names the run in
/// messages. Also panics when a process the client left behind keeps its output open.
pub fn run(mut cmd: Command, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let (tx, rx) = mpsc::channel();
    let pipes: [(u8, Box<dyn Read + Send>); 2] = [
        (1, Box::new(child.stdout.take().unwrap())),
        (2, Box::new(child.stderr.take().unwrap())),
    ];
    for (fd, mut pipe) in pipes {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send((fd, buf));
        });
    }
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            // The child is not reaped yet, so its pid (= the group id) cannot be reused.
            kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not finish within {} s; killed it",
                CLIENT_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (None, None);
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(5);
        let (fd, buf) = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!("{what} exited ({status}) but a process it left behind keeps its output open")
        });
        if fd == 1 {
            stdout = Some(buf);
        } else {
            stderr = Some(buf);
        }
    }
    Output {
        status,
        stdout: stdout.unwrap(),
        stderr: String::from_utf8_lossy(&stderr.unwrap()).into_owned(),
    }
}

/// Sends `SIGKILL` to the process group `pgid` with kill(2): never through `/bin/kill`, whose
/// procps on these machines turns `-<pgid>` into `-1` (every process). A group of 1 or less
/// is refused (kill(-1) is every process too). Call it before reaping the group's leader, so
/// its pid cannot have been reused.
pub fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .filter(|p| *p > 1)
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// The `PATH` given to the clients: the test's own (Codex's launcher needs `node`).
pub fn inherited_path() -> OsString {
    std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
}
