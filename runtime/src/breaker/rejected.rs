//! [`Rejected`], a refused call, with what it reports of its breaker (`Report`), and
//! [`Error`], a call's error through the breaker; and a failure's message, as the user's
//! `Display` writes it with its panic caught, which a breaker keeps as its last failure.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use crate::clock::ClockRef;
use crate::config::Config;
use crate::error::{NO_RETRY, RejectReason, Secs};
use crate::identity::Identity;

/// What a panicking `Display` leaves in a message.
pub(crate) const DISPLAY_PANICKED: &str = "<Display panicked>";

/// A user's `Display`, whose panic is caught: it ends what was written with
/// [`DISPLAY_PANICKED`] instead of unwinding through the breaker.
pub(super) struct CaughtDisplay<'a>(pub(super) &'a dyn fmt::Display);

impl fmt::Display for CaughtDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.fmt(f))) {
            Ok(result) => result,
            Err(payload) => {
                // Its `Drop` is user code too, and may panic.
                crate::event::discard(payload);
                f.write_str(DISPLAY_PANICKED)
            }
        }
    }
}

/// The longest failure message a breaker keeps, in bytes; a longer one is cut at a character
/// boundary and ends with [`CUT`]. A message travels far: into every rejection's text, every
/// event, the admin history and, in fleet mode, the store's record. An error whose `Display`
/// writes a response body must not take all of it along.
pub(crate) const MAX_FAILURE_MESSAGE: usize = 1024;

/// What ends a failure message cut at [`MAX_FAILURE_MESSAGE`].
const CUT: &str = "… (cut)";

/// A failure's message, formatted by the user's `Display`, at most [`MAX_FAILURE_MESSAGE`]
/// bytes; [`DISPLAY_PANICKED`] if it panics. Formatting stops once the message is full (the
/// writer answers an error), so a huge `Display` costs no more than the cut.
pub(crate) fn message(cause: &dyn fmt::Display) -> Arc<str> {
    /// Keeps the first [`MAX_FAILURE_MESSAGE`] bytes written, then refuses the rest.
    struct Bounded {
        text: String,
        cut: bool,
    }
    impl fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let room = MAX_FAILURE_MESSAGE - self.text.len();
            if s.len() <= room {
                self.text.push_str(s);
                return Ok(());
            }
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&s[..end]);
            self.cut = true;
            Err(fmt::Error)
        }
    }
    let mut out = Bounded {
        text: String::new(),
        cut: false,
    };
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fmt::write(&mut out, format_args!("{cause}"))
    }));
    match written {
        Ok(_) if out.cut => {
            out.text.push_str(CUT);
            out.text.into()
        }
        Ok(_) => out.text.into(),
        Err(payload) => {
            crate::event::discard(payload);
            DISPLAY_PANICKED.into()
        }
    }
}

/// What a user's `Display` (a failure's, a key's) writes; [`DISPLAY_PANICKED`] if it panics.
pub(crate) fn displayed(value: &dyn fmt::Display) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| value.to_string())) {
        Ok(text) => text,
        Err(payload) => {
            // Dropped panic-safely: a payload whose `Drop` panics would otherwise unwind out
            // of the transition before it is made, and the failure that trips would open nothing.
            crate::event::discard(payload);
            DISPLAY_PANICKED.to_owned()
        }
    }
}

/// In [`Rejected::reason`]'s word: the call was written to a replay journal.
const JOURNALED: u64 = 1 << 9;

/// What a rejection reports of its breaker: its name, key, clock (to say when to retry) and
/// last failure. Apart from the breaker's state, so that a rejection keeps only this alive.
pub(super) struct Report {
    /// The name: one word, shared by the breakers of a keyed family.
    pub(super) identity: Identity,
    /// A keyed family's breaker's key, as it displayed when the breaker was made.
    pub(super) key: Option<Box<str>>,
    /// The breaker's clock, which a reload never replaces.
    pub(super) clock: ClockRef,
    /// The message of the failure that last tripped the breaker. std, not loom: no protocol
    /// runs through it.
    pub(super) last_failure: std::sync::Mutex<Option<Arc<str>>>,
    /// A state taken on from a store, held open longer than it reports: the deadline it is
    /// held to, and the one it reports while that deadline stands (see `Report::shown`).
    pub(super) shown: std::sync::Mutex<Option<(u64, u64)>>,
}

