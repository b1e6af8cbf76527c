//! [`Breaker`], the handle, and [`WeakBreaker`]: how a breaker is made (on its own, keyed, or
//! for the registry) and how long it lives.
//!
//! A breaker is two `std::sync::Arc`s deep. The handle is an `Arc<Handle>`, whose count is
//! the handles' alone: a [`WeakBreaker`] is a `Weak<Handle>`, and upgrades while any handle
//! (or [`OwnedPermit`](crate::OwnedPermit)) is left. The handle holds the breaker's state, an
//! `Arc<Inner>`, which also the tower layer's [`Lease`](super::Lease) holds: a lease keeps
//! the breaker alive to record into it without being a handle. A [`Rejected`](crate::Rejected)
//! holds neither: it keeps only what it reports (`Report`).
//!
//! A registry breaker lives for the process: the registry keeps a handle to it for ever, and
//! its `Inner` and `Report` are reachable as `&'static` references, so that its rejections and
//! leases count no references at all.

use core::fmt;
use std::sync::{Arc, Weak};

use super::inner::{self, Handle, Inner};
use super::rejected::{Report, ReportRef};
use crate::config::Config;
use crate::identity::Identity;

/// A circuit breaker. Cheap to clone: clones are handles to one breaker.
///
/// Most users meet breakers through `#[circuit_breaker]` and the [`registry`](crate::registry);
/// this is the API underneath, for code that wants to drive one by hand.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, Error, ManualClock, State};
///
/// let clock = ManualClock::new(); // time stands still unless the test moves it
/// let breaker = Breaker::new("payments", Config::builder().failures(2).clock(clock).build()?);
/// for _ in 0..2 {
///     let r: Result<(), _> = breaker.call(|| Err("connection refused"));
///     assert!(matches!(r, Err(Error::Inner(_))));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// let r: Result<(), Error<&str>> = breaker.call(|| Ok(()));
/// let rejected = r.unwrap_err();
/// assert!(rejected.to_string().starts_with("circuit breaker 'payments' is open; retry in 60.0s"));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Breaker(Arc<Handle>);

/// A registry breaker no handle points to yet: see [`Breaker::unpublished`].
pub(crate) struct Unpublished(Inner);

impl Unpublished {
    /// Makes it live for the process and hands out the first handle: the registry's handle
    /// is kept for ever (leaked), and the breaker knows itself as `&'static` from then on.
    pub(crate) fn publish(self) -> Breaker {
        let handle = Breaker::handle(self.0, |inner| {
            let kept: &'static Arc<Inner> = Box::leak(Box::new(Arc::clone(inner)));
            Some(&**kept)
        });
        // Kept for ever: its weak handles always upgrade.
        core::mem::forget(handle.clone());
        handle
    }
}

impl Breaker {
    /// A breaker of its own, outside the registry.
    ///
    /// Its name and last-failure message are its own and are freed with it: dropping the last
    /// handle (and the last [`Rejected`] from it) returns all its memory, whatever its name.
    ///
    /// [`Rejected`]: crate::Rejected
    pub fn new(name: impl Into<String>, config: Config) -> Breaker {
        Breaker::named(Identity::new(name.into()), config)
    }

    /// A `Breaker::new` breaker that shares its name's allocation with others (a keyed family's).
    pub(crate) fn named(identity: Identity, config: Config) -> Breaker {
        let report = Report::new(identity, None, &config);
        Breaker::handle(Inner::new(report, config), |_| None)
    }

    /// A keyed family's breaker (`identity` names the family and the key). One of a registry
    /// family tells the registry-wide listeners its changes, as a registry breaker does.
    /// Its key's text (`key`, cut at [`MAX_KEY`](inner::MAX_KEY) bytes) is kept with what its
    /// rejections report.
    pub(crate) fn keyed(
        identity: Identity,
        config: Config,
        tells_registry: bool,
        key: &str,
    ) -> Breaker {
        let mut end = key.len().min(inner::MAX_KEY);
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        let report = Report::new(identity, Some(&key[..end]), &config);
        let mut value = Inner::new(report, config);
        value.tells_registry = tells_registry;
        Breaker::handle(value, |_| None)
    }

