//! [`ConfigBuilder`]: a [`Config`] set key by key, validated once by `build`.

use core::fmt;
use core::time::Duration;

use super::config_error::ConfigError;
use super::settings::{Config, MAX_WINDOW_CALLS, MIN_TIME_WINDOW, Window};
use crate::clock::{Clock, ClockRef};
use crate::probe::IntoProbe;

impl Config {
    /// A builder starting from the defaults.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }
}

/// Builds a [`Config`]; see there. Setters never fail: [`build`](ConfigBuilder::build) checks it all.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ConfigBuilder {
    config: Config,
    /// The keys a setter was called for, one bit per [`KEYS`](crate::config_keys::KEYS) entry:
    /// what a layer of configuration names, so that a layer above changes only its own keys.
    given: u32,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => |$c:ident, $v:ident| $body:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $v: $ty) -> Self {
            self.given |= const { key_bit(stringify!($name)) };
            let $c = &mut self.config;
            $body;
            self
        }
    )*};
}

/// The bit of `key` in [`ConfigBuilder::given`]: its place in [`KEYS`](crate::config_keys::KEYS).
/// Evaluated at compile time for every setter, so a setter without a key fails the build.
const fn key_bit(key: &str) -> u32 {
    let keys = crate::config_keys::KEYS;
    let mut i = 0;
    while i < keys.len() {
        let (a, b) = (keys[i].as_bytes(), key.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return 1 << i;
            }
        }
        i += 1;
    }
    panic!("a setter without a config key")
}

impl ConfigBuilder {
    /// The keys a setter was called for, in the order of [`KEYS`](crate::config_keys::KEYS).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn given(&self) -> impl Iterator<Item = &'static str> + '_ {
        crate::config_keys::KEYS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.given & (1 << i) != 0)
            .map(|(_, key)| *key)
    }

    /// Forgets that `key` was given: its default back, as if no setter had been called (a
    /// layer of configuration that switches the way of tripping drops the other way's keys).
    /// Only for the keys of the ways of tripping; any other key is left as it is.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn unset(mut self, key: &str) -> Self {
        let d = Config::default();
        let bit = match key {
            "failures" => {
                self.config.failures = d.failures;
                key_bit("failures")
            }
            "failures_within" => {
                self.config.failures_within = None;
                key_bit("failures_within")
            }
            "failure_rate" => {
                self.config.failure_rate = None;
                key_bit("failure_rate")
            }
            "window" => {
                self.config.window = d.window;
                key_bit("window")
            }
            "min_calls" => {
                self.config.min_calls = d.min_calls;
                key_bit("min_calls")
            }
            _ => 0,
        };
        self.given &= !bit;
        self
    }

    /// The values set so far, unchecked: for messages about a config that does not build.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn values(&self) -> &Config {
        &self.config
    }
}

