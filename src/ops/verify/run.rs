//! Carrying a prepared run out: the executor, the bounded wait for the injected servers,
//! the stop, and the judgement.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use super::recorder::{Record, read_records};
use super::report::{self, Expected, Outcome, Report};
use super::{Bench, FAIL_GRACE, VerifyError, probe};
use crate::launch::sandbox::Confinement;
use crate::launch::{self, AcpEvent, ExecError, Reviewer, TerminalEvent};

impl Bench {
    /// Carries the plan out, waits for the injected servers, stops the client and judges
    /// what the recorders saw.
    ///
    /// # Errors
    /// [`VerifyError::Launch`] when the executor refuses the plan or cannot start the client
    /// or its ACP handshake fails; [`VerifyError::Records`] when the records cannot be read.
    pub fn run(self) -> Result<Report, VerifyError> {
        let request = &self.request;
        let version = probe::client_version(
            &request.client_bin,
            &self.plan,
            &self.parent_env,
            &self.root.dir.join("version"),
        );
        let records_dir = self.root.dir.join("records");
        let options = super::options(request, &self.root.dir);
        let lookup = |name: &str| self.parent_env.get(name).map(OsString::from);
        let started = Instant::now();
        let reviewer =
            launch::launch_with_parent_env(&self.plan, &request.client_bin, &options, &lookup)
                .map_err(VerifyError::Launch)?;
        let (outcome, output) = self.wait(reviewer, started)?;
        let elapsed = started.elapsed();
        let records = read_records(&records_dir).map_err(|source| VerifyError::Records {
            path: records_dir.clone(),
            source,
        })?;
        let worktree = self.worktree.to_string_lossy().into_owned();
        let (started, checks) = report::judge(report::Seen {
            expected: &self.expected,
            records,
            sources: &self.sources,
            parent_env: &self.parent_env,
            plan: &self.plan,
            cwd: request
                .client
                .spec()
                .verify
                .is_some_and(|v| v.servers_run_in_worktree)
                .then_some(worktree.as_str()),
            outcome: &outcome,
            sandbox: (request.confinement != Confinement::Off).then_some(self.attacks.as_slice()),
        });
        Ok(Report {
            client: request.client,
            client_bin: request.client_bin.clone(),
            client_version: version,
            scenario: request.scenario,
            plan: self.plan.clone(),
            expected: self.expected.clone(),
            started,
            checks,
            outcome,
            client_output: output,
            worktree: self.worktree.clone(),
            elapsed,
        })
    }

    /// Waits until every injected server listed its tools (then the settle time), the client
    /// ends, or the bound passes; stops the client. Returns how the run ended and the
    /// client's last output.
    fn wait(
        &self,
        mut reviewer: Reviewer,
        started: Instant,
    ) -> Result<(Outcome, String), VerifyError> {
        let records_dir = self.root.dir.join("records");
        let poll = Duration::from_millis(100);
        let mut tail = Tail::default();
        let mut settled_at: Option<Instant> = None;
        let mut deadline = started + self.request.timeout;
        let mut failed = false;
        let outcome = loop {
            let (all_listed, other) = self.progress(&records_dir);
            if other && !failed {
                // A start the launch did not ask for already fails the run: wait only a
                // little longer for the rest to show.
                failed = true;
                deadline = deadline.min(Instant::now() + FAIL_GRACE.max(self.request.settle));
            }
            if let Some(at) = settled_at {
                if at.elapsed() >= self.request.settle {
                    break Outcome::Complete;
                }
            } else if all_listed {
                settled_at = Some(Instant::now());
            } else if Instant::now() > deadline {
                break Outcome::TimedOut(started.elapsed());
            }
            if let Some(ended) = next(&mut reviewer, poll, &mut tail) {
                // A client that ends once every injected server is up ran far enough.
                break if settled_at.is_some() {
                    Outcome::Complete
                } else {
                    ended
                };
            }
        };
        let output = match &reviewer {
            Reviewer::Acp(s) => s.stderr_tail(),
            Reviewer::Terminal(_) => tail.text(),
        };
        if self.request.keep_root {
            reviewer.keep_launch_dir();
        }
        reviewer.stop().map_err(VerifyError::Launch)?;
        Ok((outcome, output))
    }

