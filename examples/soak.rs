//! The executor's soak run (issue 33; BENCHMARKS.md, "The executor's soak run"): one process,
//! as a daemon is, carries out `SEQUENTIAL` launches in a row, then `ROUNDS` rounds of
//! `AT_ONCE` launches started together, each a whole reviewer's life through the library
//! (`launch::launch` with the default options, ACP `session/prompt`, the answer, `stop`),
//! and reports launches per second, the p50 and p99 of a launch's time, and what is left
//! behind: descriptors, threads, child processes, launch directories, reviewers' cgroups,
//! and the resident memory, each before (after one round at once, so that what lives for the
//! executor's life, its cgroup guard, and the allocator's per-thread arenas are there) and
//! after. The launches at once run on a fixed pool of `AT_ONCE` threads made before "before"
//! (a daemon's launch workers); `SOAK_THREADS=spawn` spawns them afresh each round instead.
//! `SOAK_MALLOC_STATS=1` prints glibc's `malloc_stats()` after the rounds. For the rounds at
//! once it also prints the CPU time they took per launch (`getrusage`: this process's threads,
//! and its reaped children, the clients, each user and system), and the whole machine's busy
//! time over them (`/proc/stat`: the kernel's workers too, and whatever else runs), figures
//! that a loaded machine moves far less than the rate.
//!
//! ```sh
//! cargo run --release --example soak -- PLAN.json CLIENT_BIN SEQUENTIAL AT_ONCE ROUNDS
//! ```
//!
//! `PLAN.json` is a rendered plan (`render gemini --format plan`) whose launch directory and
//! worktree contain `@N@`: each launch gets its own, `@N@` replaced by its number.
//! `scripts/bench-soak.sh` renders one, builds a compiled stand-in client, and runs this.

use std::process::ExitCode;
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::launch::{self, AcpEvent, Options, Reviewer};

/// What this process holds, read from `/proc/self`.
#[derive(Debug, Clone, Copy)]
struct Held {
    fds: usize,
    threads: usize,
    children: usize,
    rss_kib: u64,
}

fn held() -> Held {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let me = std::process::id().to_string();
    let children = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                // pid (comm) state ppid …: the fields after the last `)`.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(|p| p == me))
                    .unwrap_or(false)
            })
        })
        .count();
    Held {
        fds: std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count),
        threads: usize::try_from(field("Threads:")).unwrap_or(0),
        children,
        rss_kib: field("VmRSS:"),
    }
}

/// The launch's options: the default, less the sandbox with `SOAK_SANDBOX=off` and the
/// reviewer's cgroup with `SOAK_CGROUP=off` (to measure what each costs).
fn options() -> Options {
    let off = |name| std::env::var(name).is_ok_and(|v| v == "off");
    let mut options = Options::default();
    if off("SOAK_SANDBOX") {
        options = options.with_confinement(launch::sandbox::Confinement::Off);
    }
    if off("SOAK_CGROUP") {
        options = options.with_cgroup(launch::sandbox::Confinement::Off);
    }
    options
}

/// When each launch since the last `take` entered [`one`], called `launch`, had `stop`
/// return, and left `one`: where a round's time goes outside the launches' own.
static MARKS: std::sync::Mutex<Vec<[Instant; 4]>> = std::sync::Mutex::new(Vec::new());