impl ConfigBuilder {
    setters! {
        /// Trip after this many failures in a row (default 5). Excludes `failure_rate`.
        failures: u32 => |c, v| c.failures = v;
        /// Count consecutive failures only while each falls within this span of the first.
        /// A streak counts at most 16 777 215 failures: a larger `failures` trips there.
        failures_within: Duration => |c, v| c.failures_within = Some(v);
        /// Trip when this percentage (1–100) of the window's calls failed.
        failure_rate: u8 => |c, v| c.failure_rate = Some(v);
        /// The window rates are computed over (default the last 100 calls). Needs
        /// `failure_rate` or `slow_rate`.
        window: Window => |c, v| c.window = v;
        /// Calls the window must hold before a rate is judged (default 10, or the size of a
        /// smaller count window).
        min_calls: u32 => |c, v| c.min_calls = v;
        /// Calls that take at least this long are slow: they count as failures, or by their
        /// own rate when `slow_rate` is set.
        slow: Duration => |c, v| c.slow = Some(v);
        /// Trip when this percentage (1–100) of the window's calls were slow.
        slow_rate: u8 => |c, v| c.slow_rate = Some(v);
        /// How long the breaker stays open before probing (default 60 s).
        open_for: Duration => |c, v| c.open_for = v;
        /// The cap on the open time under `backoff` (default: `open_for` without backoff, else
        /// the larger of `open_for` and 5 minutes).
        max_open_for: Duration => |c, v| c.max_open_for = v;
        /// Multiply the open time by this (1.0–100.0) at each re-open without a close between.
        backoff: f64 => |c, v| c.backoff = v;
        /// Lengthen or shorten each open time by a random fraction up to this (0.0–1.0).
        jitter: f64 => |c, v| c.jitter = v;
        /// Probe calls one half-open round admits (1–65 535, default 1).
        half_open_calls: u32 => |c, v| c.half_open_calls = v;
        /// Successful probes that close the breaker (1 to `half_open_calls`, default 1).
        successes: u32 => |c, v| c.successes = v;
        /// How long a half-open round may last, from entering half-open, before a call that
        /// finds every probe slot taken re-opens the breaker; and, from the round's first
        /// probe, before a probe that ends ignored or cancelled (whose slot is freed before
        /// then) re-opens it (default 60 s).
        probe_timeout: Duration => |c, v| c.probe_timeout = v;
        /// Let at most this many calls run at once while closed (a bulkhead). A permit leaked
        /// with `mem::forget` (or a future parked for ever) holds its place until the next
        /// reset or other state change, which frees every place: calls admitted before it
        /// and still running no longer count against the limit.
        max_concurrent: u32 => |c, v| c.max_concurrent = Some(v);
        /// While open, run the health probe this often (longer than zero, default 5 s). It is
        /// also each probe's time: one still running at the next tick counts as failed.
        /// Without a [`probe`](ConfigBuilder::probe) it does nothing (a config file may set it
        /// for a breaker whose probe the code gives).
        probe_every: Duration => |c, v| c.probe_every = v;
        /// For a keyed family ([`BreakerMap`](crate::BreakerMap)): keep at most about this many
        /// keys (1 or more, default 10 000); see the family for what is never evicted.
        max_keys: u32 => |c, v| c.max_keys = v;
        /// For a keyed family: a key uncalled this long may be evicted (longer than zero,
        /// default 10 minutes).
        idle_for: Duration => |c, v| c.idle_for = v;
        /// Time every call into a latency histogram, read with
        /// [`Breaker::latency`](crate::Breaker::latency) (default `false`). A breaker with a
        /// `slow` threshold times its calls anyway, and keeps the histogram whatever this
        /// says. It costs each call two readings of a timer (the CPU's time-stamp counter on the
        /// system clock; see [`SystemClock`](crate::SystemClock)) and two atomic adds, and the
        /// breaker about 12.6 KB from its first timed call, plus 1.8 KB for each of up to three
        /// more stripes the threads timing its calls need (BENCHMARKS.md, "Latency").
        latency: bool => |c, v| c.latency = v;
        /// Whether [`Registry::health`](crate::Registry::health) counts this breaker (default
        /// `true`): `false` leaves it out, as Spring's `registerHealthIndicator = false` does.
        health: bool => |c, v| c.health = v;
        /// Whether this breaker open (or forced open) makes
        /// [`Registry::health`](crate::Registry::health) `DOWN` (default `false`: `DEGRADED`),
        /// as Spring's `allowHealthIndicatorToFail` does. For a keyed family it applies to
        /// each key: any open key of a critical family is `DOWN`.
        critical: bool => |c, v| c.critical = v;
        /// How long a call may run before it is dropped and counted as a failure (longer
        /// than zero; unset by default). Honoured by an `async fn` whose `#[circuit_breaker]`
        /// attribute names `timeout`, which reads it at each call; the breaker's own
        /// `call`/`call_async` do not time calls out.
        timeout: Duration => |c, v| c.timeout = Some(v);
    }