    /// Whether every injected server listed its tools, and whether anything else started.
    fn progress(&self, records_dir: &Path) -> (bool, bool) {
        let Ok(records) = read_records(records_dir) else {
            return (false, false);
        };
        let is = |e: &Expected, r: &Record| r.argv == e.argv && r.kcap_env() == e.env;
        let all_listed = self
            .expected
            .iter()
            .all(|e| records.iter().any(|r| r.listed_tools && is(e, r)));
        let other = records
            .iter()
            .any(|r| !self.expected.iter().any(|e| is(e, r)));
        (all_listed, other)
    }
}

/// Reads what the reviewer did for up to `timeout` (a terminal client's output into `tail`);
/// `Some` when it ended.
fn next(reviewer: &mut Reviewer, timeout: Duration, tail: &mut Tail) -> Option<Outcome> {
    let ended = |e: ExecError| Some(Outcome::Ended(crate::text::error_chain(&e)));
    match reviewer {
        Reviewer::Acp(session) => match session.next_event(timeout) {
            Ok(Some(AcpEvent::Exited(status))) => Some(Outcome::Ended(format!(
                "the client exited ({}) before every injected server listed its tools",
                status.map_or("status unknown".to_owned(), |s| s.to_string())
            ))),
            Ok(_) => None,
            Err(e) => ended(e),
        },
        Reviewer::Terminal(session) => match session.next_event(timeout) {
            Ok(Some(TerminalEvent::Exited(status))) => Some(Outcome::Ended(format!(
                "the client exited ({}) before every injected server listed its tools",
                status.map_or("status unknown".to_owned(), |s| s.to_string())
            ))),
            Ok(Some(TerminalEvent::Output(bytes))) => {
                tail.push(&bytes);
                None
            }
            Ok(_) => None,
            Err(e) => ended(e),
        },
    }
}

/// The end of a terminal client's output, as text: escape sequences and control
/// characters taken out.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
}

/// How much of a terminal client's output is kept.
const TAIL: usize = 8 * 1024;

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
        if self.bytes.len() > TAIL {
            self.bytes.drain(..self.bytes.len() - TAIL);
        }
    }

    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let mut out = String::new();
        let mut col = 0usize;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\u{1b}' => match chars.next() {
                    // CSI: parameters, then a final byte in @..~. Cursor moves to the right
                    // (`C`, `G`) stand for spaces; the rest is dropped.
                    Some('[') => {
                        let mut params = String::new();
                        for c in chars.by_ref() {
                            if ('@'..='~').contains(&c) {
                                let n = params.parse::<usize>().unwrap_or(1).min(200);
                                let pad = match c {
                                    'C' => n,
                                    'G' => n.saturating_sub(1).saturating_sub(col),
                                    _ => 0,
                                };
                                out.extend(std::iter::repeat_n(' ', pad));
                                col += pad;
                                break;
                            }
                            params.push(c);
                        }
                    }
                    // OSC: up to BEL or ESC \.
                    Some(']') => {
                        while let Some(c) = chars.next() {
                            if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some())
                            {
                                break;
                            }
                        }
                    }
                    // A character set: one more character.
                    Some('(' | ')') => {
                        chars.next();
                    }
                    _ => {}
                },
                '\n' => {
                    out.push('\n');
                    col = 0;
                }
                c if c.is_control() => {}
                c => {
                    out.push(c);
                    col += 1;
                }
            }
        }
        let lines: Vec<&str> = out
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::Tail;

    #[test]
    fn a_terminal_clients_output_reads_as_text() {
        let mut tail = Tail::default();
        tail.push(b"\x1b[2G\x1b[95mUnable\x1b[9Gto\x1b[3Cgo\x1b[39m\r\r\n\r\r\n");
        tail.push(b"\x1b]0;title\x07x\x1b(By\x1b[?25h");
        assert_eq!(tail.text(), " Unable to   go\nxy");
        tail.push(&[b'z'; 9000]);
        assert_eq!(tail.text(), "z".repeat(8 * 1024));
    }
}
