//! What a launch may spend through the door with the daemon's credential: a budget of
//! requests ([`Settings::keyed_requests`](super::Settings::keyed_requests)) and a rate
//! ([`Settings::keyed_rate`](super::Settings::keyed_rate)), over all its endpoints with a
//! credential together.
//!
//! The budget refuses: a request past it gets a `429` and never reaches the upstream. The
//! rate holds back: a request that comes faster waits for its turn, then goes, so a client
//! that bursts is slowed, not failed (a generic cell rate algorithm, RFC 2697's single token
//! bucket in its virtual-scheduling form: each request reserves the next slot, one
//! [`Rate::interval`] after the last, [`Rate::burst`] of them at once).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How fast the door passes requests with the daemon's credential: [`Rate::burst`] at
/// once, then one every [`Rate::interval`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// How many may go at once, after a pause (at least 1).
    pub burst: u32,
    /// How long, on average, between two once the burst is spent.
    pub interval: Duration,
}

/// The launch's budget and rate, and what it has spent.
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// [`Settings::keyed_requests`](super::Settings::keyed_requests).
    pub(super) limit: u64,
    rate: Option<Rate>,
    passed: AtomicU64,
    refused: AtomicU64,
    /// When the next request's slot comes, at the rate (the theoretical arrival time).
    next: Mutex<Option<Instant>>,
}

impl Budget {
    /// A budget of `limit` requests at `rate`.
    pub(super) fn new(limit: u64, rate: Rate) -> Budget {
        Budget {
            limit,
            rate: Some(rate),
            ..Budget::default()
        }
    }

    /// Takes one request of the budget: `Err(n)` when it is used up, `n` the requests
    /// refused so far, this one included.
    pub(super) fn take(&self) -> Result<(), u64> {
        let taken = self
            .passed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.limit).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(()),
            Err(_) => Err(self.refused.fetch_add(1, Ordering::SeqCst) + 1),
        }
    }

    /// Reserves the next slot at the rate and returns how long to wait for it (zero within
    /// the burst).
    pub(super) fn slot(&self) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let tolerance = rate.interval * rate.burst.max(1).saturating_sub(1);
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = next.map_or(now, |n| n.max(now));
        *next = Some(at + rate.interval);
        (at.checked_sub(tolerance).unwrap_or(now)).saturating_duration_since(now)
    }

    /// The requests passed with the credential, and those refused past the budget.
    pub(super) fn spent(&self) -> (u64, u64) {
        (
            self.passed.load(Ordering::SeqCst),
            self.refused.load(Ordering::SeqCst),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_passes_its_limit_and_counts_what_it_refuses() {
        let rate = Rate {
            burst: 1,
            interval: Duration::ZERO,
        };
        let budget = Budget::new(3, rate);
        assert_eq!([budget.take(), budget.take(), budget.take()], [Ok(()); 3]);
        assert_eq!([budget.take(), budget.take()], [Err(1), Err(2)]);
        assert_eq!(budget.spent(), (3, 2));
    }

    #[test]
    fn the_rate_lets_a_burst_go_then_spaces_the_rest() {
        let interval = Duration::from_secs(10);
        let budget = Budget::new(100, Rate { burst: 3, interval });
        let waits: Vec<Duration> = (0..6).map(|_| budget.slot()).collect();
        for w in &waits[..3] {
            assert!(w.is_zero(), "{waits:?}");
        }
        for (i, w) in waits[3..].iter().enumerate() {
            let want = interval * (i as u32 + 1);
            assert!(
                *w <= want && *w + Duration::from_secs(1) > want,
                "{i}: {waits:?}"
            );
        }
    }
}
