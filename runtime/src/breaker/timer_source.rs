//! Where an opening's timer is armed: the breaker's clock's timers (see `crate::timer`), asked
//! outside every lock and armed under the transition lock. `open_timer.rs` handles its firing.

use std::sync::Arc;

use super::inner::Inner;
use crate::clock::ClockRef;
use crate::timer::{Target, Timers};

/// Where an opening's timer is armed.
pub(super) enum TimerSource {
    #[cfg(not(loom))]
    System,
    Custom(Arc<Timers>),
}

impl Inner {
    /// The timers of this breaker's clock, if it has any; asked outside every lock (a user
    /// clock's `timers` is user code, and its panic means none).
    pub(super) fn timer_source(&self) -> Option<TimerSource> {
        match self.clock() {
            #[cfg(not(loom))]
            ClockRef::System => Some(TimerSource::System),
            #[cfg(loom)]
            ClockRef::System => None,
            ClockRef::Custom(c) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.timers()))
                    .unwrap_or_else(|payload| {
                        crate::event::discard(payload);
                        None
                    })
                    .map(TimerSource::Custom)
            }
        }
    }

    /// Arms a timer that moves the opening `generation` to half-open at `until`; returns
    /// whether it is armed and its rejections may rely on it (best-effort timers are armed,
    /// but the rejections read the clock). Under the transition lock: runs no user code.
    pub(super) fn arm(&self, timers: &TimerSource, until: u64, generation: u32) -> bool {
        let weak: Box<dyn Target> = Box::new(self.weak_handle());
        match timers {
            #[cfg(not(loom))]
            TimerSource::System => {
                crate::clock::timer_thread::timers().arm(until, generation, weak)
            }
            TimerSource::Custom(t) => t.arm(until, generation, weak).is_some() && t.relied_on(),
        }
    }
}
