//! Health probes: while a breaker is open, the user's probe function is called every
//! `probe_every`; the first success moves the breaker to half-open before its open time ends.
//!
//! What a config holds: the [`Probe`], and the counts [`HealthProbes`]. Running them while a
//! breaker is open is the breaker's (`breaker/probing.rs`, where the protocol is written
//! down).

use core::any::TypeId;
use core::fmt;
#[cfg(feature = "tokio")]
use core::future::Future;
#[cfg(feature = "tokio")]
use core::pin::Pin;
use core::time::Duration;
use std::sync::Arc;

/// The default time between two health probes.
pub(crate) const DEFAULT_EVERY: Duration = Duration::from_secs(5);

/// A health check of the service behind a breaker, run while the breaker is open.
///
/// Made from a function that takes no arguments (see [`IntoProbe`]) by
/// [`ConfigBuilder::probe`](crate::ConfigBuilder::probe), or with `probe = path` in the
/// attribute. Two probes are equal when they are the same function (a function item or a
/// closure that captures nothing), or clones of one probe: so configs built twice from the
/// same attribute compare equal.
#[derive(Clone)]
pub struct Probe {
    pub(crate) run: Run,
    id: ProbeId,
    name: &'static str,
}

#[derive(Clone)]
pub(crate) enum Run {
    Blocking(Arc<dyn Fn() -> bool + Send + Sync>),
    #[cfg(feature = "tokio")]
    Async(Arc<dyn Fn() -> BoxFuture + Send + Sync>),
}

#[cfg(feature = "tokio")]
pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// What makes two probes equal: the function's type, when all its values are the same (a
/// zero-sized function item or capture-less closure); else the shared allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum ProbeId {
    Type(TypeId),
    Ptr(usize),
}

impl Probe {
    fn identify<F: 'static>(run: Run, name: &'static str) -> Probe {
        let id = if core::mem::size_of::<F>() == 0 {
            ProbeId::Type(TypeId::of::<F>())
        } else {
            let ptr = match &run {
                Run::Blocking(f) => Arc::as_ptr(f) as *const () as usize,
                #[cfg(feature = "tokio")]
                Run::Async(f) => Arc::as_ptr(f) as *const () as usize,
            };
            ProbeId::Ptr(ptr)
        };
        Probe { run, id, name }
    }

    /// A blocking probe: `f` runs on a thread of its own (`breakerbox-probe`) and says whether
    /// the service is healthy.
    pub fn blocking<F, R>(f: F) -> Probe
    where
        F: Fn() -> R + Send + Sync + 'static,
        R: ProbeOutcome,
    {
        let name = core::any::type_name::<F>();
        Probe::identify::<F>(Run::Blocking(Arc::new(move || f().healthy())), name)
    }

    /// An async probe: the future `f` returns runs as a task on the tokio runtime that was
    /// current when the breaker opened.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn future<F, Fut>(f: F) -> Probe
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: ProbeOutcome,
    {
        let name = core::any::type_name::<F>();
        let run = Run::Async(Arc::new(move || {
            let fut = f();
            Box::pin(async move { fut.await.healthy() }) as BoxFuture
        }));
        Probe::identify::<F>(run, name)
    }

    /// Whether it is async (runs on tokio) rather than blocking (runs on a thread).
    pub fn is_async(&self) -> bool {
        !matches!(self.run, Run::Blocking(_))
    }

    /// The function's type name, for logs and conflict reports (`my_app::health`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn hash_into(&self, h: &mut impl std::hash::Hasher) {
        std::hash::Hash::hash(&self.id, h);
    }
}

impl PartialEq for Probe {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl fmt::Debug for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_async() { "async" } else { "blocking" };
        write!(f, "Probe({kind} {})", self.name)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for bool {}
    impl<T, E> Sealed for Result<T, E> {}
}

