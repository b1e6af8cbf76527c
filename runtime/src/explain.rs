//! `Breaker::explain`: why a breaker is in its state, as data and as a sentence.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;
use std::time::SystemTime;

use crate::config::Window;
use crate::event::Reason;
use crate::state::State;

/// What a transition leaves behind for [`Explanation`]: why it happened and the numbers that
/// made it happen. Written under the breaker's transition lock, with the state it explains.
#[derive(Clone, Debug, Default)]
pub(crate) struct Why {
    /// Why the breaker entered its state; `None` if it never changed state.
    pub(crate) reason: Option<Reason>,
    /// The wall time of the change.
    pub(crate) wall: Option<SystemTime>,
    /// For a rate trip: the bad calls (failed or slow) and the calls in the window when it
    /// tripped.
    pub(crate) tally: Option<(u64, u64)>,
    /// For an opening: how long it was opened for (jitter and backoff applied).
    pub(crate) open_for: Option<Duration>,
}

/// What the breaker hands over to build an [`Explanation`]; see `Inner::explain_parts`.
pub(crate) struct Parts {
    pub(crate) name: String,
    pub(crate) state: State,
    pub(crate) now: Duration,
    pub(crate) since: Duration,
    pub(crate) why: Why,
    pub(crate) last_failure: Option<Arc<str>>,
    /// While open: when it half-opens, on the breaker's clock.
    pub(crate) open_until: Option<Duration>,
    pub(crate) reopens: u32,
    pub(crate) consecutive_failures: u64,
    pub(crate) probe_successes: u64,
    /// The window's bad (failed, slow) calls and calls now, with a rate policy.
    pub(crate) window: Option<(u64, u64, u64)>,
    pub(crate) config: crate::Config,
}

/// Why a breaker is in its state: from [`Breaker::explain`](crate::Breaker::explain).
///
/// As data, for dashboards and admin endpoints, and as a sentence through `Display`:
///
/// ```text
/// open since 12:00:03 UTC (2.1 s ago) because 6 of the last 10 calls failed (60 % ≥ 50 %,
/// window 10 s, min 5); last failure: 'server answered 500'; next probe in 0.9 s (backoff ×2,
/// 3rd re-open)
/// ```
///
/// (one line). The wall time is the system's at the change, in UTC, to the second; a breaker
/// that never changed state says `closed since it was created`. Times in the sentence are
/// rounded to a tenth of a second (milliseconds below one second).
///
/// The explanation is a snapshot taken without stopping the breaker: if a transition happens
/// while it is taken, its parts may straddle the change (the state from before, the reason
/// from after, say). Taken again, it is consistent.
///
/// ```
/// use breakerbox_runtime::{Breaker, Cause, Config, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let config = Config::builder().failures(2).open_for(Duration::from_secs(10)).clock(clock.clone());
/// let breaker = Breaker::new("users", config.build()?);
/// for _ in 0..2 {
///     let _ = breaker.call(|| Err::<(), _>("connection refused"));
/// }
/// clock.advance(Duration::from_millis(2100));
/// let why = breaker.explain();
/// assert_eq!(why.state, State::Open);
/// assert_eq!(why.cause, Cause::Failures { failures: 2, threshold: 2, within: None });
/// assert_eq!(why.elapsed, Duration::from_millis(2100));
/// assert_eq!(why.next_probe_in, Some(Duration::from_millis(7900)));
/// assert!(why.to_string().ends_with(
///     "(2.1 s ago) because 2 calls failed in a row (threshold 2); \
///      last failure: 'connection refused'; next probe in 7.9 s"
/// ));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Explanation {
    /// The breaker's name.
    pub name: String,
    /// Its state.
    pub state: State,
    /// When it entered the state, on the breaker's clock (comparable with
    /// [`Event::at`](crate::Event::at)).
    pub since: Duration,
    /// How long it has been in the state, on the breaker's clock.
    pub elapsed: Duration,
    /// When it entered the state on the system's wall clock; `None` if it never changed state.
    pub since_wall: Option<SystemTime>,
    /// What put it in this state.
    pub cause: Cause,
    /// The message of the failure that last tripped it (see
    /// [`Breaker::last_failure`](crate::Breaker::last_failure)); shown while not closed.
    pub last_failure: Option<Arc<str>>,
    /// While open: how long until it half-opens.
    pub next_probe_in: Option<Duration>,
    /// While open: how long this opening lasts, from `since` (backoff, cap and jitter
    /// applied).
    pub open_for: Option<Duration>,
    /// While open after a re-open under `backoff` (a factor above 1): that factor. This
    /// opening's time is `open_for × backoff^reopens`, capped at `max_open_for`.
    pub backoff: Option<f64>,
    /// Re-opens since the last close: 0 while closed and during the first opening.
    pub reopens: u32,
    /// Where the breaker stands against its policy now.
    pub progress: Progress,
}

