//! What a family's evicted breakers counted.

use std::sync::Mutex;

use crate::breaker::Breaker;

/// What the breakers no longer in the family counted.
#[derive(Default)]
pub(super) struct Totals(Mutex<Gone>);

#[derive(Default)]
pub(super) struct Gone {
    pub(super) evicted: Evicted,
    /// Evicted breakers that something else still holds (their slot, not freed yet while a
    /// pinned call may run; a permit; a user's handle), counted by `evicted` when read.
    pub(super) limbo: Vec<Breaker>,
    /// The latency histograms of the evicted breakers freed: their counts since they were
    /// made (empty until one had any), and the sum of their durations.
    pub(super) latency: Vec<u64>,
    pub(super) latency_sum: u64,
}

impl Totals {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Gone> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Folds in the breakers of `limbo` nothing else holds any more. Drops them after
    /// unlocking: a breaker's last drop runs its listeners' drops, which are user code.
    pub(super) fn prune(&self) {
        let done: Vec<Breaker> = {
            let mut gone = self.lock();
            let done: Vec<Breaker> = gone.limbo.extract_if(.., |b| b.handles() == 1).collect();
            for b in &done {
                gone.add(b.counts());
                gone.add_latency(b);
            }
            done
        };
        drop(done);
    }
}

impl Gone {
    /// Keeps the latency counts of `b`, a breaker freed.
    fn add_latency(&mut self, b: &Breaker) {
        let Some((total, sum)) = b.latency_total() else {
            return;
        };
        if self.latency.is_empty() {
            self.latency = vec![0; total.len()];
        }
        for (to, n) in self.latency.iter_mut().zip(total.iter()) {
            *to += n;
        }
        self.latency_sum = self.latency_sum.saturating_add(sum);
    }

    pub(super) fn add(
        &mut self,
        [successes, failures, ignored, rejected, slow, timeouts]: [u64; 6],
    ) {
        let e = &mut self.evicted;
        e.calls += successes + failures + ignored + rejected;
        e.successes += successes;
        e.failures += failures;
        e.ignored += ignored;
        e.rejected += rejected;
        e.slow += slow;
        e.timeouts += timeouts;
    }
}

/// The counts of a family's evicted breakers, including calls that record into them after
/// the eviction (a permit taken before it, a handle from [`BreakerMap::get`](crate::BreakerMap::get)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Evicted {
    /// Keys evicted.
    pub keys: u64,
    /// Calls asked for, run or rejected, by the breakers freed.
    pub calls: u64,
    /// Their successes.
    pub successes: u64,
    /// Their failures.
    pub failures: u64,
    /// Their calls counted neither way.
    pub ignored: u64,
    /// Their rejections.
    pub rejected: u64,
    /// Their slow calls.
    pub slow: u64,
    /// Their timeouts (among their failures). With `serde`, read as 0 when absent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub timeouts: u64,
}
