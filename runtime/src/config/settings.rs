//! [`Config`], what a breaker does, with its accessors and defaults, and the [`Window`] its
//! rates are computed over.

use core::time::Duration;

use crate::clock::ClockRef;
use crate::probe::Probe;

/// The calls a failure rate is computed over.
///
/// ```
/// use breakerbox_runtime::{Config, Window};
/// use std::time::Duration;
///
/// // Trip when half of the last 100 calls failed, once 20 calls are in the window.
/// let by_count = Config::builder().failure_rate(50).window(Window::Calls(100)).min_calls(20).build()?;
/// // Trip when a quarter of the calls of the last 10 seconds failed.
/// let by_time = Config::builder().failure_rate(25).window(Window::Time(Duration::from_secs(10))).build()?;
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Window {
    /// The last `n` finished calls (1 to 10 000), whichever threads made them.
    ///
    /// A call's place is its number among the breaker's calls, which each thread counts on a
    /// counter line of its own, so a success writes nothing other threads read; failures and
    /// slow calls mark their places under a lock. On one thread the window is exactly the last
    /// `n` calls; with several, the last `n` in the order their calls were counted (two
    /// failures counted at the same moment take neighbouring places).
    Calls(u32),
    /// The calls of the last span of time (at least 10 ms), kept in 10 buckets that slide one
    /// tenth of the span at a time.
    ///
    /// On the [`SystemClock`](crate::SystemClock), a success is dated without a clock read,
    /// by a process-wide recent time that one thread, `breakerbox-tick`, refreshes every 2 ms
    /// while a time window on that clock exists (it waits, with no wake-ups, while none does).
    /// A success may so land in an earlier bucket by at most those 2 ms plus that thread's
    /// scheduling delay (and one delayed past the whole span falls out of the window): it only
    /// dilutes the rate for a moment. Failures and slow calls, and every other clock, are
    /// dated exactly.
    Time(Duration),
}

/// How many buckets a [`Window::Time`] has.
pub(crate) const TIME_BUCKETS: u32 = 10;
pub(crate) const MAX_WINDOW_CALLS: u32 = 10_000;
pub(crate) const MIN_TIME_WINDOW: Duration = Duration::from_millis(10);

/// A breaker's configuration: when it trips, how long it stays open, how it probes.
///
/// Build it with [`Config::builder`]; every value is checked once by
/// [`ConfigBuilder::build`]. [`Config::default()`] trips after 5 consecutive failures, stays
/// open 60 s, and closes after 1 successful probe.
///
/// With the `serde` feature a config serializes as the attribute's keys, durations written
/// `"250ms"` or `"2s"` (the clock is left out), and deserializes through
/// [`ConfigBuilder::build`], so that a deserialized config is always valid;
/// `Registry::load_toml` reads them from a file.
///
/// ```
/// use breakerbox_runtime::Config;
/// use std::time::Duration;
///
/// let config = Config::builder()
///     .failures(5)
///     .open_for(Duration::from_secs(2))
///     .backoff(2.0)
///     .max_open_for(Duration::from_secs(60))
///     .half_open_calls(3)
///     .successes(3)
///     .build()?;
/// assert_eq!(config.open_for(), Duration::from_secs(2));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
///
/// [`ConfigBuilder::build`]: crate::ConfigBuilder::build
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub(crate) failures: u32,
    pub(crate) failures_within: Option<Duration>,
    pub(crate) failure_rate: Option<u8>,
    pub(crate) window: Window,
    pub(crate) min_calls: u32,
    pub(crate) slow: Option<Duration>,
    pub(crate) slow_rate: Option<u8>,
    pub(crate) open_for: Duration,
    pub(crate) max_open_for: Duration,
    pub(crate) backoff: f64,
    pub(crate) jitter: f64,
    pub(crate) half_open_calls: u32,
    pub(crate) successes: u32,
    pub(crate) probe_timeout: Duration,
    pub(crate) max_concurrent: Option<u32>,
    /// The health probe run while open (see `crate::probe`), and how often.
    pub(crate) probe: Option<Probe>,
    pub(crate) probe_every: Duration,
    pub(crate) clock: ClockRef,
    /// Keyed families ([`BreakerMap`](crate::BreakerMap)): the keys kept before the idle and
    /// least recently used closed ones are evicted.
    pub(crate) max_keys: u32,
    /// Keyed families: how long a key may go uncalled before it may be evicted.
    pub(crate) idle_for: Duration,
    /// Whether calls are timed into a latency histogram without a `slow` threshold.
    pub(crate) latency: bool,
    /// Whether the registry's health counts this breaker (see `Registry::health`).
    pub(crate) health: bool,
    /// Whether this breaker open makes the registry's health DOWN, not DEGRADED.
    pub(crate) critical: bool,
    /// How long a call may run before it is dropped and counted as a failure: read at each
    /// call by an `async fn` whose `#[circuit_breaker]` attribute names `timeout`.
    pub(crate) timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            failures: 5,
            failures_within: None,
            failure_rate: None,
            window: Window::Calls(100),
            min_calls: 10,
            slow: None,
            slow_rate: None,
            open_for: Duration::from_secs(60),
            max_open_for: Duration::from_secs(60),
            backoff: 1.0,
            jitter: 0.0,
            half_open_calls: 1,
            successes: 1,
            probe_timeout: Duration::from_secs(60),
            max_concurrent: None,
            probe: None,
            probe_every: crate::probe::DEFAULT_EVERY,
            clock: ClockRef::System,
            max_keys: 10_000,
            idle_for: Duration::from_secs(600),
            latency: false,
            health: true,
            critical: false,
            timeout: None,
        }
    }
}