/// What put a breaker in its state: the [`Reason`] of its last change, with the numbers
/// behind it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Cause {
    /// It never changed state.
    Created,
    /// Failures in a row reached the threshold.
    Failures {
        /// Failures in the streak that tripped it.
        failures: u32,
        /// `failures`.
        threshold: u32,
        /// `failures_within`, if set.
        within: Option<Duration>,
    },
    /// The window's failure rate reached the limit.
    FailureRate {
        /// Failed calls in the window at the trip (`None` if not known: an imported state).
        failed: Option<u64>,
        /// Calls in the window at the trip.
        calls: Option<u64>,
        /// The rate, in percent.
        rate: u8,
        /// `failure_rate`.
        threshold: u8,
        /// `window`.
        window: Window,
        /// `min_calls`.
        min_calls: u32,
    },
    /// The window's slow-call rate reached the limit.
    SlowRate {
        /// Slow calls in the window at the trip.
        slow_calls: Option<u64>,
        /// Calls in the window at the trip.
        calls: Option<u64>,
        /// The rate, in percent.
        rate: u8,
        /// `slow_rate`.
        threshold: u8,
        /// `slow`: from this long, a call is slow.
        slow: Duration,
        /// `window`.
        window: Window,
        /// `min_calls`.
        min_calls: u32,
    },
    /// A call's outcome ([`Outcome::TripFor`](crate::Outcome::TripFor)) or
    /// [`Breaker::trip_for`](crate::Breaker::trip_for) opened it for this long.
    TripFor(Duration),
    /// Its open time ended: probing.
    OpenElapsed,
    /// A probe failed.
    ProbeFailed,
    /// No probe finished within `probe_timeout` (given).
    ProbeTimeout(Duration),
    /// Enough probes (given) succeeded.
    ProbesSucceeded(u32),
    /// [`Breaker::force_open`](crate::Breaker::force_open).
    ForcedOpen,
    /// [`Breaker::disable`](crate::Breaker::disable).
    Disabled,
    /// [`Breaker::reset`](crate::Breaker::reset).
    Reset,
    /// [`Breaker::import_state`](crate::Breaker::import_state).
    Imported,
}

/// Where a breaker stands against its policy now.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Progress {
    /// Nothing to report: open, forced open or disabled.
    None,
    /// Closed, consecutive policy: failures in a row so far, of the threshold.
    Failures {
        /// Failures in a row now.
        failures: u64,
        /// `failures`.
        threshold: u32,
    },
    /// Closed, rate policy: the window now.
    Window {
        /// Failed calls in the window.
        failed: u64,
        /// Slow calls in the window.
        slow: u64,
        /// Calls in the window.
        calls: u64,
    },
    /// Half-open: successful probes so far, of those needed to close.
    Probes {
        /// Successful probes this round.
        succeeded: u64,
        /// `successes`.
        needed: u32,
    },
}

