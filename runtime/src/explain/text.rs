//! The sentences of an [`Explanation`]: its `Display`, the short form, and the words for
//! durations, times of day, windows and counts they use.

use core::fmt;
use core::time::Duration;
use std::time::SystemTime;

use super::model::{Cause, Explanation, Progress};
use crate::config::Window;
use crate::state::State;

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

pub(super) fn ordinal(n: u32) -> String {
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
            Cause::HealthProbe => f.write_str("a health probe succeeded"),
            Cause::ForcedOpen => f.write_str("it was forced open by hand"),
            Cause::Disabled => f.write_str("it was disabled by hand"),
            Cause::Reset => f.write_str("it was reset by hand"),
            Cause::Imported => f.write_str("its state was imported"),
            Cause::Told(told) => f.write_str(told),
        }
    }
}

struct Short<'a>(&'a Explanation);

impl Explanation {
    /// The short form: the cause and the last failure, without times. What the `tracing`
    /// event of an opening carries in its `why` field.
    ///
    /// `6 of the last 10 calls failed (60 % ≥ 50 %, window 10 s, min 5); last failure: 'server
    /// answered 500'`
    pub fn short(&self) -> impl fmt::Display + '_ {
        Short(self)
    }
}

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
        if let Some(key) = &self.key {
            write!(f, "key '{key}': ")?;
        }
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
pub(super) struct Factor(pub(super) f64);

impl fmt::Display for Factor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{:.2}", self.0);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        f.write_str(text)
    }
}