/// What a probe function returns: `bool` (`true` is healthy) or any `Result` (`Ok` is
/// healthy; the value and the error are dropped).
#[diagnostic::on_unimplemented(
    message = "a health probe must return `bool` or a `Result`, not `{Self}`",
    label = "returns `{Self}`",
    note = "`true` or `Ok(_)` means the service is healthy",
    note = "an `async fn` probe (one returning a future) needs breakerbox's `tokio` feature"
)]
pub trait ProbeOutcome: sealed::Sealed + Send + 'static {
    /// Whether it says the service is healthy.
    fn healthy(self) -> bool;
}

impl ProbeOutcome for bool {
    fn healthy(self) -> bool {
        self
    }
}

impl<T: Send + 'static, E: Send + 'static> ProbeOutcome for Result<T, E> {
    fn healthy(self) -> bool {
        self.is_ok()
    }
}

/// What [`ConfigBuilder::probe`](crate::ConfigBuilder::probe) (and `probe = path` in the
/// attribute) accepts: a function of no arguments returning `bool` or a `Result` (a blocking
/// probe), an `async fn` or closure returning a future of one (an async probe; feature
/// `tokio`), or a [`Probe`]. `Marker` tells the kinds apart; it is inferred.
///
/// ```
/// use breakerbox_runtime::Config;
///
/// fn ping() -> Result<(), std::io::Error> {
///     Ok(())
/// }
/// let config = Config::builder().probe(ping).build()?;
/// assert!(config.probe().is_some_and(|p| !p.is_async()));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a health probe",
    label = "not a health probe",
    note = "a health probe takes no arguments and returns `bool` or a `Result` (`true` or `Ok` is healthy), or is an `async fn` returning one (async probes need breakerbox's `tokio` feature)",
    note = "to probe with an instance, call a function that reaches it (a static or a clone captured in a closure given to `ConfigBuilder::probe`)"
)]
pub trait IntoProbe<Marker> {
    /// The probe.
    fn into_probe(self) -> Probe;
}

/// [`IntoProbe`]'s marker for blocking functions.
#[doc(hidden)]
pub enum BlockingProbe {}
/// [`IntoProbe`]'s marker for async functions.
#[cfg(feature = "tokio")]
#[doc(hidden)]
pub enum AsyncProbe {}

impl IntoProbe<Probe> for Probe {
    fn into_probe(self) -> Probe {
        self
    }
}

impl<F, R> IntoProbe<(BlockingProbe, R)> for F
where
    F: Fn() -> R + Send + Sync + 'static,
    R: ProbeOutcome,
{
    fn into_probe(self) -> Probe {
        Probe::blocking(self)
    }
}

#[cfg(feature = "tokio")]
impl<F, Fut> IntoProbe<(AsyncProbe, Fut)> for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ProbeOutcome,
{
    fn into_probe(self) -> Probe {
        Probe::future(self)
    }
}

/// A breaker's health probes so far, for every opening: see [`Breaker::health_probes`].
///
/// [`Breaker::health_probes`]: crate::Breaker::health_probes
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HealthProbes {
    /// Probes started.
    pub started: u64,
    /// Probes that said the service is healthy while their opening lasted.
    pub passed: u64,
    /// Probes that failed: returned `false` or `Err`, panicked, outlived `probe_every`, or
    /// could not start. Includes `panicked` and `timed_out`.
    pub failed: u64,
    /// Failed probes that panicked.
    pub panicked: u64,
    /// Failed probes that outlived `probe_every` (an async one was dropped then).
    pub timed_out: u64,
    /// Probes whose opening ended before they did (the breaker moved on without them), or
    /// whose success could not move it (a probe budget of none,
    /// [`set_probe_budget(Some(0))`](crate::Breaker::set_probe_budget), holds it open):
    /// their result is ignored.
    pub abandoned: u64,
    /// Probe functions running now (a blocking one that outlived its time runs until it
    /// returns).
    pub running: u64,
}
