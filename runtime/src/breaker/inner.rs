//! The breaker's shared state, [`Inner`], and its layout in three cache lines; the parts few
//! breakers use ([`Extras`]), made on first use; and what it reads of itself.

use core::time::Duration;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use once_cell::race::OnceBox;

use super::probing::ProbeSlot;
use super::rejected::Report;
use crate::clock::ClockRef;
use crate::config::{Config, intern};
use crate::counters::{Count, Counts, Slot, Spill};
use crate::event::{Event, Listeners};
use crate::metrics::Metrics;
use crate::state::{Places, Round, State, Streak, Word};
use crate::sync::{Atomic, AtomicU32, AtomicU64, Mutex, Ordering};
use crate::window::RateWindow;

/// What a breaker's handles share: its state. Dropped with the last handle, which drops the
/// breaker's `Inner` unless a lease still holds it.
pub(super) struct Handle {
    pub(super) inner: Arc<Inner>,
    /// A registry breaker, which lives for the process, as a `'static` reference: what its
    /// rejections and leases hold instead of a reference count. `None` for any other.
    pub(super) forever: Option<&'static Inner>,
}

/// The breaker's shared state. `Breaker` is a handle to it.
///
/// PERF(`closed_2t/bb_call`, `open_1t/bb_call`): three cache lines, laid out by hand (`repr(C)`;
/// the offsets are checked below):
/// - the first holds what every call reads and only transitions and streak changes write,
///   including the open deadline, so a rejection reads this line and nothing else shared;
/// - the second is the first thread's counter stripe, written by that thread alone on every
///   call, with fields beside it that only transitions touch;
/// - the third is written on the slower paths: probes, bulkhead, `failures_within`, handle
///   clones.
///
/// 192 bytes in all (a test holds it there): per-key breakers are made by the thousand.
#[repr(C, align(64))]
pub(super) struct Inner {
    // Line 0. Read on every call; written only on transitions and streak changes.
    pub(super) state: Atomic<Word>,
    pub(super) streak: Atomic<Streak>,
    /// Shared by every breaker with an equal config (see `intern`): per-key breakers made by
    /// the thousand from one config pay for it once.
    /// Replaceable by a reload (`Breaker::reconfigure`): the configs it replaced are kept in
    /// `Extras::retired` while the breaker lives.
    pub(super) config: crate::reconfigure::LiveConfig,
    pub(super) window: Option<Box<RateWindow>>,
    /// What its rejections report: name, key, clock, last failure.
    pub(super) report: Arc<Report>,
    /// Whether a closed-state admission is just a state load: no bulkhead, no clock (no
    /// `slow` threshold and no `latency` to time calls for).
    pub(super) plain_acquire: bool,
    /// Whether a closed-state success needs nothing but a count and a streak check: no slow
    /// threshold to measure, no window to fill, no bulkhead to release.
    pub(super) plain_success: bool,
    /// Whether a closed-state success only fills the rate window: a failure-rate policy with
    /// no slow threshold and no bulkhead. Taken inline, like `plain_success`.
    pub(super) window_success: bool,
    /// Whether registry-wide listeners are told its changes: a registry breaker's, and a
    /// registry family's key's (set by [`Breaker::keyed`](super::Breaker::keyed)).
    pub(super) tells_registry: bool,
    /// The thread that owns `counts`: written once, read by every call.
    pub(super) owner: AtomicU64,
    /// While open: when it may probe. Written with the transition to `Open`.
    pub(super) open_until: AtomicU64,

    // Line 1. The first thread to record writes its counts here alone; see counters.rs.
    pub(super) counts: Counts,
    /// When the state last changed. Written on transitions, read by `metrics`.
    pub(super) state_since: AtomicU64,
    pub(super) times_opened: AtomicU64,
    pub(super) transition: Mutex<()>,

    // Line 2. Written on the slower paths.
    pub(super) spill: Spill,
    /// What few breakers use, allocated on first use.
    pub(super) extras: OnceBox<Extras>,
    /// When the current `failures_within` streak started; see `record_within_failure`.
    pub(super) mark: AtomicU64,
    pub(super) probe: Atomic<Round>,
    /// The handles' shared part, for the weak handles an armed timer holds.
    pub(super) handle: Weak<Handle>,
    pub(super) reopens: AtomicU32,
    /// Numbers `failures_within` streaks, to tag them (see `record_within_failure`).
    pub(super) starts: AtomicU32,
    /// Bulkhead places: the generation they were taken in (high 32 bits) and how many are
    /// taken (low 32). The first admission of a generation starts the count over, so a place
    /// whose permit never records (forgotten, or parked for ever) is freed by the next
    /// transition; see `acquire_other`.
    pub(super) active: Atomic<Places>,
}

