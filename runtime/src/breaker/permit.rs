//! Permits: [`Permit`], what it carries ([`Ticket`]: its generation, kind and start time),
//! [`Guarded`] (an awaited call's permit), and [`Lease`] (the tower layer's). The owned permit,
//! which is also a handle, is with the handles in `handle.rs`.
//!
//! A [`Lease`] is an owned permit that holds its breaker's state rather than a handle, for
//! the tower layer's response future. An [`OwnedPermit`](crate::OwnedPermit) holds a handle. A
//! lease holds what it records into: for a registry breaker, which lives for the process, a
//! `'static` reference (no reference count, on every request); for any other, the breaker's
//! `Arc<Inner>`, which keeps the breaker alive until the lease ends without being a handle
//! (its weak handles no longer upgrade once only leases are left).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll};
use std::sync::Arc;

use super::inner::Inner;
use crate::error::Timeout;
use crate::outcome::Outcome;
use crate::state::{State, Word, generation_of, stamp};

/// Permission to make one call; record the call's outcome with it.
///
/// From [`Breaker::try_acquire`](crate::Breaker::try_acquire). A permit dropped without a verdict records what is right: a
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
    /// success may trip it later; see [`Breaker::last_failure`](crate::Breaker::last_failure)), and by a `debug` log if a
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

    /// Records a success by one call, whatever the breaker: what `#[circuit_breaker]` puts
    /// into each function, so that its code stays small (see docs/ARCHITECTURE.md, "The
    /// attribute is a thin shim").
    ///
    /// PERF(`closed_ok/bb_attr`): the call takes the permit's words as scalars, in registers.
    /// Taking the permit by value would keep it in memory across the user's call, read back
    /// as one 16-byte copy of two 8-byte stores: a store-forwarding stall on every call.
    #[inline(always)]
    pub(crate) fn success_lean(self) {
        let (inner, tag, started) = (self.inner, self.ticket.tag, self.ticket.started);
        core::mem::forget(self);
        success_out_of_line(inner, tag, started);
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

/// [`Permit::success_lean`]'s success, out of line.
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

/// What a permit was admitted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Closed = 0,
    Probe = 1,
    Disabled = 2,
}

/// What a permit carries: its generation and kind in one word (laid out in `state.rs`), and
/// its start time.
/// PERF(`closed_ok/bb_call`): two plain words, so that `Result<Permit, _>` moves through
/// registers. A `u32` and two one-byte fields make the compiler repack the permit through the
/// stack with mixed-width loads and stores, and the store-forwarding stall costs more than the
/// rest of a closed call.
#[derive(Clone, Copy)]
pub(super) struct Ticket {
    pub(super) tag: u64,
    /// When the call started, if a `slow` threshold needs it measured.
    pub(super) started: u64,
}

impl Ticket {
    #[inline(always)]
    pub(super) fn new(generation: u32, kind: Kind, started: u64) -> Ticket {
        Ticket {
            tag: stamp(generation, kind as u64),
            started,
        }
    }

    /// A closed permit's ticket, from the closed state word it was admitted by: the state
    /// word is the ticket, since a closed state's tag is 0, as is a closed kind's, and an
    /// untimed call's start is 0. So the plain closed admission builds its permit from the word
    /// it loaded, with no arithmetic (PERF(`closed_ok/bb_call`)).
    #[inline(always)]
    pub(super) fn closed(word: Word) -> Ticket {
        const { assert!(State::Closed as u64 == Kind::Closed as u64) };
        Ticket {
            tag: word.bits(),
            started: 0,
        }
    }

    #[inline(always)]
    pub(super) fn generation(self) -> u32 {
        generation_of(self.tag)
    }

    #[inline(always)]
    pub(super) fn kind(self) -> Kind {
        match self.tag & 0xff {
            0 => Kind::Closed,
            1 => Kind::Probe,
            _ => Kind::Disabled,
        }
    }
}

pin_project_lite::pin_project! {
    /// `future`, run with `permit` held. Its output comes with the permit, for the caller to
    /// record the outcome. Until then:
    /// - a panic out of `future`'s own `poll` records a failure, even when a catcher around
    ///   this future (`catch_unwind`, tower-http's `CatchPanicLayer`) stops the unwind before
    ///   it is dropped;
    /// - dropped unfinished records a cancelled call (`Ignored`), also while the thread
    ///   unwinds from another panic: a sibling's panic in the same task (`join!`, `select!`)
    ///   drops this future on the way out, and says nothing about the service.
    ///
    /// Without it, a permit held across an `.await` recorded `Failure` whenever it was
    /// dropped during an unwind, another future's included: one panic in a task counted as a
    /// failure of every call the task had in flight.
    #[doc(hidden)]
    pub struct Guarded<'a, F> {
        #[pin]
        future: F,
        permit: Option<Permit<'a>>,
    }

    impl<'a, F> PinnedDrop for Guarded<'a, F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(permit) = this.project().permit.take() {
                permit.cancel();
            }
        }
    }
}