    /// While the breaker is open, call `probe` every [`probe_every`](ConfigBuilder::probe_every)
    /// (default 5 s); its first success moves the breaker to half-open before `open_for`
    /// ends (`Reason::HealthProbe`), where real calls confirm the recovery. See
    /// [`IntoProbe`] for what a probe may be, and `docs/probes.md` for where it runs.
    ///
    /// A probe takes no arguments and returns `bool` or a `Result`: a blocking one runs on a
    /// thread of its own (`breakerbox-probe`); an `async fn` (feature `tokio`) runs as a task
    /// on the tokio runtime current when the breaker opens — opened outside one, it does not
    /// run that opening. At most one probe runs at a time per breaker; one that outlives
    /// `probe_every` counts as failed (an async one is dropped; a blocking one cannot be, and
    /// no other starts until it returns). A panic counts as a failure; a failure keeps the
    /// breaker open and is not counted as a call. Probes run only on a clock with timers
    /// (the system clock, [`ManualClock`](crate::ManualClock),
    /// `TokioClock` (feature `tokio`) inside a runtime).
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// fn healthy() -> bool {
    ///     true
    /// }
    /// let clock = ManualClock::new();
    /// let config = Config::builder()
    ///     .failures(1)
    ///     .open_for(Duration::from_secs(60))
    ///     .probe(healthy)
    ///     .probe_every(Duration::from_secs(1))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let breaker = Breaker::new("db", config);
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// clock.advance(Duration::from_secs(1)); // the probe starts, on its own thread
    /// loop {
    ///     let probes = breaker.health_probes();
    ///     if probes.started == 1 && probes.running == 0 {
    ///         break; // it ran, and its result was applied
    ///     }
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// # Ok::<(), breakerbox_runtime::ConfigError>(())
    /// ```
    pub fn probe<M>(mut self, probe: impl IntoProbe<M>) -> Self {
        self.config.probe = Some(probe.into_probe());
        self
    }

