//! True state without traffic: timers that move an open breaker to half-open when its open
//! time ends, whether or not a call arrives.
//!
//! # The protocol
//!
//! * A transition to `Open` arms a timer on the breaker's clock, under the transition lock,
//!   before it publishes the state. If the timer is armed, the published state word carries
//!   [`TIMED`]; a rejection that sees it answers without reading the clock (a load and a
//!   compare). If no timer can be armed (a user clock without [`Clock::timers`], a timer thread
//!   that could not start or has stopped), the word has no `TIMED` and a rejection reads the
//!   clock as before, moving the breaker on itself when the time is up. Nor does a timer on
//!   [`Timers::best_effort`] ones (`TokioClock`'s on a current-thread runtime, whose task runs
//!   only while something drives that runtime): it is armed, and whichever comes first, its
//!   firing or a call after the open time, moves the breaker on.
//! * A timer that fires takes the transition lock and moves the breaker from `Open` to
//!   `HalfOpen` only if it is still in the opening the timer was armed for (its generation):
//!   a reset, a re-trip or a call that got there first leaves nothing for it to do.
//! * [`Timers::shutdown`] (also run if the system timer thread ever stops) takes every armed
//!   timer out and clears `TIMED` from each breaker still in that opening, so those fall back
//!   to reading the clock: no breaker is left open for good.
//!
//! [`Clock::timers`]: crate::Clock::timers

use core::cmp::Reverse;
use core::time::Duration;
use std::collections::BinaryHeap;

use crate::state::Word;
use crate::sync::Packed;
// std's lock, not loom's, even under loom: no atomic protocol runs through the heap (each
// critical section is a push or a pop with no atomic inside), and loom's would multiply the
// interleavings of every model in which a breaker opens.
use std::sync::Mutex;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The state word's flag (above the state tag's byte) saying that a timer will move this open
/// breaker on: its rejections need not read the clock.
pub(crate) const TIMED: u64 = 1 << 8;

impl Word {
    /// Whether a timer will move this (open) breaker on.
    #[inline(always)]
    pub(crate) fn is_timed(self) -> bool {
        self.bits() & TIMED != 0
    }

    /// The word with [`TIMED`].
    pub(crate) fn timed(self) -> Word {
        <Word as Packed>::from_bits(self.bits() | TIMED)
    }

    /// The word without [`TIMED`].
    pub(crate) fn untimed(self) -> Word {
        <Word as Packed>::from_bits(self.bits() & !TIMED)
    }
}

/// In a rejection's reason word: the retry word is the open deadline on the breaker's clock,
/// not the time left (a timed rejection reads no clock); `Rejected::retry_after` subtracts.
pub(crate) const RETRY_AT: u64 = 1 << 8;

/// What an armed wake-up moves on: a breaker, held weakly so that a timer never keeps it
/// alive. The breaker implements it (`breaker/open_timer.rs`), so that the timers, which sit below
/// the clock (`Clock::timers` returns them), need not name the breaker.
pub(crate) trait Target: Send + Sync {
    /// The wake-up armed at `at` for the opening `generation` is due: moves the breaker from
    /// open to half-open if it is still in that opening. Its listeners are told on this
    /// thread, or, if `defer` (the system timer thread), on the notifier thread.
    fn wake(self: Box<Self>, generation: u32, at: u64, defer: bool);

    /// The wake-up armed for the opening `generation` will not fire (shut down): if still in
    /// it, the breaker reads its clock on each rejection again.
    fn disarm(self: Box<Self>, generation: u32, defer: bool);
}

/// The wake-ups a clock owes its open breakers, by deadline.
///
/// A [`Clock`](crate::Clock) that can drive timers returns one from
/// [`Clock::timers`](crate::Clock::timers) and calls [`fire_due`](Timers::fire_due) whenever
/// its time moves; [`ManualClock`](crate::ManualClock) does so in
/// [`advance`](crate::ManualClock::advance) and [`set`](crate::ManualClock::set), so that an
/// open breaker turns half-open (and tells its listeners, on the advancing thread) as the
/// test moves time past its open time.
///
/// ```
/// use breakerbox_runtime::{Breaker, Clock, Config, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::new("db", Config::builder().clock(clock.clone()).build()?);
/// breaker.trip_for(Duration::from_secs(5));
/// clock.advance(Duration::from_secs(5)); // no call needed
/// assert_eq!(breaker.state(), State::HalfOpen);
/// assert!(clock.timers().unwrap().next_due().is_none());
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Default)]
pub struct Timers {
    heap: Mutex<Heap>,
    /// Whether the breakers' listeners are told later, on the notifier thread, rather than
    /// by the thread that fires: the system timer's, which must never wait on user code.
    defer: bool,
    /// Whether they may fire late or never (see [`Timers::best_effort`]): their breakers'
    /// rejections read the clock all the same.
    best_effort: bool,
}

#[derive(Default)]
pub(crate) struct Heap {
    entries: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// Shut down: nothing arms any more.
    dead: bool,
    /// The task that drives these timers (`TokioClock`'s), woken when an earlier deadline is
    /// armed.
    waker: Option<core::task::Waker>,
}