/// One reviewer's whole life; its time.
fn one(template: &str, n: usize, client: &std::path::Path) -> Result<Duration, String> {
    let entered = Instant::now();
    let text = template.replace("@N@", &n.to_string());
    let plan: LaunchPlan = serde_json::from_str(&text).map_err(|e| format!("the plan: {e}"))?;
    if let Some(cwd) = &plan.cwd {
        std::fs::create_dir_all(cwd).map_err(|e| format!("{cwd}: {e}"))?;
    }
    let start = Instant::now();
    let reviewer =
        launch::launch(&plan, client, &options()).map_err(|e| format!("launch {n}: {e}"))?;
    let Reviewer::Acp(mut session) = reviewer else {
        return Err("not an ACP plan".into());
    };
    session
        .prompt("review")
        .map_err(|e| format!("prompt {n}: {e}"))?;
    let deadline = start + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = session.stop();
            return Err(format!("launch {n}: no answer within 30 s"));
        }
        match session.next_event(left.min(Duration::from_secs(1))) {
            Ok(Some(AcpEvent::PromptDone { .. })) => break,
            Ok(Some(AcpEvent::Exited(status))) => {
                let _ = session.stop();
                return Err(format!("launch {n}: the client exited ({status:?})"));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("launch {n}: {e}")),
        }
    }
    session.stop().map_err(|e| format!("stop {n}: {e}"))?;
    let took = start.elapsed();
    if let Some(cwd) = &plan.cwd {
        let _ = std::fs::remove_dir_all(cwd);
    }
    drop(plan);
    if let Ok(mut marks) = MARKS.lock() {
        marks.push([entered, start, start + took, Instant::now()]);
    }
    Ok(took)
}

/// CPU seconds so far, user and system: this process's (all its threads) and its reaped
/// children's.
fn cpu() -> [f64; 4] {
    let usage = |who| {
        // SAFETY: rusage is plain data; getrusage fills it.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid `who` and a pointer to a rusage.
        unsafe { libc::getrusage(who, &raw mut r) };
        #[allow(clippy::cast_precision_loss)]
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (secs(r.ru_utime), secs(r.ru_stime))
    };
    let (su, ss) = usage(libc::RUSAGE_SELF);
    let (cu, cs) = usage(libc::RUSAGE_CHILDREN);
    [su, ss, cu, cs]
}

/// The machine's busy and total time so far, in seconds (`/proc/stat`'s first line, in
/// clock ticks of 1/100 s; busy: all but idle and iowait).
fn machine() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let total: f64 = ticks.iter().sum();
    let idle = ticks.get(3).unwrap_or(&0.0) + ticks.get(4).unwrap_or(&0.0);
    ((total - idle) / 100.0, total / 100.0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // Nearest rank.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1].as_secs_f64() * 1e3
}

fn report(label: &str, mut times: Vec<Duration>, wall: Duration) {
    times.sort();
    #[allow(clippy::cast_precision_loss)]
    let rate = times.len() as f64 / wall.as_secs_f64();
    println!(
        "{label}: {} launches in {:.2} s, {rate:.1} launches/s, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        times.len(),
        wall.as_secs_f64(),
        percentile(&times, 50.0),
        percentile(&times, 99.0),
        percentile(&times, 100.0),
    );
}

/// Launch directories and their locks (`.launch-N…`) left in `root`.
fn leftovers(root: &std::path::Path) -> usize {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("launch-") || name.starts_with(".launch-")
        })
        .count()
}

/// Launch cgroups left in this executor's reviewers' cgroups.
fn cgroups_left() -> usize {
    let Ok(own) = launch::cgroup::own_cgroup() else {
        return 0;
    };
    let prefix = format!("{}{}-", launch::cgroup::PREFIX, std::process::id());
    std::fs::read_dir(own)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| {
            std::fs::read_dir(e.path())
                .into_iter()
                .flatten()
                .flatten()
                .filter(|c| c.file_type().is_ok_and(|t| t.is_dir()))
                .count()
        })
        .sum()
}

/// How the launches at once are carried: by a fixed pool of threads made once, before
/// "before" is sampled, as a daemon's launch workers are (the default), or, with
/// `SOAK_THREADS=spawn`, by threads spawned for each round and joined after it (how this
/// harness ran before: their stacks and arenas are the harness's, not the executor's).
enum AtOnce {
    Pool(Pool),
    Spawn,
}