// PERF(`closed_2t/bb_call`, `open_1t/bb_call`): the layout the comments above describe. Not
// under loom, whose atomics are larger.
#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::offset_of!(Inner, open_until) < 64);
    assert!(core::mem::offset_of!(Inner, counts) == 64);
    assert!(core::mem::offset_of!(Inner, spill) == 128);
};

/// The longest key text a breaker keeps; a longer one is cut at a character boundary.
pub(super) const MAX_KEY: usize = u16::MAX as usize - 1;

impl Inner {
    /// The breaker's name: a keyed family's, for its breakers.
    pub(super) fn name(&self) -> &str {
        self.report.identity.name()
    }

    /// The key's text of a keyed family's breaker, as it displayed when the breaker was made.
    pub(super) fn key(&self) -> Option<&str> {
        self.report.key.as_deref()
    }

    pub(super) fn new(report: Report, config: Config) -> Inner {
        let now = config.clock.coarse();
        if config.timed() {
            // Here rather than in the first timed call, which would wait for the calibration.
            config.clock.start_timer();
        }
        let window = config
            .uses_window()
            .then(|| Box::new(RateWindow::new(config.window, &config.clock)));
        Inner {
            state: Atomic::new(Word::new(0, State::Closed)),
            streak: Atomic::new(Streak::new(0)),
            window,
            report: Arc::new(report),
            open_until: AtomicU64::new(0),
            state_since: AtomicU64::new(now),
            mark: AtomicU64::new(now),
            probe: Atomic::new(Round::new(0)),
            reopens: AtomicU32::new(0),
            starts: AtomicU32::new(0),
            active: Atomic::new(Places::new(0, 0)),
            times_opened: AtomicU64::new(0),
            transition: Mutex::new(()),
            extras: OnceBox::new(),
            handle: Weak::new(),
            tells_registry: false,
            plain_acquire: !config.timed() && config.max_concurrent.is_none(),
            plain_success: !config.timed()
                && !config.uses_window()
                && config.max_concurrent.is_none(),
            window_success: !config.timed()
                && config.failure_rate.is_some()
                && config.max_concurrent.is_none(),
            owner: AtomicU64::new(0),
            counts: Counts::default(),
            spill: Spill::default(),
            config: crate::reconfigure::LiveConfig::new(intern(config)),
        }
    }

    /// `SharedState::reopens`: the re-opens since the last close. `reopens` counts openings
    /// (the first is not a re-open), and is the backoff level of the next one.
    pub(super) fn reopens_since_close(&self) -> u32 {
        self.reopens.load(Ordering::Relaxed).saturating_sub(1)
    }

    /// How many probes a half-open round admits: `half_open_calls`, or fewer under a probe
    /// budget (`Breaker::set_probe_budget`). Read on the half-open slow path only.
    pub(super) fn probe_limit(&self) -> u32 {
        let limit = self.config.half_open_calls;
        match self.extras.get().map_or(0, |c| {
            c.probe_budget.load(std::sync::atomic::Ordering::Relaxed)
        }) {
            0 => limit,
            budget => limit.min(budget - 1),
        }
    }

    pub(super) fn clock(&self) -> &ClockRef {
        &self.config.clock
    }

    /// Counts one `kind`; returns the calling thread's counter slot.
    #[inline]
    pub(super) fn count(&self, kind: Count) -> Slot {
        self.counts.add(&self.owner, &self.spill, kind)
    }

    /// Failures that were timeouts ([`Permit::timed_out`](super::Permit::timed_out)). Read
    /// before the failures, with Acquire: never more than the failures read after it.
    pub(super) fn timeouts(&self) -> u64 {
        self.extras
            .get()
            .map_or(0, |c| c.timeouts.load(std::sync::atomic::Ordering::Acquire))
    }

    pub(super) fn extras(&self) -> &Extras {
        self.extras.get_or_init(Box::default)
    }

    /// The message of the failure that last tripped the breaker.
    pub(super) fn last_failure(&self) -> Option<Arc<str>> {
        self.report.last_failure()
    }

    /// Keeps `failure` as the last one.
    pub(super) fn set_last_failure(&self, failure: Option<Arc<str>>) {
        *self
            .report
            .last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = failure;
    }

