//! The recent system time, for dating time-window successes without a clock read.
//!
//! `CLOCK_MONOTONIC_COARSE` costs ~12 ns a read on a virtual machine, most of what a time
//! window's success costs. A success only dilutes a rate, so it may be dated a little early:
//! [`ClockRef::recent`](super::ClockRef::recent) reads one process-wide cell of coarse
//! nanoseconds instead, which one thread, `breakerbox-tick`, refreshes every [`TICK`] while at
//! least one time window on the [`SystemClock`] exists. A reading of the cell lags the coarse
//! clock by at most [`TICK`] plus the ticker's scheduling delay, and never leads it.
//!
//! A window registers a [`User`] when it is made and drops it with itself. The first user
//! stores the current coarse time in the cell before its window exists (so no window ever reads
//! a stale cell), then wakes or starts the ticker; with no users the ticker waits on a condition
//! variable, with no wake-ups. Every write of the cell and of the user count is under one
//! mutex, which no user code ever runs under; readers only load the cell. A cell of 0 means
//! "no ticker" (it could not be started): readers then read the clock themselves.

use core::time::Duration;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::SystemClock;

/// How often the ticker refreshes the cell. The coarse clock itself moves once per kernel tick
/// (4 ms here, 1–10 ms on Linux in general); 2 ms keeps the cell within a tick of it at 500
/// wake-ups a second, about 0.1% of a core, and dates a success at most ~2 buckets early in the
/// smallest time window (10 ms, 1 ms buckets), 0.2% of a bucket in a 10 s one.
pub(crate) const TICK: Duration = Duration::from_millis(2);

/// The system's cell and its ticker.
static NANOS: AtomicU64 = AtomicU64::new(0);
static SYSTEM: Ticker = Ticker::new(&NANOS);

/// The recent coarse time, in nanoseconds. Only meaningful while a [`User`] is registered
/// (every time window on the system clock holds one).
#[inline(always)]
pub(crate) fn now() -> u64 {
    // Relaxed: a time, not a publication; a stale one is the point.
    let n = NANOS.load(Ordering::Relaxed);
    if n == 0 {
        SystemClock.coarse_nanos()
    } else {
        n
    }
}

/// Registers a user of the system's cell: see the module's doc.
pub(crate) fn register() -> User {
    SYSTEM.register()
}

/// A user of a ticker's cell; dropping it unregisters.
pub(crate) struct User(&'static Ticker);

impl Drop for User {
    fn drop(&mut self) {
        self.0.unregister();
    }
}

/// A cell, its ticker thread and its users. One for the process (`SYSTEM`); tests make their
/// own so that other tests' windows do not count among their users.
pub(crate) struct Ticker {
    nanos: &'static AtomicU64,
    state: Mutex<TickState>,
    /// The ticker waits here for a user; tests wait here for the ticker to park.
    wake: Condvar,
}

#[derive(Default)]
struct TickState {
    users: usize,
    /// Whether the thread was started (it then lives for the process).
    started: bool,
    /// Whether the thread is waiting for a user.
    parked: bool,
    /// How many times it has parked.
    parks: u64,
}

impl Ticker {
    pub(crate) const fn new(nanos: &'static AtomicU64) -> Ticker {
        Ticker {
            nanos,
            state: Mutex::new(TickState {
                users: 0,
                started: false,
                parked: false,
                parks: 0,
            }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TickState> {
        // Nothing under this lock can panic; poisoning is ignored all the same.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The coarse time as the cell holds it: never 0, which means "no ticker".
    fn store_now(&self) {
        self.nanos
            .store(SystemClock.coarse_nanos().max(1), Ordering::Relaxed);
    }

    pub(crate) fn register(&'static self) -> User {
        let mut state = self.lock();
        state.users += 1;
        if state.users == 1 {
            // Fresh before the first window exists: the ticker may have parked long ago.
            self.store_now();
            if state.started {
                state.parked = false;
                self.wake.notify_all();
            } else {
                let spawned = std::thread::Builder::new()
                    .name("breakerbox-tick".into())
                    .spawn(move || self.run());
                match spawned {
                    Ok(_) => state.started = true,
                    // No ticker: readers read the clock (tried again by the next first user).
                    Err(_) => self.nanos.store(0, Ordering::Relaxed),
                }
            }
        }
        User(self)
    }

    fn unregister(&self) {
        // The ticker parks at its next tick.
        self.lock().users -= 1;
    }

    fn run(&'static self) {
        let mut state = self.lock();
        loop {
            while state.users == 0 {
                // Parked anew if a user came and went before it woke.
                if !state.parked {
                    state.parked = true;
                    state.parks += 1;
                    self.wake.notify_all();
                }
                state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.parked = false;
            drop(state);
            std::thread::sleep(TICK);
            state = self.lock();
            // Under the lock, as the first user's store is: the cell never goes back.
            if state.users != 0 {
                self.store_now();
            }
        }
    }

    /// The cell as readers see it.
    #[cfg(test)]
    pub(crate) fn load(&self) -> u64 {
        self.nanos.load(Ordering::Relaxed)
    }

    /// Waits until the ticker is parked with no user, and returns how many times it has
    /// parked. For tests: blocks on the ticker's condition variable, sleeping on no timer.
    #[cfg(test)]
    pub(crate) fn wait_parked(&self) -> u64 {
        let mut state = self.lock();
        while !(state.parked && state.users == 0) {
            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.parks
    }

    /// Whether the ticker is parked now, and its user count.
    #[cfg(test)]
    pub(crate) fn status(&self) -> (bool, usize) {
        let state = self.lock();
        (state.parked, state.users)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticker() -> &'static Ticker {
        let nanos: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        Box::leak(Box::new(Ticker::new(nanos)))
    }

    /// The first user finds the cell holding the time it registered at, not 0 nor the time
    /// the ticker last parked at: a window's first success is dated by the current time.
    #[test]
    fn the_cell_is_fresh_when_the_first_user_returns() {
        let ticker = ticker();
        assert_eq!(ticker.load(), 0, "never used");
        let before = SystemClock.coarse_nanos();
        let user = ticker.register();
        assert!(ticker.load() >= before, "stored by the first user");
        drop(user);
        ticker.wait_parked();
        // Parked: the cell is as old as the last tick. A new first user refreshes it.
        let parked_at = ticker.load();
        let before = SystemClock.coarse_nanos();
        let user = ticker.register();
        assert!(ticker.load() >= before && ticker.load() >= parked_at);
        drop(user);
    }

    /// The ticker parks when its last user goes, and runs again for a new one.
    #[test]
    fn the_ticker_parks_when_the_last_user_goes() {
        let ticker = ticker();
        let a = ticker.register();
        let b = ticker.register();
        assert_eq!(ticker.status(), (false, 2), "running for two users");
        drop(a);
        assert_eq!(ticker.status(), (false, 1), "still one user");
        drop(b);
        let parks = ticker.wait_parked();
        assert_eq!(ticker.status(), (true, 0));
        let c = ticker.register();
        assert_eq!(ticker.status(), (false, 1), "woken by a new first user");
        drop(c);
        assert_eq!(ticker.wait_parked(), parks + 1, "parked again");
    }

    /// The system cell is never 0 while a window on the system clock exists.
    #[test]
    fn the_system_cell_is_set_while_a_user_exists() {
        let user = register();
        assert!(NANOS.load(Ordering::Relaxed) != 0);
        assert!(
            now() <= SystemClock.coarse_nanos(),
            "never ahead of the clock"
        );
        drop(user);
    }
}
