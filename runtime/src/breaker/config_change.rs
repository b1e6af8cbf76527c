//! A live breaker's config replaced without losing its state ([`Breaker::reconfigure`]).

use super::Breaker;
use crate::config::Config;
use crate::reconfigure::ReconfigureError;
use crate::sync::lock;

impl Breaker {
    /// Applies `config` to this live breaker without losing its state, counts, window or open
    /// time: the new thresholds judge the calls already in the window from the next call on,
    /// a new `open_for` (or backoff, jitter, cap) applies from the next opening (an open
    /// breaker keeps its deadline), and a new `half_open_calls` or `successes` applies to
    /// the round under way. The breaker's clock stays its own (`config`'s is not used), and
    /// so does its health probe if `config` has none (a new `probe_every` applies from the
    /// next opening).
    ///
    /// Refused, with nothing changed, for a config that changes what shapes the breaker's
    /// window or call path: the window's kind or size, adding or removing `failure_rate`,
    /// `slow_rate`, `slow`, `max_concurrent` or `failures_within`. Those apply only to a new
    /// breaker. Returns whether the config differed.
    ///
    /// A call under way while the config changes may read some values from the old config
    /// and some from the new. Each replaced config is kept (a couple of hundred bytes) until
    /// the breaker is dropped, since such a call may still read it; a registry breaker keeps
    /// them for the process, so reload on a change, not on a timer.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, State};
    ///
    /// let breaker = Breaker::new("users", Config::builder().failures(3).build()?);
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// breaker.reconfigure(Config::builder().failures(2).build()?).unwrap();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), State::Open, "the streak was kept, and judged by 2");
    /// # Ok::<(), breakerbox_runtime::ConfigError>(())
    /// ```
    pub fn reconfigure(&self, config: Config) -> Result<bool, ReconfigureError> {
        let inner = self.inner();
        crate::reconfigure::compatible(&inner.config, &config)?;
        let mut config = config;
        config.clock = inner.config.clock.clone();
        if config.probe.is_none() {
            // A config from a file has no probe: the code's stays.
            config.probe = inner.config.probe.clone();
        }
        if *inner.config == config {
            return Ok(false);
        }
        // Interned outside the lock (the pool may drop a config, and with it a clock).
        let config = crate::config::intern(config);
        let old = {
            let _guard = lock(&inner.transition);
            // SAFETY: the old config goes to `retired`, which lives as long as the breaker.
            unsafe { inner.config.swap(config) }
        };
        inner
            .extras()
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(old);
        Ok(true)
    }

    /// Whether `config` can be applied by [`reconfigure`](Breaker::reconfigure). For the
    /// TOML loader's all-or-nothing reload.
    #[cfg(feature = "serde")]
    pub(crate) fn can_reconfigure(&self, config: &Config) -> Result<(), ReconfigureError> {
        crate::reconfigure::compatible(&self.inner().config, config)
    }
}