impl Report {
    /// What `config`'s breaker named `identity` reports.
    pub(super) fn new(identity: Identity, key: Option<&str>, config: &Config) -> Report {
        Report {
            identity,
            key: key.map(Box::from),
            clock: config.clock.clone(),
            last_failure: std::sync::Mutex::new(None),
            shown: std::sync::Mutex::new(None),
        }
    }

    /// The deadline to report for an opening held to `until`: the one an import said to
    /// report for it, if it is that opening, else `until` itself.
    pub(super) fn shown(&self, until: u64) -> u64 {
        match *self.shown.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((held, shown)) if held == until => shown.min(until),
            _ => until,
        }
    }

    /// Reports `shown` for the opening held to `held`.
    pub(super) fn set_shown(&self, held: u64, shown: u64) {
        *self.shown.lock().unwrap_or_else(|e| e.into_inner()) = Some((held, shown));
    }

    /// The message of the failure that last tripped the breaker.
    pub(super) fn last_failure(&self) -> Option<Arc<str>> {
        self.last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A breaker's [`Report`]: a registry breaker's lives for the process, and a rejection copies
/// the reference; any other's is shared, and a rejection holds a reference count on it (on
/// the report, not on the breaker).
#[derive(Clone)]
pub(super) enum ReportRef {
    Forever(&'static Report),
    Shared(Arc<Report>),
}

impl core::ops::Deref for ReportRef {
    type Target = Report;

    #[inline]
    fn deref(&self) -> &Report {
        match self {
            ReportRef::Forever(r) => r,
            ReportRef::Shared(r) => r,
        }
    }
}

/// A call the breaker refused to run.
///
/// Its message names the breaker (and, for a keyed family's, the key), says why, and when to
/// retry: `circuit breaker 'users' is open; retry in 1.2s (last failure: connection refused)`,
/// `circuit breaker 'api' for key 'down.example' is open; retry in 1.2s`.
/// Functions under `#[circuit_breaker]` without a fallback return it through their own error
/// type, which must implement `From<Rejected>`.
///
/// Building one allocates nothing. It keeps what it reports of its breaker (its name, key,
/// last failure and clock), not the breaker: for a registry breaker, which lives for the
/// process, a reference; for any other, a reference count on that report. Its last failure
/// is read when the error is displayed, so `last_failure` is the newest one at that moment.
/// A rejection is not a handle: while only rejections of a [`Breaker::new`](crate::Breaker::new)
/// breaker are left, its [`WeakBreaker`](crate::WeakBreaker)s no longer upgrade, and the last
/// of them returns the report's memory.
#[derive(Clone)]
pub struct Rejected {
    pub(super) report: ReportRef,
    /// The [`RejectReason`] as a full word. PERF(`closed_ok/bb_call`): a one-byte field here
    /// sits, in `Result<Permit, Rejected>`, over a permit's `u64`, and LLVM moves that word as
    /// a byte and seven, stalling store forwarding on every admitted call.
    pub(super) reason: u64,
    /// Nanoseconds; `NO_RETRY` for none.
    pub(super) retry_after_ns: u64,
}

impl Rejected {
    /// The name of the breaker that refused the call.
    pub fn name(&self) -> &str {
        self.report.identity.name()
    }

    /// For a breaker of a keyed family ([`BreakerMap`](crate::BreakerMap), `#[circuit_breaker(key
    /// = …)]`), the key whose breaker refused the call, as it displays; [`name`](Rejected::name)
    /// is the family's. `None` for other breakers.
    pub fn key(&self) -> Option<&str> {
        self.report.key.as_deref()
    }

    /// Why the call was refused.
    pub fn reason(&self) -> RejectReason {
        RejectReason::from_code(self.reason & 0xff)
    }

    /// How long until an open breaker lets a probe through; `None` where no time is known.
    ///
    /// For a breaker whose timer moves it on (see [`Breaker::state`](crate::Breaker::state)), the rejection read no
    /// clock: this reads the breaker's clock now and gives the time left until the deadline
    /// the breaker had when it refused the call (`None` if that clock panics).
    pub fn retry_after(&self) -> Option<Duration> {
        if self.retry_after_ns == NO_RETRY {
            return None;
        }
        if self.reason & crate::timer::RETRY_AT == 0 {
            return Some(Duration::from_nanos(self.retry_after_ns));
        }
        let now =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.report.clock.coarse()));
        match now {
            Ok(now) => Some(Duration::from_nanos(
                self.report.shown(self.retry_after_ns).saturating_sub(now),
            )),
            Err(payload) => {
                crate::event::discard(payload);
                None
            }
        }
    }

    /// The message of the failure that last tripped the breaker, if it had one.
    pub fn last_failure(&self) -> Option<Arc<str>> {
        self.report.last_failure()
    }

    /// Whether the refused call was written to a replay journal (the `breakerbox-replay`
    /// crate, `#[circuit_breaker(replay = …)]`), to run again once the breaker closes: a
    /// handler can answer "accepted" (HTTP 202) rather than "unavailable".
    pub fn journaled(&self) -> bool {
        self.reason & JOURNALED != 0
    }

    /// This rejection, marked as [`journaled`](Rejected::journaled): for a replay journal
    /// that has just made the call durable (or found an entry of the same key). Its message
    /// says so.
    pub fn mark_journaled(mut self) -> Rejected {
        self.reason |= JOURNALED;
        self
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "circuit breaker '{}' ", self.name())?;
        if let Some(key) = self.key() {
            write!(f, "for key '{key}' ")?;
        }
        match self.reason() {
            RejectReason::Open => f.write_str("is open")?,
            RejectReason::HalfOpenFull => {
                f.write_str("is half-open and all its probe calls are taken")?
            }
            RejectReason::BulkheadFull => f.write_str("is at its limit of concurrent calls")?,
            RejectReason::ForcedOpen => f.write_str("is forced open")?,
        }
        if let Some(after) = self.retry_after() {
            write!(f, "; retry in {}", Secs(after))?;
        }
        if let Some(last) = self.last_failure() {
            write!(f, " (last failure: {last})")?;
        }
        if self.journaled() {
            f.write_str("; journaled for replay")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("name", &self.name())
            .field("key", &self.key())
            .field("reason", &self.reason())
            .field("retry_after", &self.retry_after())
            .field("last_failure", &self.last_failure())
            .field("journaled", &self.journaled())
            .finish()
    }
}