/// `size` threads, each carrying out one launch a round, all started together (a barrier).
struct Pool {
    jobs: Vec<mpsc::Sender<usize>>,
    results: mpsc::Receiver<Result<Duration, String>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    fn new(template: &Arc<String>, client: &Arc<std::path::PathBuf>, size: usize) -> Pool {
        let barrier = Arc::new(Barrier::new(size));
        let (done, results) = mpsc::channel();
        let (jobs, threads) = (0..size)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<usize>();
                let (template, client, barrier, done) = (
                    Arc::clone(template),
                    Arc::clone(client),
                    Arc::clone(&barrier),
                    done.clone(),
                );
                let thread = std::thread::spawn(move || {
                    for n in rx {
                        barrier.wait();
                        if done.send(one(&template, n, &client)).is_err() {
                            return;
                        }
                    }
                });
                (tx, thread)
            })
            .unzip();
        Pool {
            jobs,
            results,
            threads,
        }
    }

    /// One launch on each thread, numbered from `first`; their times.
    fn round(&self, first: usize) -> Result<Vec<Duration>, String> {
        for (i, job) in self.jobs.iter().enumerate() {
            job.send(first + i)
                .map_err(|_| "a pool thread is gone".to_owned())?;
        }
        (0..self.jobs.len())
            .map(|_| {
                self.results
                    .recv()
                    .map_err(|_| "a pool thread panicked".to_owned())?
            })
            .collect()
    }

    fn join(self) {
        drop(self.jobs);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// `at_once` launches started together (numbered from `first`) on threads spawned for
/// them; their times.
fn spawned_round(
    template: &Arc<String>,
    client: &Arc<std::path::PathBuf>,
    at_once: usize,
    first: usize,
) -> Result<Vec<Duration>, String> {
    let barrier = Arc::new(Barrier::new(at_once));
    let threads: Vec<_> = (0..at_once)
        .map(|i| {
            let (template, client, barrier) = (
                Arc::clone(template),
                Arc::clone(client),
                Arc::clone(&barrier),
            );
            std::thread::spawn(move || {
                barrier.wait();
                one(&template, first + i, &client)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| {
            t.join()
                .map_err(|_| "a launch thread panicked".to_owned())?
        })
        .collect()
}

/// `at_once` launches started together, numbered from `first`; their times.
fn at_once_round(
    how: &AtOnce,
    template: &Arc<String>,
    client: &Arc<std::path::PathBuf>,
    at_once: usize,
    first: usize,
) -> Result<Vec<Duration>, String> {
    match how {
        AtOnce::Pool(pool) => pool.round(first),
        AtOnce::Spawn => spawned_round(template, client, at_once, first),
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let [plan, client, sequential, at_once, rounds] = args else {
        return Err("usage: soak PLAN.json CLIENT_BIN SEQUENTIAL AT_ONCE ROUNDS".into());
    };
    let number = |s: &String| s.parse::<usize>().map_err(|e| format!("{s}: {e}"));
    let (sequential, at_once, rounds) = (number(sequential)?, number(at_once)?, number(rounds)?);
    let template = std::fs::read_to_string(plan).map_err(|e| format!("{plan}: {e}"))?;
    let client = std::path::PathBuf::from(client);
    let probe: LaunchPlan =
        serde_json::from_str(&template.replace("@N@", "0")).map_err(|e| e.to_string())?;
    let root = std::path::Path::new(&probe.launch_dir)
        .parent()
        .ok_or("the launch directory has no parent")?
        .to_owned();

    // What lives as long as the executor (its cgroup guard), the daemon's pool of launch
    // threads, and what the first launches make once (the allocator's per-thread arenas):
    // before `before`, the pool is made and one round at once is run.
    let template = Arc::new(template);
    let client = Arc::new(client);
    let how = if std::env::var("SOAK_THREADS").is_ok_and(|v| v == "spawn") {
        AtOnce::Spawn
    } else {
        AtOnce::Pool(Pool::new(&template, &client, at_once))
    };
    at_once_round(&how, &template, &client, at_once, 1_000_000)?;
    let before = held();
    println!("before: {before:?}");

    let start = Instant::now();
    let mut times = Vec::with_capacity(sequential);
    for n in 1..=sequential {
        times.push(one(&template, n, &client)?);
    }
    report("in a row", times, start.elapsed());
    let after_row = held();
    println!("after the launches in a row: {after_row:?}");

    let mut times = Vec::with_capacity(at_once * rounds);
    let mut wall = Duration::ZERO;
    let (cpu_before, machine_before) = (cpu(), machine());
    for round in 0..rounds {
        MARKS.lock().map_err(|_| "a launch panicked")?.clear();
        let start = Instant::now();
        let round_times = at_once_round(
            &how,
            &template,
            &client,
            at_once,
            sequential + 1 + (round + 1) * at_once,
        )?;
        let took = start.elapsed();
        wall += took;
        // The latest of each mark, from the round's start.
        let latest = |i: usize| {
            MARKS.lock().map_or(0.0, |m| {
                m.iter()
                    .map(|marks| marks[i].saturating_duration_since(start).as_secs_f64() * 1e3)
                    .fold(0.0, f64::max)
            })
        };
        println!(
            "  after round {}: RSS {} KiB; the round {:.0} ms, its slowest launch {:.0} ms; \
             the last to enter {:.0} ms, to call launch {:.0}, to stop {:.0}, to leave {:.0}",
            round + 1,
            held().rss_kib,
            took.as_secs_f64() * 1e3,
            round_times
                .iter()
                .max()
                .unwrap_or(&Duration::ZERO)
                .as_secs_f64()
                * 1e3,
            latest(0),
            latest(1),
            latest(2),
            latest(3),
        );
        times.extend(round_times);
    }
    let (cpu_after, machine_after) = (cpu(), machine());
    #[allow(clippy::cast_precision_loss)]
    let n = times.len().max(1) as f64;
    let per = |i: usize| (cpu_after[i] - cpu_before[i]) * 1e3 / n;
    println!(
        "CPU per launch at once: {:.2} ms (this process: user {:.2}, system {:.2}; the \
         clients: user {:.2}, system {:.2}); the machine busy {:.2} ms per launch, {:.0}% of it",
        per(0) + per(1) + per(2) + per(3),
        per(0),
        per(1),
        per(2),
        per(3),
        (machine_after.0 - machine_before.0) * 1e3 / n,
        (machine_after.0 - machine_before.0) / (machine_after.1 - machine_before.1).max(1e-9)
            * 100.0
    );
    report(&format!("{at_once} at once"), times, wall);
    if std::env::var("SOAK_MALLOC_STATS").is_ok_and(|v| v == "1") {
        // glibc's per-arena figures, on standard error.
        // SAFETY: malloc_stats takes no arguments and only prints.
        unsafe { libc::malloc_stats() };
    }

    // What a stop leaves to finish (a cgroup that empties late) has had its time.
    std::thread::sleep(Duration::from_millis(200));
    let after = held();
    println!("after: {after:?}");
    let (dirs, cgroups) = (leftovers(&root), cgroups_left());
    println!("launch directories left: {dirs}; launch cgroups left: {cgroups}");
    #[allow(clippy::cast_precision_loss)]
    let growth = (after.rss_kib as f64 / before.rss_kib.max(1) as f64 - 1.0) * 100.0;
    println!(
        "RSS: {} KiB before, {} KiB after ({growth:+.1}%)",
        before.rss_kib, after.rss_kib
    );
    let clean = after.fds == before.fds
        && after.threads == before.threads
        && after.children == before.children
        && dirs == 0
        && cgroups == 0
        && growth <= 10.0;
    if let AtOnce::Pool(pool) = how {
        pool.join();
    }
    println!(
        "{}",
        if clean {
            "nothing left behind"
        } else {
            "LEFT BEHIND (see above)"
        }
    );
    if clean {
        Ok(())
    } else {
        Err("something was left behind".into())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