    pub(super) fn metrics(&self) -> Metrics {
        let word = self.state.load(Ordering::Acquire);
        let state = word.state();
        let now = self.clock().coarse();
        let timeouts = self.timeouts();
        let c = |kind| self.counts.total(&self.spill, kind);
        let (successes, failures, ignored, rejected, slow) = (
            c(Count::Success),
            c(Count::Failure),
            c(Count::Ignored),
            c(Count::Rejected),
            c(Count::Slow),
        );
        let streak = self.streak.load(Ordering::Relaxed);
        let count = if self.config.failures_within.is_some() {
            streak.within_failures()
        } else {
            streak.failures()
        };
        let consecutive_failures =
            if state == State::Closed && streak.generation() == word.generation() {
                u64::from(count)
            } else {
                0
            };
        let probe = self.probe.load(Ordering::Relaxed);
        let consecutive_successes =
            if state == State::HalfOpen && probe.generation() == word.generation() {
                u64::from(probe.successes())
            } else {
                0
            };
        let tally = self.window.as_ref().map(|w| w.tally(now));
        let rate = |n: u64, calls: u64| (calls > 0).then(|| n as f64 * 100.0 / calls as f64);
        Metrics {
            name: self.name().to_string(),
            state,
            time_in_state: Duration::from_nanos(
                now.saturating_sub(self.state_since.load(Ordering::Relaxed)),
            ),
            calls: successes + failures + ignored + rejected,
            successes,
            failures,
            ignored,
            rejected,
            slow,
            timeouts,
            window_calls: tally.map_or(0, |t| t.calls),
            failure_rate: tally.and_then(|t| rate(t.failures, t.calls)),
            slow_rate: tally.and_then(|t| rate(t.slow, t.calls)),
            consecutive_failures,
            consecutive_successes,
            times_opened: self.times_opened.load(Ordering::Relaxed),
            retry_after: (state == State::Open).then(|| {
                let until = self.report.shown(self.open_until.load(Ordering::Relaxed));
                Duration::from_nanos(until.saturating_sub(now))
            }),
            last_failure: self.last_failure().map(|s| s.to_string()),
        }
    }
}

/// The parts of a breaker that few breakers use.
#[derive(Default)]
pub(super) struct Extras {
    pub(super) listeners: Listeners,
    /// Events not yet told, in the order of their transitions (queued under the transition
    /// lock), and whether a thread is telling them. One thread at a time delivers, so
    /// listeners see transitions in order even when two threads cause them at once, and a
    /// listener that changes the state itself queues its event instead of deadlocking. The
    /// flag lives under the queue's lock: the deliverer finds the queue empty and stops
    /// delivering in one step, so no event is left behind.
    pub(super) pending: Mutex<Pending>,
    /// The message of the last failure a rate window judged too soon (fewer than `min_calls`
    /// calls), with its generation: a success that brings the window to `min_calls` may trip
    /// it, and its rejections name this failure. std, not loom: a plain slot.
    pub(super) behind: std::sync::Mutex<Option<(u32, Arc<str>)>>,
    /// The probe budget set by [`Breaker::set_probe_budget`](crate::Breaker::set_probe_budget),
    /// plus one; 0 (the default) for none. std, not loom: a setting read on the half-open
    /// slow path, no protocol runs through it.
    pub(super) probe_budget: std::sync::atomic::AtomicU32,
    /// How many times `force_open`, `disable`, `reset` or `trip_for` were called, whether or
    /// not the state changed: fleet mode tells by it that a breaker it holds forced open was
    /// forced open by hand meanwhile (which changes no state, so tells no event). std, not
    /// loom: a counter, no protocol runs through it.
    pub(super) manual: std::sync::atomic::AtomicU32,
    /// Why the breaker is in its state, for `explain`: written with each transition, under
    /// the transition lock. std, not loom: a plain slot.
    pub(super) why: std::sync::Mutex<crate::explain::Why>,
    /// A rate trip's tally (generation, bad calls, calls), left by `judge_rates` for the
    /// transition it asks for.
    pub(super) tally: std::sync::Mutex<Option<(u32, u64, u64)>>,
    /// The configs a reload replaced: kept while the breaker lives, since a call may still
    /// read one (see `LiveConfig`).
    pub(super) retired: std::sync::Mutex<Vec<Arc<crate::config::Config>>>,
    /// Health probes (`crate::probe`): the opening being probed, and the counts.
    pub(super) probing: ProbeSlot,
    /// When the half-open round of a generation admitted its first probe: from then on, an
    /// ignored or cancelled probe frees its slot only for `probe_timeout`.
    pub(super) round_start: std::sync::Mutex<Option<(u32, u64)>>,
    /// Failures that were calls run past their timeout (`Permit::timed_out`), also counted
    /// among the failures. A shared word: a timed-out call has waited out its timeout, and
    /// counting it here keeps the counter stripes, and the calls that do not time out, as
    /// they are. std, not loom: a counter whose one ordering (after the failure's count) is
    /// a reader's nicety, not a protocol.
    pub(super) timeouts: std::sync::atomic::AtomicU64,
    /// The latency histogram of a breaker that times its calls, allocated at the first.
    pub(super) latency: crate::sync::LazyBox<crate::latency::Latency>,
}

#[derive(Default)]
pub(super) struct Pending {
    pub(super) events: VecDeque<Event>,
    pub(super) delivering: bool,
}