struct Entry {
    at: u64,
    seq: u64,
    generation: u32,
    target: Box<dyn Target>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl Timers {
    /// No wake-ups owed. The clock that returns them promises to call
    /// [`fire_due`](Timers::fire_due) whenever its time moves, so an open breaker on them
    /// rejects calls without reading the clock until they fire.
    pub fn new() -> Timers {
        Timers::default()
    }

    /// Timers that may fire late, or never: their clock calls [`fire_due`](Timers::fire_due)
    /// only when something else lets it (a task on a runtime that may not be driven, say).
    /// An open breaker on them still half-opens when they fire, without a call, but its
    /// rejections read the clock as on a clock without timers, so the first call after its
    /// open time half-opens it if they have not fired by then.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Clock, Config, ManualClock, State, Timers};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// /// A clock whose timers are fired by a loop that may stall.
    /// struct Polled(ManualClock, Arc<Timers>);
    /// impl Clock for Polled {
    ///     fn now(&self) -> Duration {
    ///         self.0.now()
    ///     }
    ///     fn timers(&self) -> Option<Arc<Timers>> {
    ///         Some(self.1.clone())
    ///     }
    /// }
    ///
    /// let time = ManualClock::without_timers();
    /// let timers = Arc::new(Timers::best_effort());
    /// let clock = Polled(time.clone(), timers.clone());
    /// let breaker = Breaker::new("db", Config::builder().clock(clock).build()?);
    /// breaker.trip_for(Duration::from_secs(5));
    /// time.advance(Duration::from_secs(5)); // the loop stalls: `fire_due` is not called
    /// assert!(breaker.try_acquire().is_ok_and(|p| p.is_probe()));
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// # Ok::<(), breakerbox_runtime::ConfigError>(())
    /// ```
    pub fn best_effort() -> Timers {
        Timers {
            best_effort: true,
            ..Timers::default()
        }
    }

    /// Whether a breaker's rejections may rely on these timers to move it on (they are not
    /// [`best_effort`](Timers::best_effort)).
    pub(crate) fn relied_on(&self) -> bool {
        !self.best_effort
    }

    /// Arms a wake-up at `at` (nanoseconds on the clock) for the opening `generation` of
    /// `target`. Returns whether it is armed (and whether it became the earliest one), or
    /// `None` once shut down. Runs under the breaker's transition lock: no user code here.
    pub(crate) fn arm(&self, at: u64, generation: u32, target: Box<dyn Target>) -> Option<bool> {
        let mut heap = lock(&self.heap);
        if heap.dead {
            return None;
        }
        let earliest = heap.entries.peek().is_none_or(|Reverse(e)| at < e.at);
        heap.seq += 1;
        let seq = heap.seq;
        heap.entries.push(Reverse(Entry {
            at,
            seq,
            generation,
            target,
        }));
        let waker = if earliest { heap.waker.take() } else { None };
        drop(heap);
        if let Some(waker) = waker {
            // A tokio task's waker: it schedules the task, and runs no user code.
            waker.wake();
        }
        Some(earliest)
    }

    /// When the earliest wake-up is due, on the clock; `None` if none is armed.
    pub fn next_due(&self) -> Option<Duration> {
        self.next_nanos().map(Duration::from_nanos)
    }

    fn next_nanos(&self) -> Option<u64> {
        lock(&self.heap).entries.peek().map(|Reverse(e)| e.at)
    }

    /// Registers the task that drives these timers, to be woken when an earlier deadline is
    /// armed; returns the earliest deadline, read under the same lock (so an arm after it
    /// wakes `waker`). `None` once shut down or with nothing armed.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register(&self, waker: &core::task::Waker) -> Option<u64> {
        let mut heap = lock(&self.heap);
        if heap.dead {
            return None;
        }
        heap.waker = Some(waker.clone());
        heap.entries.peek().map(|Reverse(e)| e.at)
    }

    /// Fires every wake-up due at `now` (the clock's time), in deadline order: each moves its
    /// breaker from open to half-open if it is still in the opening it was armed for, and
    /// tells its listeners on this thread. Call it whenever the clock's time moves.
    ///
    /// No lock of ours is held while a breaker's listeners run. A listener's panic is caught
    /// (as for any transition), and so is a `tracing` subscriber's: the other wake-ups due
    /// still fire.
    pub fn fire_due(&self, now: Duration) {
        // Saturating, as the clock's nanoseconds are.
        self.fire(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX));
    }

    pub(crate) fn fire(&self, now: u64) {
        loop {
            // One at a time, so a listener that arms another timer (re-opening its breaker, say)
            // or that advances the clock again finds the heap as it should.
            let entry = {
                let mut heap = lock(&self.heap);
                match heap.entries.peek() {
                    Some(Reverse(e)) if e.at <= now => heap.entries.pop().map(|Reverse(e)| e),
                    _ => None,
                }
            };
            let Some(entry) = entry else { return };
            self.wake(entry);
        }
    }

    fn wake(&self, entry: Entry) {
        entry.target.wake(entry.generation, entry.at, self.defer);
    }

    /// Takes every armed wake-up out and refuses new ones; each breaker still in the opening
    /// a wake-up was armed for goes back to reading its clock on every rejection, so it
    /// half-opens at the first call after its open time, as without a timer.
    pub fn shutdown(&self) {
        let entries = {
            let mut heap = lock(&self.heap);
            heap.dead = true;
            core::mem::take(&mut heap.entries)
        };
        for Reverse(entry) in entries {
            entry.target.disarm(entry.generation, self.defer);
        }
    }
}