impl Explanation {
    pub(crate) fn new(p: Parts) -> Explanation {
        let c = &p.config;
        let cause = match p.why.reason {
            None => Cause::Created,
            Some(reason) => cause(reason, &p.why, c),
        };
        let open = p.state == State::Open;
        let backoff = (open && c.backoff > 1.0 && p.reopens > 0).then_some(c.backoff);
        let progress = match p.state {
            State::Closed => match p.window {
                Some((failed, slow, calls)) => Progress::Window {
                    failed,
                    slow,
                    calls,
                },
                None => Progress::Failures {
                    failures: p.consecutive_failures,
                    threshold: c.failures,
                },
            },
            State::HalfOpen => Progress::Probes {
                succeeded: p.probe_successes,
                needed: c.successes,
            },
            _ => Progress::None,
        };
        Explanation {
            name: p.name,
            state: p.state,
            since: p.since,
            elapsed: p.now.saturating_sub(p.since),
            since_wall: p.why.wall,
            cause,
            last_failure: p.last_failure,
            next_probe_in: p
                .open_until
                .filter(|_| open)
                .map(|until| until.saturating_sub(p.now)),
            open_for: p.why.open_for.filter(|_| open),
            backoff,
            reopens: p.reopens,
            progress,
        }
    }

    /// The short form: the cause and the last failure, without times. What the `tracing`
    /// event of an opening carries in its `why` field.
    ///
    /// `6 of the last 10 calls failed (60 % ≥ 50 %, window 10 s, min 5); last failure: 'server
    /// answered 500'`
    pub fn short(&self) -> impl fmt::Display + '_ {
        Short(self)
    }
}

fn cause(reason: Reason, why: &Why, c: &crate::Config) -> Cause {
    match reason {
        Reason::Failures(n) => Cause::Failures {
            failures: n,
            threshold: c.failures,
            within: c.failures_within,
        },
        Reason::FailureRate(rate) => Cause::FailureRate {
            failed: why.tally.map(|t| t.0),
            calls: why.tally.map(|t| t.1),
            rate,
            threshold: c.failure_rate.unwrap_or(rate),
            window: c.window,
            min_calls: c.min_calls,
        },
        Reason::SlowRate(rate) => Cause::SlowRate {
            slow_calls: why.tally.map(|t| t.0),
            calls: why.tally.map(|t| t.1),
            rate,
            threshold: c.slow_rate.unwrap_or(rate),
            slow: c.slow.unwrap_or_default(),
            window: c.window,
            min_calls: c.min_calls,
        },
        Reason::TripFor(d) => Cause::TripFor(d),
        Reason::OpenElapsed => Cause::OpenElapsed,
        Reason::ProbeFailed => Cause::ProbeFailed,
        Reason::ProbeTimeout => Cause::ProbeTimeout(c.probe_timeout),
        Reason::ProbesSucceeded => Cause::ProbesSucceeded(c.successes),
        Reason::ForcedOpen => Cause::ForcedOpen,
        Reason::Disabled => Cause::Disabled,
        Reason::Reset => Cause::Reset,
        Reason::Imported => Cause::Imported,
    }
}

/// `2.1 s`, `900 ms`, `10 s`, `3 min 20 s`, `2 h 5 min`: for people, rounded.
pub(crate) struct Human(pub(crate) Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms < 1000 {
            if ms == 0 && !self.0.is_zero() {
                return f.write_str("< 1 ms");
            }
            return write!(f, "{ms} ms");
        }
        // Tenths of a second, rounded to nearest.
        let tenths = (ms + 50) / 100;
        if tenths < 600 {
            return match tenths % 10 {
                0 => write!(f, "{} s", tenths / 10),
                t => write!(f, "{}.{t} s", tenths / 10),
            };
        }
        let secs = (ms + 500) / 1000;
        if secs < 3600 {
            return match secs % 60 {
                0 => write!(f, "{} min", secs / 60),
                s => write!(f, "{} min {s} s", secs / 60),
            };
        }
        let mins = (secs + 30) / 60;
        match mins % 60 {
            0 => write!(f, "{} h", mins / 60),
            m => write!(f, "{} h {m} min", mins / 60),
        }
    }
}

/// `12:00:03 UTC`: the time of day of a wall time.
pub(crate) struct TimeOfDay(pub(crate) SystemTime);

impl fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => {
                let s = d.as_secs() % 86_400;
                write!(f, "{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
            }
            Err(_) => f.write_str("(before 1970)"),
        }
    }
}

struct WindowText(Window);

