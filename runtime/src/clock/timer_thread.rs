//! The system clock's timers: one process-wide thread, `breakerbox-timer`, started by the
//! first opening of a breaker on the system clock. It sleeps until the earliest deadline,
//! moves the breakers due from open to half-open, and hands their events to a second thread,
//! `breakerbox-notify`, which tells listeners and `tracing`: so a listener that blocks delays
//! other breakers' events, never their state changes.

use super::system::SystemClock;
use crate::timer::{Target, Timers};
use std::sync::{Condvar, OnceLock};

pub(crate) struct SystemTimers {
    pub(crate) timers: Timers,
    wake: Condvar,
}

static SYSTEM: OnceLock<SystemTimers> = OnceLock::new();

/// The system timers, their thread started on first use; a thread that cannot start
/// leaves them shut down, so breakers read the clock as without timers.
pub(crate) fn timers() -> &'static SystemTimers {
    let mut start = false;
    let system = SYSTEM.get_or_init(|| {
        start = true;
        SystemTimers {
            timers: Timers::deferred(),
            wake: Condvar::new(),
        }
    });
    if start {
        let spawned = std::thread::Builder::new()
            .name("breakerbox-timer".into())
            .spawn(move || run(system));
        if spawned.is_err() {
            system.timers.kill();
        }
    }
    system
}

impl SystemTimers {
    /// Arms a wake-up, waking the thread if it is the earliest. Under the transition lock.
    pub(crate) fn arm(&self, at: u64, generation: u32, target: Box<dyn Target>) -> bool {
        match self.timers.arm(at, generation, target) {
            Some(earliest) => {
                if earliest {
                    self.wake.notify_one();
                }
                true
            }
            None => false,
        }
    }
}

/// Shuts the timers down if the thread ever stops, so that no breaker waits on it.
struct Stopped(&'static SystemTimers);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.timers.shutdown();
    }
}

fn run(system: &'static SystemTimers) {
    let _stopped = Stopped(system);
    loop {
        system.timers.fire(SystemClock.coarse_nanos());
        if !system
            .timers
            .wait(&system.wake, || SystemClock.coarse_nanos())
        {
            return;
        }
    }
}

/// Stops the thread as if it had died, for the test that no breaker is left open then.
#[doc(hidden)]
pub fn stop() {
    let system = timers();
    system.timers.shutdown();
    system.wake.notify_one();
}