impl Config {
    /// Consecutive failures that trip the breaker, when no `failure_rate` is set.
    pub fn failures(&self) -> Option<u32> {
        self.failure_rate.is_none().then_some(self.failures)
    }
    /// The span in which consecutive failures must fall to count together.
    pub fn failures_within(&self) -> Option<Duration> {
        self.failures_within
    }
    /// The failure rate, in percent, that trips the breaker.
    pub fn failure_rate(&self) -> Option<u8> {
        self.failure_rate
    }
    /// The window rates are computed over.
    pub fn window(&self) -> Window {
        self.window
    }
    /// Calls the window must hold before a rate is judged.
    pub fn min_calls(&self) -> u32 {
        self.min_calls
    }
    /// The duration from which a call is slow.
    pub fn slow(&self) -> Option<Duration> {
        self.slow
    }
    /// The slow-call rate, in percent, that trips the breaker.
    pub fn slow_rate(&self) -> Option<u8> {
        self.slow_rate
    }
    /// How long the breaker stays open the first time.
    pub fn open_for(&self) -> Duration {
        self.open_for
    }
    /// The longest the open time grows to under `backoff`.
    pub fn max_open_for(&self) -> Duration {
        self.max_open_for
    }
    /// The factor the open time is multiplied by at each re-open.
    pub fn backoff(&self) -> f64 {
        self.backoff
    }
    /// The fraction by which each open time is randomly lengthened or shortened.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }
    /// Probe calls a half-open round admits.
    pub fn half_open_calls(&self) -> u32 {
        self.half_open_calls
    }
    /// Successful probes that close the breaker.
    pub fn successes(&self) -> u32 {
        self.successes
    }
    /// How long a half-open round may last, from entering half-open: once it has passed with
    /// every probe slot taken, the next call re-opens the breaker.
    pub fn probe_timeout(&self) -> Duration {
        self.probe_timeout
    }
    /// The most calls let through at once while closed. A permit that never records (leaked
    /// with `mem::forget`, or in a future parked for ever) holds its place until the next
    /// reset or other state change, which frees every place.
    pub fn max_concurrent(&self) -> Option<u32> {
        self.max_concurrent
    }

    /// The health probe called while the breaker is open, if any; see
    /// [`ConfigBuilder::probe`](crate::ConfigBuilder::probe).
    pub fn probe(&self) -> Option<&Probe> {
        self.probe.as_ref()
    }

    /// How often the health probe runs while open, and how long each may take (default 5 s).
    pub fn probe_every(&self) -> Duration {
        self.probe_every
    }

    /// For a keyed family ([`BreakerMap`](crate::BreakerMap)): the keys it keeps before it
    /// evicts (default 10 000). Ignored by a single breaker.
    pub fn max_keys(&self) -> u32 {
        self.max_keys
    }

    /// For a keyed family: how long a key may go uncalled before it may be evicted (default
    /// 10 minutes). Ignored by a single breaker.
    pub fn idle_for(&self) -> Duration {
        self.idle_for
    }
    /// Whether calls are timed into a latency histogram
    /// ([`Breaker::latency`](crate::Breaker::latency)) although no `slow` threshold needs
    /// them timed (default `false`).
    pub fn latency(&self) -> bool {
        self.latency
    }

    /// Whether [`Registry::health`](crate::Registry::health) counts this breaker (default
    /// `true`).
    pub fn health(&self) -> bool {
        self.health
    }

    /// Whether this breaker open makes [`Registry::health`](crate::Registry::health) `DOWN`
    /// rather than `DEGRADED` (default `false`).
    pub fn critical(&self) -> bool {
        self.critical
    }

    /// Whether calls are timed: a `slow` threshold needs it, or `latency` asks for it.
    #[inline]
    pub(crate) fn timed(&self) -> bool {
        self.slow.is_some() || self.latency
    }

    /// How long a call may run before it is dropped and counted as a failure, if set. The
    /// breaker itself does not time calls out: an `async fn` whose `#[circuit_breaker]`
    /// attribute names `timeout` reads this value at each call, so a config file, a variable
    /// or a reload changes it from the next call on.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    /// Whether calls are recorded into a rate window.
    pub(crate) fn uses_window(&self) -> bool {
        self.failure_rate.is_some() || self.slow_rate.is_some()
    }
}