impl fmt::Display for WindowText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Window::Calls(n) => write!(f, "window {n} calls"),
            Window::Time(d) => write!(f, "window {}", Human(d)),
        }
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

impl fmt::Display for Cause {
    /// The cause as a clause: `6 of the last 10 calls failed (60 % ≥ 50 %, window 10 s, min 5)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Created => f.write_str("it was created so"),
            Cause::Failures {
                failures,
                threshold,
                within,
            } => {
                let calls = plural(u64::from(*failures), "call", "calls");
                write!(f, "{failures} {calls} failed in a row")?;
                if let Some(within) = within {
                    write!(f, " within {}", Human(*within))?;
                }
                write!(f, " (threshold {threshold})")
            }
            Cause::FailureRate {
                failed,
                calls,
                rate,
                threshold,
                window,
                min_calls,
            } => {
                match (failed, calls) {
                    (Some(n), Some(m)) => write!(f, "{n} of the last {m} calls failed")?,
                    _ => f.write_str("the failure rate reached its limit")?,
                }
                write!(
                    f,
                    " ({rate} % ≥ {threshold} %, {}, min {min_calls})",
                    WindowText(*window)
                )
            }
            Cause::SlowRate {
                slow_calls,
                calls,
                rate,
                threshold,
                slow,
                window,
                min_calls,
            } => {
                match (slow_calls, calls) {
                    (Some(n), Some(m)) => {
                        write!(f, "{n} of the last {m} calls took {} or more", Human(*slow))?
                    }
                    _ => f.write_str("the slow-call rate reached its limit")?,
                }
                write!(
                    f,
                    " ({rate} % ≥ {threshold} %, {}, min {min_calls})",
                    WindowText(*window)
                )
            }
            Cause::TripFor(d) => write!(f, "it was tripped for {}", Human(*d)),
            Cause::OpenElapsed => f.write_str("its open time ended"),
            Cause::ProbeFailed => f.write_str("a probe failed"),
            Cause::ProbeTimeout(d) => write!(f, "no probe finished within {}", Human(*d)),
            Cause::ProbesSucceeded(n) => {
                let probes = plural(u64::from(*n), "probe", "probes");
                write!(f, "{n} {probes} succeeded")
            }
            Cause::ForcedOpen => f.write_str("it was forced open by hand"),
            Cause::Disabled => f.write_str("it was disabled by hand"),
            Cause::Reset => f.write_str("it was reset by hand"),
            Cause::Imported => f.write_str("its state was imported"),
        }
    }
}

struct Short<'a>(&'a Explanation);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        write!(f, "{}", e.cause)?;
        if let Some(last) = e
            .last_failure
            .as_deref()
            .filter(|_| e.state != State::Closed)
        {
            write!(f, "; last failure: '{last}'")?;
        }
        Ok(())
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ago = Human(self.elapsed);
        match (&self.cause, self.since_wall) {
            (Cause::Created, _) => write!(f, "{} since it was created ({ago} ago)", self.state)?,
            (cause, Some(wall)) => write!(
                f,
                "{} since {} ({ago} ago) because {cause}",
                self.state,
                TimeOfDay(wall)
            )?,
            (cause, None) => write!(f, "{} for {ago} because {cause}", self.state)?,
        }
        if let Some(last) = self
            .last_failure
            .as_deref()
            .filter(|_| self.state != State::Closed)
        {
            write!(f, "; last failure: '{last}'")?;
        }
        if let Some(next) = self.next_probe_in {
            write!(f, "; next probe in {}", Human(next))?;
            match (self.backoff, self.reopens) {
                (Some(b), n) if n > 0 => {
                    write!(f, " (backoff ×{}, {} re-open)", Factor(b), ordinal(n))?
                }
                (None, n) if n > 0 => write!(f, " ({} re-open)", ordinal(n))?,
                _ => {}
            }
        }
        match &self.progress {
            Progress::None => {}
            Progress::Failures {
                failures,
                threshold,
            } => write!(f, "; {failures} of {threshold} failures in a row so far")?,
            Progress::Window {
                failed,
                slow,
                calls,
            } => {
                write!(f, "; window now: {calls} calls, {failed} failed")?;
                if *slow > 0 {
                    write!(f, ", {slow} slow")?;
                }
            }
            Progress::Probes { succeeded, needed } => {
                write!(f, "; {succeeded} of {needed} probes succeeded so far")?
            }
        }
        Ok(())
    }
}

