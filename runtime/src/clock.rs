//! Where a breaker's time comes from.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use crate::sync::{AtomicU64, Ordering};
use crate::timer::Timers;

#[cfg(not(loom))]
pub(crate) mod recent;

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

/// The operating system's monotonic clock.
///
/// On Linux `now_coarse` reads `CLOCK_MONOTONIC_COARSE` (a few nanoseconds, millisecond
/// resolution) and `now` reads `CLOCK_MONOTONIC`; elsewhere both use [`std::time::Instant`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

/// Nanoseconds of a Linux clock. Straight to `u64`: going through `Duration` and `as_nanos`
/// (a 128-bit multiply and a range check) costs more than the rest of a rejection.
#[cfg(target_os = "linux")]
#[inline]
fn read_clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec, and both clock ids used here exist on every
    // Linux since 2.6.32, so the call cannot fail; on failure `ts` would stay zero.
    unsafe { libc::clock_gettime(id, &mut ts) };
    // A monotonic clock's seconds fit 584 years of uptime in the product.
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

impl SystemClock {
    #[inline]
    fn nanos(self) -> u64 {
        #[cfg(target_os = "linux")]
        return read_clock(libc::CLOCK_MONOTONIC);
        #[cfg(not(target_os = "linux"))]
        return nanos(since_origin());
    }

    #[inline]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn coarse_nanos(self) -> u64 {
        self.nanos_coarse()
    }

    #[inline]
    fn nanos_coarse(self) -> u64 {
        #[cfg(target_os = "linux")]
        return read_clock(libc::CLOCK_MONOTONIC_COARSE);
        #[cfg(not(target_os = "linux"))]
        return nanos(since_origin());
    }
}

#[cfg(not(target_os = "linux"))]
fn since_origin() -> Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos())
    }

    #[inline]
    fn now_coarse(&self) -> Duration {
        Duration::from_nanos(self.nanos_coarse())
    }
}

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

/// tokio's clock, which follows `tokio::time::pause` and `advance` in tests.
///
/// Must be read inside a tokio runtime. It has [timers](Clock::timers), driven by tokio's
/// time: a breaker that opens inside a runtime arms its open timer (and its health probes'
/// ticks) on that runtime's timers, which one task per runtime fires as tokio's time reaches
/// them — paused time included, so a `#[tokio::test(start_paused = true)]` sees an open
/// breaker turn half-open at its open time without a call. The task tells the breakers'
/// listeners as it fires them (a listener that blocks holds up that runtime's other
/// timers).
///
/// On a current-thread runtime that task runs only while the runtime is driven: one used
/// only through `block_on`, whose futures are ready at their first poll (a rejected call's
/// is), may never run it. So there the timers are [best-effort](Timers::best_effort): the
/// breaker's rejections read the clock, and the first call after its open time half-opens
/// it, on that runtime, another one or none, if the task has not by then. A breaker that
/// opens outside a runtime has no timer, and half-opens at the first call after its open
/// time; when the runtime shuts down, its breakers go back to that too.
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

/// `TokioClock`'s origin: a day before the first reading of the real clock. Not tokio's own
/// time: a paused runtime's clock starts at the real time it was built and may be far ahead of
/// another's, and every runtime's time must fall after the origin (a reading before it would
/// saturate to zero, and a deadline armed then would come late on that runtime).
#[cfg(feature = "tokio")]
fn tokio_origin() -> tokio::time::Instant {
    static ORIGIN: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let now = std::time::Instant::now();
        let origin = now
            .checked_sub(Duration::from_secs(24 * 3600))
            .unwrap_or(now);
        tokio::time::Instant::from_std(origin)
    })
}

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    fn now(&self) -> Duration {
        let origin = tokio_origin();
        tokio::time::Instant::now().saturating_duration_since(origin)
    }

    fn timers(&self) -> Option<Arc<Timers>> {
        #[cfg(not(loom))]
        return tokio_timers::current();
        #[cfg(loom)]
        return None;
    }
}

/// `TokioClock`'s timers: one `Timers` per runtime, fired by a task on it.
#[cfg(all(feature = "tokio", not(loom)))]
mod tokio_timers {
    use super::{TokioClock, tokio_origin};
    use crate::Clock;
    use crate::timer::Timers;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use core::time::Duration;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    type Drivers = Mutex<HashMap<tokio::runtime::Id, Arc<Timers>>>;

