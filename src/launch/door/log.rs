//! The door's log: the lines it writes (a refusal, an upstream down, a bound passed), kept
//! so that a reviewer cannot erase them.
//!
//! The door keeps its first [`KEPT_FIRST`] lines and its last [`KEPT_LAST`], and counts the
//! lines between them it dropped: a reviewer that floods the log (a connection it has
//! refused, a request over its budget, again and again) pushes out neither its first
//! refusals, which are the evidence, nor the count of what came after. A log that kept its
//! last lines only (the door of main: the last 256) lost its first refusals to 256 more
//! (red team, issue 32: a reviewer pushed its earlier refusals out).

use std::collections::VecDeque;

use super::MAX_LOG_LINES;

/// The door keeps its first this many log lines, whatever comes after them.
pub const KEPT_FIRST: usize = MAX_LOG_LINES / 2;
/// And its last this many.
pub const KEPT_LAST: usize = MAX_LOG_LINES - KEPT_FIRST;

/// The lines kept and the count of those dropped.
#[derive(Debug, Default)]
pub(super) struct Log {
    first: Vec<String>,
    last: VecDeque<String>,
    dropped: u64,
}

impl Log {
    /// Adds `line`: among the first, or the last, dropping the oldest of the last.
    pub(super) fn push(&mut self, line: String) {
        if self.first.len() < KEPT_FIRST {
            self.first.push(line);
            return;
        }
        if self.last.len() == KEPT_LAST {
            self.last.pop_front();
            self.dropped += 1;
        }
        self.last.push_back(line);
    }

    /// The lines kept, oldest first; where lines were dropped, between the first and the
    /// last, one line says how many: `door: <n> log lines dropped here (the first 128 and
    /// the last 128 are kept)`.
    pub(super) fn lines(&self) -> Vec<String> {
        let mut lines = self.first.clone();
        if self.dropped > 0 {
            lines.push(format!(
                "door: {} log lines dropped here (the first {KEPT_FIRST} and the last \
                 {KEPT_LAST} are kept)",
                self.dropped
            ));
        }
        lines.extend(self.last.iter().cloned());
        lines
    }

    /// How many lines were dropped.
    #[cfg(test)]
    fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_keeps_the_first_lines_and_counts_what_it_dropped() {
        let mut log = Log::default();
        log.push("refused the first".into());
        for i in 0..10_000 {
            log.push(format!("flood {i}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), MAX_LOG_LINES + 1);
        assert_eq!(lines[0], "refused the first");
        assert_eq!(lines[1], "flood 0");
        let dropped = 10_001 - MAX_LOG_LINES;
        assert_eq!(log.dropped(), dropped as u64);
        assert_eq!(
            lines[KEPT_FIRST],
            format!(
                "door: {dropped} log lines dropped here (the first 128 and the last 128 are \
                 kept)"
            )
        );
        assert_eq!(
            lines[KEPT_FIRST + 1],
            format!("flood {}", 10_000 - KEPT_LAST)
        );
        assert_eq!(lines.last().unwrap(), "flood 9999");
    }

    #[test]
    fn a_log_that_fits_is_kept_whole_with_no_count() {
        let mut log = Log::default();
        for i in 0..MAX_LOG_LINES {
            log.push(format!("line {i}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), MAX_LOG_LINES);
        assert!(
            lines
                .iter()
                .enumerate()
                .all(|(i, l)| *l == format!("line {i}"))
        );
        assert_eq!(log.dropped(), 0);
    }
}
