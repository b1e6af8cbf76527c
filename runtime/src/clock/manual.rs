//! [`ManualClock`]: a clock that moves only when told to, with timers it fires as it moves.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use super::source::Clock;
use crate::sync::{AtomicU64, Ordering};
use crate::timer::Timers;

/// A clock that moves only when told to. Clones share one time.
///
/// Give it to a breaker with [`ConfigBuilder::clock`](crate::ConfigBuilder::clock) or
/// [`Registry::set_clock`](crate::Registry::set_clock), then [`advance`](ManualClock::advance)
/// it to make `open_for` elapse without sleeping.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let config = Config::builder().failures(1).open_for(Duration::from_secs(2)).clock(clock.clone()).build()?;
/// let breaker = Breaker::new("db", config);
/// let _ = breaker.call(|| Err::<(), _>("down"));
/// assert_eq!(breaker.state(), State::Open);
/// clock.advance(Duration::from_secs(2));
/// let _ = breaker.call(|| Ok::<_, &str>(()));
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
    timers: Arc<Timers>,
    /// Whether it offers its breakers timers (see [`Clock::timers`]).
    timed: bool,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock {
            nanos: Arc::default(),
            timers: Arc::default(),
            timed: true,
        }
    }
}

impl ManualClock {
    /// A clock standing at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock standing at zero that offers no timers: an open breaker on it reads `Open`
    /// until a call arrives after its open time (which then half-opens it), as on a user
    /// [`Clock`] without [`timers`](Clock::timers). For tests of that path.
    pub fn without_timers() -> Self {
        ManualClock {
            timed: false,
            ..Self::default()
        }
    }

    /// Moves the clock forward by `by` (saturating at `u64::MAX` nanoseconds), then fires the
    /// timers now due: each breaker on this clock whose open time has ended turns half-open,
    /// and its listeners are told, on this thread, before `advance` returns.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: the clock is a single value; callers order their own operations around it.
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(by))
            });
        self.timers.fire(self.nanos.load(Ordering::Relaxed));
    }

    /// Sets the clock to `to`; a value earlier than now is ignored, so time never runs back.
    /// Fires the timers then due, as [`advance`](ManualClock::advance) does.
    pub fn set(&self, to: Duration) {
        let to = u64::try_from(to.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_max(to, Ordering::Relaxed);
        self.timers.fire(self.nanos.load(Ordering::Relaxed));
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    fn timers(&self) -> Option<Arc<Timers>> {
        self.timed.then(|| self.timers.clone())
    }
}