    fn drivers() -> &'static Drivers {
        static DRIVERS: std::sync::OnceLock<Drivers> = std::sync::OnceLock::new();
        DRIVERS.get_or_init(Drivers::default)
    }

    /// The current runtime's timers, their task started on first use; `None` outside a
    /// runtime. A multi-thread runtime's workers run the task whatever its `block_on` does;
    /// a current-thread runtime runs it only while driven, which may be never, so its timers
    /// are best-effort (the breakers' rejections read the clock).
    pub(super) fn current() -> Option<Arc<Timers>> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let id = handle.id();
        let mut map = drivers().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(timers) = map.get(&id) {
            return Some(timers.clone());
        }
        let timers = Arc::new(match handle.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => Timers::new(),
            _ => Timers::best_effort(),
        });
        map.insert(id, timers.clone());
        drop(map);
        // A runtime shutting down drops the task at once: its `Drop` shuts the timers down.
        drop(handle.spawn(Driver {
            timers: timers.clone(),
            id,
            sleep: Box::pin(tokio::time::sleep_until(tokio_origin())),
        }));
        Some(timers)
    }

    /// Fires its runtime's timers as tokio's time reaches them.
    struct Driver {
        timers: Arc<Timers>,
        id: tokio::runtime::Id,
        sleep: Pin<Box<tokio::time::Sleep>>,
    }

    impl Future for Driver {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            loop {
                self.timers.fire_due(TokioClock.now());
                // Registered with the deadline read: an earlier one armed after this wakes us.
                let Some(at) = self.timers.register(cx.waker()) else {
                    return Poll::Pending;
                };
                let deadline = tokio_origin() + Duration::from_nanos(at);
                self.sleep.as_mut().reset(deadline);
                if self.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        }
    }

    impl Drop for Driver {
        fn drop(&mut self) {
            // The runtime is going: no breaker may wait on its timers.
            let mut map = drivers().lock().unwrap_or_else(|e| e.into_inner());
            if map
                .get(&self.id)
                .is_some_and(|t| Arc::ptr_eq(t, &self.timers))
            {
                map.remove(&self.id);
            }
            drop(map);
            self.timers.shutdown();
        }
    }
}

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

    /// Nanoseconds for measuring call durations.
    #[inline]
    pub(crate) fn precise(&self) -> u64 {
        match self {
            ClockRef::System => SystemClock.nanos(),
            ClockRef::Custom(c) => nanos(c.now()),
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

/// A duration as saturating nanoseconds: 584 years fit, so saturation never happens in practice.
#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The system clock's timers: one process-wide thread, `breakerbox-timer`, started by the
/// first opening of a breaker on the system clock. It sleeps until the earliest deadline,
/// moves the breakers due from open to half-open, and hands their events to a second thread,
/// `breakerbox-notify`, which tells listeners and `tracing`: so a listener that blocks delays
/// other breakers' events, never their state changes.
#[cfg(not(loom))]
pub(crate) mod system {
    use super::SystemClock;
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
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{Breaker, Config, State};

    /// One clock method takes a clock by value or shared: a breaker on an `Arc<ManualClock>`
    /// follows the test's handle to it, and configs given one `Arc<dyn Clock>` share it (and
    /// so compare equal), as configs given one clock do.
    #[test]
    fn a_shared_clock_is_a_clock() {
        let manual = Arc::new(ManualClock::new());
        let config = Config::builder().failures(1).clock(manual.clone()).build();
        let breaker = Breaker::new("arc-clock", config.unwrap());
        breaker.call(|| Err::<(), _>("down")).unwrap_err();
        assert_eq!(breaker.state(), State::Open);
        manual.advance(Duration::from_secs(60));
        breaker.call(|| Ok::<(), &str>(())).unwrap();
        assert_eq!(
            breaker.state(),
            State::Closed,
            "probed after the shared clock moved"
        );

        let shared: Arc<dyn Clock> = Arc::new(ManualClock::new());
        let a = Config::builder().clock(shared.clone()).build().unwrap();
        let b = Config::builder().clock(shared.clone()).build().unwrap();
        assert_eq!(a, b, "one shared clock");
        let ClockRef::Custom(inner) = &a.clock else {
            panic!("a custom clock")
        };
        assert!(
            Arc::ptr_eq(inner, &shared),
            "kept as it is, not boxed again"
        );
        let c = Config::builder()
            .clock(Arc::clone(&manual))
            .build()
            .unwrap();
        assert_ne!(a, c, "another clock");
    }
}
