//! Permits: [`Permit`] and [`OwnedPermit`], each carrying a [`Ticket`].

use core::fmt;

use super::Breaker;
use super::inner::Inner;
use super::ticket::{Kind, Ticket};
use crate::error::Timeout;
use crate::outcome::Outcome;

/// Permission to make one call; record the call's outcome with it.
///
/// From [`Breaker::try_acquire`]. A permit dropped without a verdict records what is right: a
/// [`Failure`](Outcome::Failure) while the thread is panicking (the panic goes on), otherwise
/// [`Ignored`](Outcome::Ignored) — a cancelled future says nothing about the service.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, Outcome};
///
/// let breaker = Breaker::new("cache", Config::default());
/// let permit = breaker.try_acquire()?;
/// // ... make the call ...
/// permit.record(Outcome::Success);
/// assert_eq!(breaker.metrics().successes, 1);
/// # Ok::<(), breakerbox_runtime::Rejected>(())
/// ```
#[must_use = "a permit records a cancelled call when dropped; record the outcome instead"]
pub struct Permit<'a> {
    pub(super) inner: &'a Inner,
    pub(super) ticket: Ticket,
}

impl Permit<'_> {
    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        self.record_with(outcome, None);
    }

    /// Records the call's outcome with the failure's message, which is kept (and shown by
    /// [`Rejected`](crate::Rejected)) if this failure trips the breaker. The message is formatted
    /// only then, under a failure rate also while the window holds fewer than `min_calls` calls (a
    /// success may trip it later; see [`Breaker::last_failure`]), and by a `debug` log if a
    /// subscriber wants it. A `Display` that panics gives the message `<Display panicked>`: its
    /// panic is caught and never reaches the caller, and the outcome is recorded in full.
    #[inline]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        // Recorded here, so the drop that records a cancelled call must not run.
        // PERF(`closed_ok/bb_permit`): the words are read one by one (see `Inner::record`), and the
        // permit is forgotten before recording, so that a panicking listener cannot make it record
        // twice.
        let (inner, tag, started) = (self.inner, self.ticket.tag, self.ticket.started);
        core::mem::forget(self);
        inner.record(Ticket { tag, started }, outcome, cause);
    }

    /// Records a success.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Records a success: inline for a closed breaker with a plain config, by one call for any
    /// other (a rate window's, a probe's). What `#[circuit_breaker]` inlines into each function.
    ///
    /// PERF(`closed_ok/bb_attr`): the call takes the permit's words as scalars, in registers.
    /// Taking the permit by value would keep it in memory across the user's call, read back
    /// as one 16-byte copy of two 8-byte stores: a store-forwarding stall on every call.
    #[inline]
    pub(crate) fn success_lean(self) {
        let (inner, tag, started) = (self.inner, self.ticket.tag, self.ticket.started);
        core::mem::forget(self);
        if inner.plain_success && (Ticket { tag, started }).kind() == Kind::Closed {
            inner.record(Ticket { tag, started }, Outcome::Success, None);
        } else {
            success_out_of_line(inner, tag, started);
        }
    }

    /// Records a failure.
    #[inline]
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Records a failure with its message.
    ///
    /// PERF(`closed_10pct/bb_call`): inline, so that a failure through `Breaker::call` is one
    /// call (to `Inner::record_any`), not two.
    #[inline]
    pub fn failure_with(self, cause: &dyn fmt::Display) {
        self.record_with(Outcome::Failure, Some(cause));
    }

    /// Records a call that says nothing about the service's health.
    #[inline]
    pub fn ignore(self) {
        self.record(Outcome::Ignored);
    }

    /// Records a call that ran past its timeout and was given up on: a failure (it counts
    /// toward tripping like any other, and `timeout`'s text is its message), counted among
    /// [`Metrics::timeouts`](crate::Metrics::timeouts) too. A breaker that times its calls
    /// (`latency`, or a `slow` threshold) records it as taking at least
    /// [`timeout.after()`](Timeout::after). `#[circuit_breaker(timeout = …)]` records its
    /// timeouts so; call it when you time a call out yourself.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, Timeout};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::new("search", Config::builder().failures(1).build()?);
    /// let permit = breaker.try_acquire()?;
    /// // ... the call did not answer within 2 s ...
    /// permit.timed_out(&Timeout::new("search", Duration::from_secs(2)));
    /// let m = breaker.metrics();
    /// assert_eq!((m.failures, m.timeouts), (1, 1));
    /// assert_eq!(
    ///     breaker.last_failure().as_deref(),
    ///     Some("call through circuit breaker 'search' timed out after 2.0s")
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timed_out(self, timeout: &Timeout) {
        let (inner, ticket) = (self.inner, self.ticket);
        core::mem::forget(self);
        inner.record_timeout(ticket, crate::clock::nanos(timeout.after()), timeout);
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind() == Kind::Probe
    }

    /// Records a cancelled call (`Ignored`) whether or not the thread is unwinding: for a
    /// future dropped unfinished whose own poll did not panic (a sibling's panic in the same
    /// task drops it while unwinding, which says nothing about this call). A panic while
    /// recording is caught and logged, as for a panicking call.
    #[cold]
    pub(crate) fn cancel(self) {
        let (inner, ticket) = (self.inner, self.ticket);
        core::mem::forget(self);
        record_caught(inner, ticket, Outcome::Ignored);
    }

    /// Records the failure of a call whose own poll is unwinding, catching a panic while
    /// recording (a second panic escaping a `Drop` during an unwind aborts the process).
    #[cold]
    pub(crate) fn fail_unwinding(self) {
        let (inner, ticket) = (self.inner, self.ticket);
        core::mem::forget(self);
        record_caught(inner, ticket, Outcome::Failure);
    }
}

