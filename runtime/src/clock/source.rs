//! The [`Clock`] trait, how a shared clock is one, and the nanoseconds every clock is read in.

use core::time::Duration;
use std::sync::Arc;

use crate::timer::Timers;

/// A monotonic time source.
///
/// A breaker reads time only where its policy needs it: to know when an open breaker may probe
/// again, to date time-window buckets, and to measure calls when a `slow` threshold is set. The
/// default is [`SystemClock`]; tests use [`ManualClock`] so that no test has to sleep.
///
/// ```
/// use breakerbox_runtime::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), Duration::from_secs(2));
/// ```
///
/// [`SystemClock`]: crate::SystemClock
/// [`ManualClock`]: crate::ManualClock
pub trait Clock: Send + Sync + 'static {
    /// The time elapsed since a fixed, arbitrary origin. Must never go backwards.
    fn now(&self) -> Duration;

    /// A cheaper reading that may lag [`now`](Clock::now) by a few milliseconds. Used for open
    /// deadlines and window buckets, never for measuring call durations. Defaults to `now`.
    fn now_coarse(&self) -> Duration {
        self.now()
    }

    /// The timers this clock drives, if it can: then an open breaker on it turns half-open
    /// when its open time ends, without waiting for a call, and its rejections read no clock
    /// (unless they are [`Timers::best_effort`]: then they read it, and the first call after
    /// the open time half-opens the breaker if the timers have not fired by then).
    /// A clock that returns them calls [`Timers::fire_due`] whenever its time moves.
    /// Defaults to `None`: breakers read the clock on each rejection, and half-open at the
    /// first call after their open time. Asked at each opening, under no lock; a panic here
    /// counts as `None`.
    fn timers(&self) -> Option<Arc<Timers>> {
        None
    }
}

/// A shared clock: `Arc<ManualClock>`, or an `Arc<dyn Clock>` shared by several configs.
/// [`ConfigBuilder::clock`](crate::ConfigBuilder::clock) keeps an `Arc<dyn Clock>` as it is
/// (configs given the same one share it, and compare equal), rather than boxing it again.
impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }

    fn now_coarse(&self) -> Duration {
        (**self).now_coarse()
    }

    fn timers(&self) -> Option<Arc<Timers>> {
        (**self).timers()
    }
}

/// A duration as saturating nanoseconds: 584 years fit, so saturation never happens in practice.
#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