    /// Reads time from `clock` instead of the system clock: a clock by value, an
    /// `Arc<ManualClock>`, or an `Arc<dyn Clock>` shared with other configs (kept as it is, so
    /// configs given the same one compare equal).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.config.clock = ClockRef::Custom(crate::clock::shared(clock));
        self
    }

    /// Checks every value and combination.
    ///
    /// ```
    /// use breakerbox_runtime::{Config, ConfigError};
    ///
    /// let err = Config::builder().failure_rate(0).build().unwrap_err();
    /// assert_eq!(err.field(), "failure_rate");
    /// assert_eq!(err.to_string(), "`failure_rate` must be a percentage from 1 to 100, got 0");
    /// ```
    pub fn build(self) -> Result<Config, ConfigError> {
        // Whether a setter was called for `key` (and not unset since).
        let has = |key| self.given & key_bit(key) != 0;
        let mut c = self.config;
        let range = |field, allowed, got: &dyn fmt::Debug| ConfigError::OutOfRange {
            field,
            allowed,
            got: format!("{got:?}"),
        };
        if c.failures == 0 {
            return Err(range("failures", "at least 1", &c.failures));
        }
        if let Some(w) = c.failures_within {
            if w.is_zero() {
                return Err(range("failures_within", "longer than zero", &w));
            }
            if c.failure_rate.is_some() {
                return Err(ConfigError::Conflict {
                    field: "failures_within",
                    with: "failure_rate",
                    hint: "a failure rate already counts over its `window`",
                });
            }
        }
        for (field, rate) in [("failure_rate", c.failure_rate), ("slow_rate", c.slow_rate)] {
            if let Some(r) = rate
                && !(1..=100).contains(&r)
            {
                return Err(ConfigError::OutOfRange {
                    field,
                    allowed: "a percentage from 1 to 100",
                    got: r.to_string(),
                });
            }
        }
        if has("failures") && c.failure_rate.is_some() {
            return Err(ConfigError::Conflict {
                field: "failures",
                with: "failure_rate",
                hint: "trip either on consecutive failures or on a failure rate",
            });
        }
        match c.window {
            Window::Calls(n) if !(1..=MAX_WINDOW_CALLS).contains(&n) => {
                return Err(range("window", "from 1 to 10000 calls", &n));
            }
            Window::Time(d) if d < MIN_TIME_WINDOW => {
                return Err(range("window", "at least 10ms", &d));
            }
            _ => {}
        }
        if c.min_calls == 0 {
            return Err(range("min_calls", "at least 1", &c.min_calls));
        }
        if let Window::Calls(n) = c.window
            && c.min_calls > n
        {
            if has("min_calls") {
                return Err(ConfigError::OutOfRange {
                    field: "min_calls",
                    allowed: "at most the window's size",
                    got: format!("{} with a window of {n} calls", c.min_calls),
                });
            }
            // The default minimum adapts to a small window the user chose.
            c.min_calls = n;
        }
        if (has("window") || has("min_calls")) && !c.uses_window() {
            return Err(ConfigError::Requires {
                field: if has("window") { "window" } else { "min_calls" },
                requires: "`failure_rate` or `slow_rate`",
            });
        }
        if let Some(s) = c.slow
            && s.is_zero()
        {
            return Err(range("slow", "longer than zero", &s));
        }
        if c.slow_rate.is_some() && c.slow.is_none() {
            return Err(ConfigError::Requires {
                field: "slow_rate",
                requires: "`slow`, the duration from which a call is slow",
            });
        }
        if c.open_for.is_zero() {
            return Err(range("open_for", "longer than zero", &c.open_for));
        }
        if !has("max_open_for") {
            c.max_open_for = default_max_open_for(c.open_for, c.backoff);
        } else if c.max_open_for < c.open_for {
            return Err(ConfigError::OutOfRange {
                field: "max_open_for",
                allowed: "at least `open_for`",
                got: format!("{:?} with open_for {:?}", c.max_open_for, c.open_for),
            });
        }
        if !(c.backoff.is_finite() && (1.0..=100.0).contains(&c.backoff)) {
            return Err(range("backoff", "a factor from 1.0 to 100.0", &c.backoff));
        }
        if !(c.jitter.is_finite() && (0.0..=1.0).contains(&c.jitter)) {
            return Err(range("jitter", "a fraction from 0.0 to 1.0", &c.jitter));
        }
        if !(1..=u32::from(u16::MAX)).contains(&c.half_open_calls) {
            return Err(range(
                "half_open_calls",
                "from 1 to 65535",
                &c.half_open_calls,
            ));
        }
        if c.successes == 0 || c.successes > c.half_open_calls {
            return Err(ConfigError::OutOfRange {
                field: "successes",
                allowed: "from 1 to `half_open_calls` (a round admits no more probes)",
                got: format!("{} with half_open_calls {}", c.successes, c.half_open_calls),
            });
        }
        if c.probe_timeout.is_zero() {
            return Err(range("probe_timeout", "longer than zero", &c.probe_timeout));
        }
        if c.max_concurrent == Some(0) {
            return Err(range("max_concurrent", "at least 1", &0));
        }
        if c.probe_every.is_zero() {
            return Err(range("probe_every", "longer than zero", &c.probe_every));
        }
        if c.max_keys == 0 {
            return Err(range("max_keys", "at least 1", &c.max_keys));
        }
        if c.idle_for.is_zero() {
            return Err(range("idle_for", "longer than zero", &c.idle_for));
        }
        if let Some(t) = c.timeout
            && t.is_zero()
        {
            return Err(range("timeout", "longer than zero", &t));
        }
        Ok(c)
    }
}

/// `max_open_for` when none is set: `open_for` without backoff, else the larger of `open_for`
/// and 5 minutes.
pub(crate) fn default_max_open_for(open_for: Duration, backoff: f64) -> Duration {
    if backoff > 1.0 {
        open_for.max(Duration::from_secs(300))
    } else {
        open_for
    }
}