/// For the system clock's timer thread (`clock::timer_thread`), which owns a deferring `Timers`.
#[cfg(not(loom))]
impl Timers {
    /// Timers whose breakers' listeners are told on the notifier thread.
    pub(crate) fn deferred() -> Timers {
        Timers {
            defer: true,
            ..Timers::default()
        }
    }

    /// Refuses every wake-up from now on (the timer thread could not start).
    pub(crate) fn kill(&self) {
        lock(&self.heap).dead = true;
    }

    /// Waits on `wake` until the earliest wake-up is due on `now`'s clock (an hour if none is
    /// armed; at least a millisecond); returns `false` at once if shut down.
    pub(crate) fn wait(&self, wake: &std::sync::Condvar, now: impl Fn() -> u64) -> bool {
        let heap = lock(&self.heap);
        if heap.dead {
            return false;
        }
        // Read under the lock an arm takes: an earlier deadline armed after this read
        // notifies after this wait began, and is not missed.
        let now = now();
        let wait = match heap.entries.peek() {
            Some(Reverse(e)) if e.at <= now => return true,
            // At least a millisecond: the coarse clock may lag the condvar's by that much.
            Some(Reverse(e)) => Duration::from_nanos(e.at - now).max(Duration::from_millis(1)),
            None => Duration::from_secs(3600),
        };
        let _ = wake.wait_timeout(heap, wait);
        true
    }
}

impl core::fmt::Debug for Timers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timers")
            .field("armed", &lock(&self.heap).entries.len())
            .finish()
    }
}

std::thread_local! {
    static DEFERRING: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// While alive, transitions on this thread queue their events without telling them.
pub(crate) struct Deferring;

impl Deferring {
    pub(crate) fn enter() -> Deferring {
        DEFERRING.with(|d| d.set(true));
        Deferring
    }
}

impl Drop for Deferring {
    fn drop(&mut self) {
        DEFERRING.with(|d| d.set(false));
    }
}

/// Whether this thread leaves telling events to the notifier (the system timer thread).
pub(crate) fn deferring() -> bool {
    DEFERRING.with(|d| d.get())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{Breaker, Clock, Config, ManualClock, State};
    use std::sync::{Arc, mpsc};

    /// A clock whose timers defer telling, as the system timer thread's do; the test fires
    /// them on its own thread.
    struct Deferred(ManualClock, Arc<Timers>);

    impl Clock for Deferred {
        fn now(&self) -> Duration {
            self.0.now()
        }
        fn timers(&self) -> Option<Arc<Timers>> {
            Some(self.1.clone())
        }
    }

    /// The thread that fires timers never runs a listener: one that blocks (on the notifier
    /// thread) holds up neither its own breaker's state nor another breaker's timer.
    #[test]
    fn a_blocking_listener_stalls_no_timer() {
        let manual = ManualClock::new();
        let timers = Arc::new(Timers {
            defer: true,
            ..Timers::default()
        });
        let breaker = |name: &str, open_ms: u64| {
            let config = Config::builder()
                .failures(1)
                .open_for(Duration::from_millis(open_ms))
                .clock(Deferred(manual.clone(), timers.clone()));
            Breaker::new(name, config.build().unwrap())
        };
        let a = breaker("blocks", 1000);
        let b = breaker("other", 2000);
        let (release, wait) = mpsc::channel::<()>();
        let wait = std::sync::Mutex::new(wait);
        let (entered, blocked) = mpsc::channel::<()>();
        let entered = std::sync::Mutex::new(entered);
        a.on_state_change(move |e| {
            if e.to == State::HalfOpen {
                entered.lock().unwrap().send(()).unwrap();
                wait.lock().unwrap().recv().unwrap();
            }
        });
        let (told, b_told) = mpsc::channel::<State>();
        let told = std::sync::Mutex::new(told);
        b.on_state_change(move |e| told.lock().unwrap().send(e.to).unwrap());
        a.call(|| Err::<(), _>("down")).unwrap_err();
        b.call(|| Err::<(), _>("down")).unwrap_err();
        assert_eq!(b_told.recv().unwrap(), State::Open);
        manual.advance(Duration::from_secs(3));
        timers.fire_due(Duration::from_secs(3));
        // Both moved on, on this thread, before `fire_due` returned.
        assert_eq!((a.state(), b.state()), (State::HalfOpen, State::HalfOpen));
        // The notifier is stuck in a's listener; b's event waits behind it.
        blocked.recv().unwrap();
        release.send(()).unwrap();
        assert_eq!(b_told.recv().unwrap(), State::HalfOpen);
    }
}