impl<'a, F> Guarded<'a, F> {
    /// `future`, to be awaited with `permit` held.
    #[inline]
    pub fn new(permit: Permit<'a>, future: F) -> Self {
        Guarded {
            future,
            permit: Some(permit),
        }
    }
}

impl<'a, F: Future> Future for Guarded<'a, F> {
    type Output = (F::Output, Permit<'a>);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut guard = Armed {
            permit: this.permit,
            armed: true,
        };
        let poll = this.future.poll(cx);
        guard.armed = false;
        match poll {
            Poll::Ready(output) => Poll::Ready((
                output,
                guard
                    .permit
                    .take()
                    .expect("`Guarded` polled after it completed"),
            )),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Records the failure of the call if dropped while armed, which only happens when the inner
/// future's `poll` unwinds: disarmed as soon as it returns, so a future polled from a `Drop`
/// while another panic unwinds is not blamed for it.
pub(super) struct Armed<'p, 'a> {
    pub(super) permit: &'p mut Option<Permit<'a>>,
    pub(super) armed: bool,
}

impl Drop for Armed<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        if self.armed
            && let Some(permit) = self.permit.take()
        {
            permit.fail_unwinding();
        }
    }
}

/// Permission to make one call, owning no handle to its breaker (see this file's doc). Records
/// like an [`OwnedPermit`](crate::OwnedPermit), including on drop (`Ignored` for a cancelled
/// call, `Failure` while panicking).
#[must_use = "a lease records a cancelled call when dropped; record the outcome instead"]
pub struct Lease {
    inner: Held,
    ticket: Ticket,
}

/// The breaker a lease records into, in one word: a registry breaker's `&'static Inner`
/// (which lives for the process), or one strong count of any other's `Arc<Inner>`, its
/// address marked by its low bit ([`SHARED`]).
///
/// PERF(`closed_ok/bb_tower_static`): one word, written and read as one word. An enum of the
/// two is a tag word and a pointer, which the response future's construction stores as two
/// 8-byte words and its `poll` loads back as one 16-byte copy: a store-forwarding stall on
/// every request (22.7 ns a request against 12.6 ns in one word; a bare `service_fn`, 4.9 ns).
struct Held(NonNull<Inner>);

/// The low bit of a [`Held`] that owns a strong count of an `Arc<Inner>`. `Inner` is aligned
/// to more than one byte, so the bit is free in both kinds of pointer.
const SHARED: usize = 1;

const _: () = assert!(core::mem::align_of::<Inner>() > SHARED);

// SAFETY: a `Held` stands for a `&'static Inner` or an `Arc<Inner>`, which may be sent to and
// shared with other threads as `Inner` is `Send + Sync` (asserted below).
unsafe impl Send for Held {}
// SAFETY: as for `Send`.
unsafe impl Sync for Held {}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<&'static Inner>();
    send_sync::<Arc<Inner>>();
};

impl Held {
    #[inline(always)]
    fn forever(inner: &'static Inner) -> Held {
        Held(NonNull::from(inner))
    }

    #[inline(always)]
    fn shared(inner: Arc<Inner>) -> Held {
        let raw = Arc::into_raw(inner).cast_mut();
        let raw = NonNull::new(raw).expect("an `Arc`'s pointer is never null");
        Held(raw.map_addr(|addr| addr | SHARED))
    }

    /// The pointer without its mark: to the `Inner` itself.
    #[inline(always)]
    fn pointer(&self) -> *const Inner {
        self.0.as_ptr().map_addr(|addr| addr & !SHARED)
    }

    #[inline(always)]
    fn get(&self) -> &Inner {
        // SAFETY: unmarked, the pointer is a `&'static Inner`'s, or an `Arc<Inner>`'s whose
        // strong count this `Held` owns until it is dropped: the `Inner` outlives the borrow.
        unsafe { &*self.pointer() }
    }
}

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        if self.0.addr().get() & SHARED != 0 {
            // SAFETY: a marked pointer came from `Arc::into_raw` in `Held::shared`, and gives
            // back the one strong count it owns here, once: a `Held` is dropped once.
            drop(unsafe { Arc::from_raw(self.pointer()) });
        }
    }
}

impl Lease {
    /// A lease of a registry breaker, which lives for the process.
    #[inline(always)]
    pub(super) fn forever(inner: &'static Inner, ticket: Ticket) -> Lease {
        Lease {
            inner: Held::forever(inner),
            ticket,
        }
    }