    /// A registry breaker, not yet published: the registry builds it outside its locks, then
    /// publishes it, or drops it if another thread's breaker of that name got in first.
    pub(crate) fn unpublished(name: String, config: Config) -> Unpublished {
        let report = Report::new(Identity::new(name), None, &config);
        let mut inner = Inner::new(report, config);
        inner.tells_registry = true;
        Unpublished(inner)
    }

    /// The first handle to `inner`; `forever` says whether it lives for the process.
    fn handle(
        inner: Inner,
        forever: impl FnOnce(&Arc<Inner>) -> Option<&'static Inner>,
    ) -> Breaker {
        Breaker(Arc::new_cyclic(|me| {
            let mut inner = inner;
            inner.handle = me.clone();
            let inner = Arc::new(inner);
            Handle {
                forever: forever(&inner),
                inner,
            }
        }))
    }

    /// The breaker's state as `'static`, for a registry breaker (which lives for the process).
    #[inline(always)]
    pub(super) fn forever(&self) -> Option<&'static Inner> {
        self.0.forever
    }

    #[inline(always)]
    pub(super) fn inner(&self) -> &Inner {
        &self.0.inner
    }

    /// The breaker's state itself, shared: what a lease of a `Breaker::new` breaker holds.
    pub(super) fn shared(&self) -> &Arc<Inner> {
        &self.0.inner
    }

    /// Handles to this breaker now (owned permits included).
    pub(super) fn handle_count(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// What a rejection by this breaker reports: a reference for a registry breaker, a
    /// reference count on its report for any other.
    #[inline(always)]
    pub(super) fn report(&self) -> ReportRef {
        match self.0.forever {
            Some(inner) => ReportRef::Forever(&inner.report),
            None => ReportRef::Shared(Arc::clone(&self.0.inner.report)),
        }
    }

    /// A [`WeakBreaker`]: a handle that does not keep the breaker alive.
    pub fn downgrade(&self) -> WeakBreaker {
        WeakBreaker(Arc::downgrade(&self.0))
    }
}

impl Inner {
    /// A weak handle made from the breaker itself, while a handle keeps it alive: what an
    /// armed timer holds.
    pub(super) fn weak_handle(&self) -> WeakBreaker {
        WeakBreaker(self.handle.clone())
    }
}

/// A handle that does not keep its breaker alive, from [`Breaker::downgrade`]: what a listener
/// that acts on its own breaker should hold, since a [`Breaker`] captured by the breaker's own
/// listener keeps it alive for ever.
///
/// [`upgrade`](WeakBreaker::upgrade) gives a [`Breaker`] while any handle to it (or an
/// [`OwnedPermit`](crate::OwnedPermit)) remains. A registry breaker lives for the process, so its
/// weak handles always upgrade.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, State};
///
/// let breaker = Breaker::new("search", Config::builder().failures(1).build()?);
/// let weak = breaker.downgrade();
/// // Close again at once whenever it opens: the listener acts on its own breaker.
/// breaker.on_state_change(move |e| {
///     if let (State::Open, Some(b)) = (e.to, weak.upgrade()) {
///         b.reset();
///     }
/// });
/// breaker.call(|| Err::<(), _>("timeout")).unwrap_err();
/// assert_eq!(breaker.state(), State::Closed);
/// let weak = breaker.downgrade();
/// drop(breaker); // the last handle: the breaker and its listener are freed
/// assert!(weak.upgrade().is_none());
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct WeakBreaker(Weak<Handle>);

impl WeakBreaker {
    /// A [`Breaker`] handle, if the breaker is still alive: `None` once its last handle (and
    /// last [`OwnedPermit`](crate::OwnedPermit)) was dropped.
    pub fn upgrade(&self) -> Option<Breaker> {
        self.0.upgrade().map(Breaker)
    }
}

impl fmt::Debug for WeakBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(WeakBreaker)")
    }
}