/// A backoff factor: `2`, `1.5`, `2.25`.
struct Factor(f64);

impl fmt::Display for Factor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{:.2}", self.0);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        f.write_str(text)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{Breaker, Config, ConfigBuilder, ManualClock, Outcome, SharedState};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn breaker(config: ConfigBuilder) -> (Breaker, ManualClock) {
        let clock = ManualClock::new();
        let config = config.clock(clock.clone()).build().unwrap();
        (Breaker::new("explained", config), clock)
    }

    fn fail(b: &Breaker, why: &str) {
        b.call(|| Err::<(), _>(why)).unwrap_err();
    }

    fn ok(b: &Breaker) {
        b.call(|| Ok::<_, &str>(())).unwrap();
    }

    /// The sentence, with the wall time of the change written as `T`.
    fn sentence(e: &Explanation) -> String {
        let text = e.to_string();
        match e.since_wall {
            Some(wall) => text.replacen(&TimeOfDay(wall).to_string(), "T", 1),
            None => text,
        }
    }

    #[test]
    fn a_new_breaker_is_closed_since_it_was_created() {
        let (b, clock) = breaker(Config::builder().failures(5));
        clock.advance(ms(1500));
        fail(&b, "boom");
        let e = b.explain();
        assert_eq!(e.cause, Cause::Created);
        assert_eq!(e.since_wall, None);
        assert_eq!((e.since, e.elapsed), (Duration::ZERO, ms(1500)));
        assert_eq!(
            e.progress,
            Progress::Failures {
                failures: 1,
                threshold: 5
            }
        );
        assert_eq!(
            sentence(&e),
            "closed since it was created (1.5 s ago); 1 of 5 failures in a row so far"
        );
    }

    #[test]
    fn open_by_consecutive_failures() {
        let (b, clock) = breaker(Config::builder().failures(2).open_for(ms(10_000)));
        clock.advance(ms(500));
        fail(&b, "refused");
        fail(&b, "server answered 500");
        clock.advance(ms(2100));
        let e = b.explain();
        assert_eq!(e.state, State::Open);
        assert_eq!((e.since, e.elapsed), (ms(500), ms(2100)));
        assert!(e.since_wall.is_some());
        assert_eq!(e.next_probe_in, Some(ms(7900)));
        assert_eq!(e.open_for, Some(ms(10_000)));
        assert_eq!((e.backoff, e.reopens), (None, 0));
        assert_eq!(e.last_failure.as_deref(), Some("server answered 500"));
        assert_eq!(
            sentence(&e),
            "open since T (2.1 s ago) because 2 calls failed in a row (threshold 2); \
             last failure: 'server answered 500'; next probe in 7.9 s"
        );
        assert_eq!(
            e.short().to_string(),
            "2 calls failed in a row (threshold 2); last failure: 'server answered 500'"
        );
    }

    #[test]
    fn open_by_failures_within_a_span() {
        let (b, _) = breaker(Config::builder().failures(3).failures_within(ms(10_000)));
        for _ in 0..3 {
            fail(&b, "timeout");
        }
        assert_eq!(
            b.explain().short().to_string(),
            "3 calls failed in a row within 10 s (threshold 3); last failure: 'timeout'"
        );
    }

    /// The issue's example, to the letter (its times but the wall clock).
    #[test]
    fn open_by_a_failure_rate_with_backoff_after_re_opens() {
        let (b, clock) = breaker(
            Config::builder()
                .failure_rate(50)
                .window(crate::Window::Time(ms(10_000)))
                .min_calls(5)
                .open_for(ms(1000))
                .backoff(2.0)
                .max_open_for(ms(60_000)),
        );
        // 4 successes, then failures: judged from the 5th call, 50 % is reached at 4 of 8.
        for _ in 0..4 {
            ok(&b);
        }
        for _ in 0..4 {
            fail(&b, "server answered 500");
        }
        let e = b.explain();
        assert_eq!(
            e.cause,
            Cause::FailureRate {
                failed: Some(4),
                calls: Some(8),
                rate: 50,
                threshold: 50,
                window: crate::Window::Time(ms(10_000)),
                min_calls: 5
            }
        );
        // Three re-opens: each open time ends (the timer half-opens it), the probe fails.
        for open_for in [1000, 2000, 4000] {
            clock.advance(ms(open_for));
            assert_eq!(b.state(), State::HalfOpen);
            fail(&b, "server answered 500");
        }
        clock.advance(ms(2100));
        let e = b.explain();
        assert_eq!(e.cause, Cause::ProbeFailed);
        assert_eq!((e.reopens, e.backoff), (3, Some(2.0)));
        assert_eq!(e.open_for, Some(ms(8000)));
        assert_eq!(
            sentence(&e),
            "open since T (2.1 s ago) because a probe failed; last failure: 'server answered \
             500'; next probe in 5.9 s (backoff ×2, 3rd re-open)"
        );
    }

    #[test]
    fn the_example_sentence_of_a_rate_trip() {
        let (b, clock) = breaker(
            Config::builder()
                .failure_rate(60)
                .window(crate::Window::Time(ms(10_000)))
                .min_calls(5)
                .open_for(ms(3000)),
        );
        // Judged from the 5th call: 1 of 5, 2 of 6, …, 5 of 9 (55 %), 6 of 10 trips.
        for _ in 0..4 {
            ok(&b);
        }
        for _ in 0..5 {
            fail(&b, "server answered 500");
            assert_eq!(b.state(), State::Closed);
        }
        fail(&b, "server answered 500");
        clock.advance(ms(2100));
        let e = b.explain();
        assert_eq!(
            sentence(&e),
            "open since T (2.1 s ago) because 6 of the last 10 calls failed (60 % ≥ 60 %, \
             window 10 s, min 5); last failure: 'server answered 500'; next probe in 900 ms"
        );
    }

    #[test]
    fn open_by_a_slow_rate_in_a_count_window() {
        let (b, clock) = breaker(
            Config::builder()
                .slow(ms(100))
                .slow_rate(50)
                .window(crate::Window::Calls(4))
                .min_calls(4),
        );
        for took in [10, 200, 10, 200] {
            let p = b.try_acquire().unwrap();
            clock.advance(ms(took));
            p.success();
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(
            b.explain().short().to_string(),
            "2 of the last 4 calls took 100 ms or more (50 % ≥ 50 %, window 4 calls, min 4)"
        );
    }

    #[test]
    fn half_open_then_closed_by_probes() {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(ms(1000))
                .half_open_calls(2)
                .successes(2),
        );
        fail(&b, "down");
        clock.advance(ms(1000));
        let e = b.explain();
        assert_eq!(
            (e.state, e.cause.clone()),
            (State::HalfOpen, Cause::OpenElapsed)
        );
        assert_eq!(
            e.since,
            ms(1000),
            "half-open from the moment the open time ended"
        );
        ok(&b);
        assert_eq!(
            sentence(&b.explain()),
            "half-open since T (0 ms ago) because its open time ended; last failure: 'down'; \
             1 of 2 probes succeeded so far"
        );
        ok(&b);
        clock.advance(ms(300));
        let e = b.explain();
        assert_eq!(e.cause, Cause::ProbesSucceeded(2));
        assert_eq!(
            sentence(&e),
            "closed since T (300 ms ago) because 2 probes succeeded; 0 of 1 failures in a row \
             so far"
        );
    }

    #[test]
    fn re_opened_by_a_probe_timeout() {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(ms(1000))
                .probe_timeout(ms(500)),
        );
        fail(&b, "down");
        clock.advance(ms(1000));
        let hung = b.try_acquire().unwrap();
        clock.advance(ms(500));
        b.try_acquire().unwrap_err();
        assert_eq!(b.explain().cause, Cause::ProbeTimeout(ms(500)));
        // A re-open with no failure of its own names none (as `last_failure` documents).
        assert_eq!(
            b.explain().short().to_string(),
            "no probe finished within 500 ms"
        );
        hung.ignore();
    }

    #[test]
    fn manual_states() {
        let (b, clock) = breaker(Config::builder());
        b.force_open();
        clock.advance(ms(61_000));
        assert_eq!(
            sentence(&b.explain()),
            "forced-open since T (1 min 1 s ago) because it was forced open by hand"
        );
        b.disable();
        assert_eq!(
            sentence(&b.explain()),
            "disabled since T (0 ms ago) because it was disabled by hand"
        );
        b.reset();
        assert_eq!(
            sentence(&b.explain()),
            "closed since T (0 ms ago) because it was reset by hand; 0 of 5 failures in a row \
             so far"
        );
        b.trip_for(ms(30_000));
        assert_eq!(
            sentence(&b.explain()),
            "open since T (0 ms ago) because it was tripped for 30 s; next probe in 30 s"
        );
        b.call_with(|| (), |_| Outcome::TripFor(ms(5000)))
            .unwrap_err();
    }

    #[test]
    fn a_trip_for_by_an_outcome_and_an_imported_state() {
        let (b, _) = breaker(Config::builder());
        b.call_with(|| 503, |_| Outcome::TripFor(ms(5000))).unwrap();
        assert_eq!(b.explain().cause, Cause::TripFor(ms(5000)));
        let (other, _) = breaker(Config::builder());
        other.import_state(&SharedState::new(State::Open, Some(ms(4000)), 2));
        let e = other.explain();
        assert_eq!((e.cause.clone(), e.reopens), (Cause::Imported, 2));
        assert_eq!(
            sentence(&e),
            "open since T (0 ms ago) because its state was imported; next probe in 4 s \
             (2nd re-open)"
        );
    }

    #[test]
    fn a_closed_rate_breaker_shows_its_window() {
        let (b, _) = breaker(
            Config::builder()
                .failure_rate(50)
                .window(crate::Window::Calls(10)),
        );
        ok(&b);
        fail(&b, "x");
        assert_eq!(
            sentence(&b.explain()),
            "closed since it was created (0 ms ago); window now: 2 calls, 1 failed"
        );
    }

    /// A keyed family's entries are breakers: each explains itself.
    #[test]
    fn a_keyed_familys_entry_explains_itself() {
        let clock = ManualClock::new();
        let config = Config::builder()
            .failures(1)
            .clock(clock.clone())
            .build()
            .unwrap();
        let map: crate::BreakerMap<&str> = crate::BreakerMap::new("hosts", config);
        map.call(&"a.example", || Err::<(), _>("refused"))
            .unwrap_err();
        let e = map.get(&"a.example").unwrap().explain();
        assert_eq!(e.state, State::Open);
        assert_eq!(
            e.short().to_string(),
            "1 call failed in a row (threshold 1); last failure: 'refused'"
        );
    }

    #[test]
    fn human_durations() {
        let h = |ms: u64| Human(Duration::from_millis(ms)).to_string();
        assert_eq!(h(0), "0 ms");
        assert_eq!(h(900), "900 ms");
        assert_eq!(h(1000), "1 s");
        assert_eq!(h(2100), "2.1 s");
        assert_eq!(h(2149), "2.1 s");
        assert_eq!(h(2150), "2.2 s");
        assert_eq!(h(59_949), "59.9 s");
        assert_eq!(h(59_950), "1 min");
        assert_eq!(h(200_000), "3 min 20 s");
        assert_eq!(h(7_500_000), "2 h 5 min");
        assert_eq!(Human(Duration::from_nanos(5)).to_string(), "< 1 ms");
    }

    #[test]
    fn time_of_day_and_ordinals_and_factors() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(86_400 * 20_000 + 12 * 3600 + 3);
        assert_eq!(TimeOfDay(t).to_string(), "12:00:03 UTC");
        let ords: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .map(ordinal)
            .into();
        assert_eq!(
            ords,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
        assert_eq!(Factor(2.0).to_string(), "2");
        assert_eq!(Factor(1.5).to_string(), "1.5");
        assert_eq!(Factor(2.25).to_string(), "2.25");
    }
}