impl std::error::Error for Rejected {}

/// The error of [`Breaker::call`](crate::Breaker::call) and
/// [`Breaker::call_async`](crate::Breaker::call_async): the breaker refused the call, or the call
/// ran and failed.
#[derive(Debug, thiserror::Error)]
pub enum Error<E> {
    /// The breaker did not run the call.
    #[error(transparent)]
    Rejected(#[from] Rejected),
    /// The call ran and returned this error.
    #[error(transparent)]
    Inner(E),
}

impl<E> Error<E> {
    /// The call's own error, if it ran; `None` for a rejection (so not an `into_inner`, which
    /// by std's convention cannot fail).
    pub fn into_call_error(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::Rejected(_) => None,
        }
    }

    /// The rejection, if the call did not run.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            Error::Rejected(r) => Some(r),
            Error::Inner(_) => None,
        }
    }

    /// Converts into a `tower::BoxError` (`Box<dyn Error + Send + Sync>`), for stacks whose
    /// errors are boxed (tower's `timeout`, `buffer`, `load_shed`): a [`Rejected`] becomes one
    /// box, the inner error another.
    pub fn into_box_error(self) -> Box<dyn std::error::Error + Send + Sync>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        match self {
            Error::Rejected(r) => Box::new(r),
            Error::Inner(e) => e.into(),
        }
    }
}