/// Runs only for a permit dropped without a verdict: recording forgets the permit.
impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            record_caught(self.inner, self.ticket, Outcome::Failure);
        } else {
            self.inner.record(self.ticket, Outcome::Ignored, None);
        }
    }
}

/// [`Permit::success_lean`]'s success of any breaker but a closed one with a plain config.
#[inline(never)]
fn success_out_of_line(inner: &Inner, tag: u64, started: u64) {
    inner.record(Ticket { tag, started }, Outcome::Success, None);
}

/// Records `outcome` for a call whose thread may be unwinding. Recording may run user code —
/// the clock, read to time the call, date a streak or a window bucket, or end a probe round —
/// and a second panic escaping a `Drop` during an unwind aborts the process: it is caught and
/// logged at `error`, and the call's own panic goes on. The outcome is then counted as far as
/// the clock let it be (a probe whose failure could not be dated holds its slot until
/// `probe_timeout`, as a hung one does).
#[cold]
fn record_caught(inner: &Inner, ticket: Ticket, outcome: Outcome) {
    let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        inner.record(ticket, outcome, None)
    }));
    if let Err(payload) = recorded {
        tracing::error!(
            target: "breakerbox",
            name = %inner.name(),
            key = inner.key(),
            panic = crate::event::panic_message(&*payload),
            "recording an outcome ({outcome:?}) of circuit breaker '{}' panicked (caught)",
            inner.name()
        );
        crate::event::discard(payload);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("breaker", &self.inner.name())
            .field("probe", &self.is_probe())
            .finish()
    }
}

/// A [`Permit`] that owns a handle to its breaker, from [`Breaker::try_acquire_owned`].
///
/// Records like a [`Permit`], including on drop: `Ignored` for a cancelled call, `Failure`
/// while panicking.
#[must_use = "a permit records a cancelled call when dropped; record the outcome instead"]
pub struct OwnedPermit {
    pub(super) breaker: Breaker,
    pub(super) ticket: Ticket,
}

impl OwnedPermit {
    /// The breaker handle and the ticket, without this permit's drop: the caller records
    /// through a borrowed [`Permit`] made of them, then drops the handle.
    ///
    /// PERF(`closed_ok/bb_tower`): the permit holds no "recorded" flag beside its ticket. A
    /// byte written into a permit that is then moved whole, as a tower response future moves
    /// it, makes the next wide load of it wait for a store-forwarding stall, on every call.
    #[inline]
    fn into_parts(self) -> (Breaker, Ticket) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, and its handle is read out once: the handle moves to
        // the caller, which drops it.
        let breaker = unsafe { core::ptr::read(&this.breaker) };
        (breaker, this.ticket)
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        let (breaker, ticket) = self.into_parts();
        borrowed(&breaker, ticket).record(outcome);
    }

    /// Records the call's outcome with the failure's message; see [`Permit::record_with`].
    #[inline]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        let (breaker, ticket) = self.into_parts();
        borrowed(&breaker, ticket).record_with(outcome, cause);
    }

    /// Records a success.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Records a failure.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Records a failure with its message.
    pub fn failure_with(self, cause: &dyn fmt::Display) {
        self.record_with(Outcome::Failure, Some(cause));
    }

    /// Records a call that says nothing about the service's health.
    pub fn ignore(self) {
        self.record(Outcome::Ignored);
    }

    /// Records a call that ran past its timeout; see [`Permit::timed_out`].
    pub fn timed_out(self, timeout: &Timeout) {
        let (breaker, ticket) = self.into_parts();
        borrowed(&breaker, ticket).timed_out(timeout);
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind() == Kind::Probe
    }

    /// The breaker this permit is from.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

/// The borrowed permit an owned one stands for.
#[inline]
fn borrowed(breaker: &Breaker, ticket: Ticket) -> Permit<'_> {
    Permit {
        inner: breaker.inner(),
        ticket,
    }
}

impl Drop for OwnedPermit {
    /// Records as a dropped [`Permit`] does: `Ignored` for a cancelled call, `Failure` while
    /// panicking.
    #[inline]
    fn drop(&mut self) {
        drop(borrowed(&self.breaker, self.ticket));
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("breaker", &self.breaker.inner().name())
            .field("probe", &self.is_probe())
            .finish()
    }
}
