//! [`ClockRef`]: the clock a breaker holds, and the readings the call path takes of it.

use core::fmt;
use std::sync::Arc;

#[cfg(not(loom))]
use super::recent;
use super::source::{Clock, nanos};
use super::system::SystemClock;

/// The clock a breaker holds: the system clock inline (no virtual call), or a user's.
#[derive(Clone, Default)]
pub(crate) enum ClockRef {
    #[default]
    System,
    Custom(Arc<dyn Clock>),
}

/// `clock` as a shared `dyn Clock`: an `Arc<dyn Clock>` as it is, anything else in a new `Arc`.
pub(crate) fn shared(clock: impl Clock) -> Arc<dyn Clock> {
    let mut clock = Some(clock);
    match (&mut clock as &mut dyn core::any::Any).downcast_mut::<Option<Arc<dyn Clock>>>() {
        Some(arc) => arc.take().expect("just put there"),
        None => Arc::new(clock.take().expect("just put there")),
    }
}

impl ClockRef {
    /// Nanoseconds for deadlines and buckets.
    #[inline]
    pub(crate) fn coarse(&self) -> u64 {
        match self {
            ClockRef::System => SystemClock.nanos_coarse(),
            ClockRef::Custom(c) => nanos(c.now_coarse()),
        }
    }

    /// Nanoseconds for dating a time window's success, which may come early: on the system
    /// clock, the time [`recent`] keeps, which lags [`coarse`](ClockRef::coarse) by at most
    /// [`recent::TICK`] plus its ticker's scheduling delay (and never leads it); on any other
    /// clock, `coarse` itself. Only while the caller holds a [`recent_user`](Self::recent_user)
    /// of this clock.
    #[inline(always)]
    pub(crate) fn recent(&self) -> u64 {
        match self {
            #[cfg(not(loom))]
            ClockRef::System => recent::now(),
            #[cfg(loom)]
            ClockRef::System => SystemClock.nanos_coarse(),
            ClockRef::Custom(c) => nanos(c.now_coarse()),
        }
    }

    /// What a time window on this clock holds while it lives, so that
    /// [`recent`](Self::recent) stays fresh: a user of the system clock's ticker.
    pub(crate) fn recent_user(&self) -> Option<RecentUser> {
        match self {
            #[cfg(not(loom))]
            ClockRef::System => Some(recent::register()),
            _ => None,
        }
    }

    /// Nanoseconds for measuring call durations: on the system clock, its calls' timer (see
    /// [`SystemClock`]), whose readings are compared only with each other.
    #[inline]
    pub(crate) fn precise(&self) -> u64 {
        match self {
            ClockRef::System => SystemClock.timer_nanos(),
            ClockRef::Custom(c) => nanos(c.now()),
        }
    }

    /// Readies [`precise`](Self::precise) for a breaker that times its calls: on the system
    /// clock, calibrates its calls' timer if no breaker has yet (about a millisecond, once).
    pub(crate) fn start_timer(&self) {
        if let ClockRef::System = self {
            SystemClock.start_timer();
        }
    }
}

impl PartialEq for ClockRef {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ClockRef::System, ClockRef::System) => true,
            (ClockRef::Custom(a), ClockRef::Custom(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl fmt::Debug for ClockRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockRef::System => f.write_str("SystemClock"),
            ClockRef::Custom(_) => f.write_str("CustomClock"),
        }
    }
}

/// A user of the system clock's recent time (see [`ClockRef::recent_user`]).
#[cfg(not(loom))]
pub(crate) type RecentUser = recent::User;
#[cfg(loom)]
pub(crate) type RecentUser = ();
