//! [`Extras`]: the parts of a breaker that few breakers use, allocated on first use. The data
//! only: telling the queued events is in `delivery.rs`, which names `Inner`; this file names
//! nothing of the breaker, so `inner.rs` can hold an `Extras` without a cycle.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::event::{Event, Listeners};
use crate::sync::Mutex;

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
    pub(super) probing: super::probing::ProbeSlot,
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