    /// A lease of any other breaker, which it keeps alive.
    #[inline(always)]
    pub(super) fn shared(inner: Arc<Inner>, ticket: Ticket) -> Lease {
        Lease {
            inner: Held::shared(inner),
            ticket,
        }
    }

    /// The breaker this lease holds and its ticket, the lease itself ended without its drop
    /// (which would record a cancelled call).
    #[inline(always)]
    fn take(self) -> (Held, Ticket) {
        let lease = core::mem::ManuallyDrop::new(self);
        // SAFETY: `lease` is never dropped nor used again, so its `Held` is moved out once.
        let held = unsafe { core::ptr::read(&lease.inner) };
        (held, lease.ticket)
    }

    /// Records the call's outcome with the failure's message; see
    /// [`Permit::record_with`](crate::Permit::record_with).
    ///
    /// PERF(`closed_ok/bb_tower_static`): inlined into the response future's `poll`. Called
    /// out of line, it read the lease back from the future's memory, where the future's moves
    /// had just stored it in other widths: a store-forwarding stall, +5 ns a request.
    #[inline(always)]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        let (held, ticket) = self.take();
        held.permit(ticket).record_with(outcome, cause);
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        self.record_with(outcome, None);
    }

    /// Records a cancelled call (`Ignored`) whether or not the thread is unwinding, a panic
    /// while recording caught and logged: the response future dropped unfinished.
    #[cold]
    pub fn cancel(self) {
        let (held, ticket) = self.take();
        held.permit(ticket).cancel();
    }
}

impl Held {
    /// The permit of the lease, borrowed from the breaker it keeps alive.
    #[inline(always)]
    fn permit(&self, ticket: Ticket) -> Permit<'_> {
        Permit {
            inner: self.get(),
            ticket,
        }
    }
}

impl Drop for Lease {
    /// Records as a dropped [`Permit`] does: `Ignored` for a cancelled call, `Failure` while
    /// panicking. The breaker is let go of after.
    fn drop(&mut self) {
        drop(self.inner.permit(self.ticket));
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("breaker", &self.inner.get().name())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;

    use super::Lease;
    use crate::breaker::Breaker;
    use crate::config::Config;
    use crate::outcome::Outcome;

    /// A lease is one word and its ticket, and the response future's `Option<Lease>` no more.
    #[test]
    fn a_lease_is_a_pointer_and_a_ticket() {
        assert_eq!(size_of::<Lease>(), 24);
        assert_eq!(size_of::<Option<Lease>>(), 24);
    }

    /// A `Breaker::new` breaker's lease keeps its state alive, records into it, and frees it
    /// when it ends; the breaker's weak handles stop upgrading once only leases are left.
    #[test]
    fn a_lease_keeps_its_breaker_alive_until_it_ends() {
        let b = Breaker::new("leased", Config::default());
        let state = Arc::downgrade(b.shared());
        let weak = b.downgrade();
        let (first, second) = (b.try_lease().unwrap(), b.try_lease().unwrap());
        assert_eq!(state.strong_count(), 3, "each lease holds the state");
        assert_eq!(format!("{first:?}"), r#"Lease { breaker: "leased" }"#);
        let observer = b.clone();
        drop(b);
        first.record(Outcome::Success);
        assert_eq!(observer.metrics().successes, 1);
        drop(observer);
        assert!(weak.upgrade().is_none(), "a lease is not a handle");
        assert_eq!(state.strong_count(), 1, "the last lease holds it");
        drop(second);
        assert_eq!(state.strong_count(), 0, "freed with the last lease");
    }

    /// A lease dropped without a verdict records a cancelled call, or a failure while its
    /// thread panics; either way a registry breaker's lease counts no reference.
    #[test]
    fn a_dropped_lease_records_a_cancelled_call_or_a_panic() {
        let b = Breaker::unpublished("leased.forever".into(), Config::default()).publish();
        let count = Arc::strong_count(b.shared());
        drop(b.try_lease().unwrap());
        assert_eq!(Arc::strong_count(b.shared()), count);
        let lease = b.try_lease().unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _lease = lease;
            panic!("the call panicked");
        }));
        assert!(panicked.is_err());
        let m = b.metrics();
        assert_eq!((m.ignored, m.failures), (1, 1));
        let shared = Breaker::new("leased.shared", Config::default());
        let lease = shared.try_lease().unwrap();
        lease.cancel();
        assert_eq!(shared.metrics().ignored, 1);
        assert_eq!(Arc::strong_count(shared.shared()), 1);
    }
}
