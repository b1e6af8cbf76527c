//! A [tower](https://docs.rs/tower) [`Layer`] and [`Service`] that put a breaker in front of any
//! service: a hyper or reqwest client, a tonic channel, or an axum router's handlers.
//!
//! Use it through the `breakerbox` crate, as `breakerbox::tower` (feature `tower`).
//!
//! ```
//! use breakerbox_tower::CircuitBreakerLayer;
//! use breakerbox_runtime::{Config, Error};
//! use tower::{Layer, Service};
//!
//! # async fn demo() -> Result<(), breakerbox_runtime::ConfigError> {
//! // The layer resolves the registry breaker "inventory" once; every service it wraps, and
//! // every clone of those, shares it.
//! let layer = CircuitBreakerLayer::new("inventory", Config::builder().failures(3).build()?);
//! let mut client = layer.layer(tower::service_fn(|id: u32| async move {
//!     if id == 0 { Err("no such item") } else { Ok(id * 10) }
//! }));
//! match client.call(4).await {
//!     Ok(price) => assert_eq!(price, 40),
//!     Err(Error::Rejected(rejected)) => eprintln!("{rejected}"), // the breaker is open
//!     Err(Error::Inner(e)) => eprintln!("the call failed: {e}"),
//! }
//! # Ok(()) }
//! ```
//!
//! # Errors
//!
//! The wrapped service's error type is [`Error<E>`](breakerbox_runtime::Error): [`Error::Rejected`] when the
//! breaker refused the call (the inner service was not called), [`Error::Inner`] with the inner
//! service's own error otherwise. Under axum, whose routers need infallible services, turn the
//! rejection into a response with `axum::error_handling::HandleErrorLayer` (see the
//! `tower_layer` example). To get a `tower::BoxError`, use [`Error::into_box_error`].
//!
//! # Readiness
//!
//! `poll_ready` is the inner service's, unchanged: an open breaker does not make the service
//! look busy (it would never wake up) nor broken (tower drops services whose `poll_ready` fails).
//! The breaker decides in `call`; a refused call returns a future that is ready at once with
//! [`Error::Rejected`], without calling the inner service.
//!
//! # Cost
//!
//! Per request: the breaker's admission (one atomic load while closed), a reference count
//! that keeps a [`Breaker::new`] breaker alive while the request runs (nothing for a registry
//! breaker, which lives for the process), and a clone of the classifier. No lock, no
//! allocation.
//!
//! # Timeouts
//!
//! A response future dropped before it finishes records the call as [`Outcome::Ignored`]: a
//! cancelled request says nothing about the service. So put a timeout inside the breaker, where
//! its error is the inner service's and counts as a failure:
//! `ServiceBuilder::new().layer(breaker_layer).timeout(d)`. A timeout outside it
//! (`.timeout(d).layer(breaker_layer)`) cancels a hung call, which then counts as neither, and
//! a breaker over a service that only hangs never trips. In half-open, cancelled probes free
//! their slots until `probe_timeout` after the round's first probe; the first cancelled after
//! that re-opens the breaker.
//!
//! # Panics
//!
//! A panic in the inner service's future or in the classifier records a
//! [`Outcome::Failure`] and goes on. That holds with a panic catcher above the layer (tower-http's
//! `CatchPanicLayer`, `FutureExt::catch_unwind`) too, which stops the unwind before the response
//! future is dropped: a panicking half-open probe re-opens the breaker.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, ready};

use ::tower::{Layer, Service};

use core::hash::Hash;

use breakerbox_runtime::__integrations::{self, Lease};
use breakerbox_runtime::{Breaker, BreakerMap, Config, Error, Outcome, Rejected, registry};

/// Decides what a finished call means for the breaker, as `classify = …` does for the
/// attribute.
///
/// Implemented by [`DefaultClassifier`] and by every `Fn(&Result<T, E>) -> Outcome + Clone`:
///
/// ```
/// use breakerbox_runtime::Outcome;
/// use breakerbox_tower::CircuitBreakerLayer;
///
/// // An HTTP client whose `Ok` responses may still be server errors.
/// struct Response { status: u16 }
/// let layer = CircuitBreakerLayer::from_breaker(breakerbox_runtime::Breaker::new("api", Default::default()))
///     .classify(|r: &Result<Response, std::io::Error>| match r {
///         Ok(resp) if resp.status >= 500 => Outcome::Failure,
///         Ok(resp) if resp.status == 404 => Outcome::Ignored,
///         Ok(_) => Outcome::Success,
///         Err(_) => Outcome::Failure,
///     });
/// # let _ = layer;
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot classify a `Result<{T}, {E}>`",
    note = "a classifier is a `Fn(&Result<Response, Error>) -> breakerbox::Outcome + Clone`; annotate the closure's argument type"
)]
pub trait Classify<T, E> {
    /// The verdict on `result`.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// The default classifier: `Ok` is a success, `Err` a failure ([`Outcome::of_result`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultClassifier;

impl<T, E> Classify<T, E> for DefaultClassifier {
    #[inline]
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        Outcome::of_result(result)
    }
}

/// A [`Layer`] that wraps services in a [`CircuitBreaker`]. Every service it makes shares its
/// one breaker.
#[derive(Clone, Debug)]
pub struct CircuitBreakerLayer<C = DefaultClassifier> {
    breaker: Breaker,
    classify: C,
}

impl CircuitBreakerLayer {
    /// A layer over the [`registry`] breaker `name`, created with `config` unless it exists
    /// (or was [`configure`](breakerbox_runtime::Registry::configure)d): the same breaker that
    /// `#[circuit_breaker(name = "…")]` functions of that name use.
    pub fn new(name: &str, config: Config) -> Self {
        Self::from_breaker(registry().get_or_create(name, || config))
    }

    /// A layer over `breaker`, in the registry or not.
    pub fn from_breaker(breaker: Breaker) -> Self {
        CircuitBreakerLayer {
            breaker,
            classify: DefaultClassifier,
        }
    }
}

impl<C> CircuitBreakerLayer<C> {
    /// Classifies results with `classify` instead of `Ok` → success, `Err` → failure. It is
    /// cloned for each request, so keep what it captures cheap to clone (or in an `Arc`).
    pub fn classify<C2>(self, classify: C2) -> CircuitBreakerLayer<C2> {
        CircuitBreakerLayer {
            breaker: self.breaker,
            classify,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

impl<S, C: Clone> Layer<S> for CircuitBreakerLayer<C> {
    type Service = CircuitBreaker<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreaker {
            inner,
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// A [`Service`] that lets requests through its breaker; see the [module docs](self).
/// Clones share the breaker.
#[derive(Clone, Debug)]
pub struct CircuitBreaker<S, C = DefaultClassifier> {
    inner: S,
    breaker: Breaker,
    classify: C,
}

impl<S> CircuitBreaker<S> {
    /// Wraps `inner` with `breaker` and the default classifier.
    pub fn new(inner: S, breaker: Breaker) -> Self {
        CircuitBreaker {
            inner,
            breaker,
            classify: DefaultClassifier,
        }
    }
}

impl<S, C> CircuitBreaker<S, C> {
    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, Req> Service<Req> for CircuitBreaker<S, C>
where
    S: Service<Req>,
    S::Error: fmt::Display,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Honest readiness: the inner service's. See the module docs for why the breaker's
        // state does not show here.
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    #[inline]
    fn call(&mut self, req: Req) -> Self::Future {
        let kind = match __integrations::lease(&self.breaker) {
            Ok(permit) => Kind::Running {
                future: self.inner.call(req),
                permit: Held(Some(permit)),
                classify: self.classify.clone(),
            },
            Err(rejected) => Kind::Rejected {
                rejected: Pending(Some(rejected)),
            },
        };
        ResponseFuture { kind }
    }
}

/// A [`Layer`] that wraps services in a [`KeyedCircuitBreaker`]: each request goes through
/// the breaker of its key in a [`BreakerMap`], so one failing host or tenant opens only its
/// own breaker. Every service it makes shares the family.
///
/// The extractor returns the key by value (for `String` keys, one allocation per request;
/// a key type that is `Copy`, such as a tenant id, costs none).
///
/// ```
/// use breakerbox_tower::KeyedCircuitBreakerLayer;
/// use breakerbox_runtime::{BreakerMap, Config, Error};
/// use tower::{Layer, ServiceExt};
///
/// # async fn demo() -> Result<(), breakerbox_runtime::ConfigError> {
/// // Requests are `(host, path)`; each host has its own breaker.
/// let hosts: BreakerMap<String> = BreakerMap::new("hosts", Config::builder().failures(1).build()?);
/// let layer = KeyedCircuitBreakerLayer::new(hosts.clone(), |req: &(String, u32)| req.0.clone());
/// let client = layer.layer(tower::service_fn(|req: (String, u32)| async move {
///     if req.0 == "down.example" { Err("refused") } else { Ok(req.1) }
/// }));
/// let _ = client.clone().oneshot(("down.example".into(), 1)).await;
/// assert!(matches!(client.clone().oneshot(("down.example".into(), 1)).await, Err(Error::Rejected(_))));
/// assert_eq!(client.oneshot(("up.example".into(), 2)).await.ok(), Some(2));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct KeyedCircuitBreakerLayer<K, X, C = DefaultClassifier> {
    family: BreakerMap<K>,
    extract: X,
    classify: C,
}

impl<K, X> KeyedCircuitBreakerLayer<K, X> {
    /// A layer over `family` (made with [`BreakerMap::new`] or
    /// [`Registry::family`](breakerbox_runtime::Registry::family)), keying each request with `extract`.
    pub fn new(family: BreakerMap<K>, extract: X) -> Self {
        KeyedCircuitBreakerLayer {
            family,
            extract,
            classify: DefaultClassifier,
        }
    }
}

impl<K, X, C> KeyedCircuitBreakerLayer<K, X, C> {
    /// Classifies results with `classify`, as [`CircuitBreakerLayer::classify`] does.
    pub fn classify<C2>(self, classify: C2) -> KeyedCircuitBreakerLayer<K, X, C2> {
        KeyedCircuitBreakerLayer {
            family: self.family,
            extract: self.extract,
            classify,
        }
    }

    /// The family.
    pub fn family(&self) -> &BreakerMap<K> {
        &self.family
    }
}

impl<S, K, X: Clone, C: Clone> Layer<S> for KeyedCircuitBreakerLayer<K, X, C> {
    type Service = KeyedCircuitBreaker<S, K, X, C>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedCircuitBreaker {
            inner,
            family: self.family.clone(),
            extract: self.extract.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// A [`Service`] that lets each request through the breaker of its key; see
/// [`KeyedCircuitBreakerLayer`]. Errors, readiness, cancellation and panics are as for
/// [`CircuitBreaker`] (see the [module docs](self)). Clones share the family.
#[derive(Clone)]
pub struct KeyedCircuitBreaker<S, K, X, C = DefaultClassifier> {
    inner: S,
    family: BreakerMap<K>,
    extract: X,
    classify: C,
}

impl<S, K, X, C> KeyedCircuitBreaker<S, K, X, C> {
    /// The family.
    pub fn family(&self) -> &BreakerMap<K> {
        &self.family
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<K: Hash + Eq + Clone, X, C> fmt::Debug for KeyedCircuitBreakerLayer<K, X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedCircuitBreakerLayer")
            .field("family", &self.family.name())
            .finish_non_exhaustive()
    }
}

impl<S: fmt::Debug, K: Hash + Eq + Clone, X, C> fmt::Debug for KeyedCircuitBreaker<S, K, X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedCircuitBreaker")
            .field("inner", &self.inner)
            .field("family", &self.family.name())
            .finish_non_exhaustive()
    }
}

impl<S, K, X, C, Req> Service<Req> for KeyedCircuitBreaker<S, K, X, C>
where
    S: Service<Req>,
    S::Error: fmt::Display,
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    X: Fn(&Req) -> K,
    C: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The extractor is user code; it runs before any breaker is touched.
        let key = (self.extract)(&req);
        let kind = match __integrations::lease_key(&self.family, &key) {
            Ok(permit) => Kind::Running {
                future: self.inner.call(req),
                permit: Held(Some(permit)),
                classify: self.classify.clone(),
            },
            Err(rejected) => Kind::Rejected {
                rejected: Pending(Some(rejected)),
            },
        };
        ResponseFuture { kind }
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`CircuitBreaker`] or [`KeyedCircuitBreaker`] call: the inner service's, recording its outcome when
    /// it finishes, or a rejection ready at once.
    pub struct ResponseFuture<F, C> {
        #[pin]
        kind: Kind<F, C>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    enum Kind<F, C> {
        Running {
            #[pin]
            future: F,
            // `None` once recorded.
            permit: Held,
            classify: C,
        },
        Rejected {
            rejected: Pending,
        },
    }
}

impl<F, C> fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.kind {
            Kind::Running { .. } => "running",
            Kind::Rejected { .. } => "rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: fmt::Display,
    C: Classify<T, E>,
{
    type Output = Result<T, Error<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Running {
                future,
                permit,
                classify,
            } => {
                // A panic in the inner future is a failure even when a panic catcher around
                // this future (tower-http's `CatchPanicLayer`, `catch_unwind`) stops the unwind
                // before the future, and its permit, are dropped: the guard records it on the
                // way out. Disarmed when `poll` returns, so a future polled while another panic
                // unwinds (from a `Drop`) is not blamed for it.
                let mut guard = RecordPanic {
                    permit: &mut permit.0,
                    armed: true,
                };
                let poll = future.poll(cx);
                guard.armed = false;
                let result = ready!(poll);
                if let Some(permit) = guard.permit.take() {
                    let outcome = classify.classify(&result);
                    let cause = match (&result, outcome) {
                        (Err(e), Outcome::Failure | Outcome::TripFor(_)) => {
                            Some(e as &dyn fmt::Display)
                        }
                        _ => None,
                    };
                    permit.record_with(outcome, cause);
                }
                Poll::Ready(result.map_err(Error::Inner))
            }
            KindProj::Rejected { rejected } => match rejected.0.take() {
                Some(rejected) => Poll::Ready(Err(Error::Rejected(rejected))),
                None => panic!("`ResponseFuture` polled after it completed"),
            },
        }
    }
}

/// A response future's permit: dropped unrecorded (the future dropped unfinished), it records
/// a cancelled call, `Ignored`, also while the thread unwinds from another panic (a sibling
/// request's, tokio dropping the task's future on the way out): the permit's own rule would
/// call that a failure, and one panic would count once per request in flight in the task.
struct Held(Option<Lease>);

impl Drop for Held {
    /// PERF(`closed_ok/bb_tower`): a finished future's permit is `None`, so its drop is a test;
    /// cancelling one is a call, so that the response future's drop stays small enough to
    /// inline where it is awaited.
    #[inline]
    fn drop(&mut self) {
        if let Some(permit) = self.0.take() {
            cancel(permit);
        }
    }
}

#[cold]
#[inline(never)]
fn cancel(permit: Lease) {
    permit.cancel();
}

/// A rejection not yet returned by `poll`: dropped before, it is dropped by a call, for the
/// same reason as [`Held`]'s cancel.
struct Pending(Option<Rejected>);

impl Drop for Pending {
    #[inline]
    fn drop(&mut self) {
        if let Some(rejected) = self.0.take() {
            drop_rejected(rejected);
        }
    }
}

#[cold]
#[inline(never)]
fn drop_rejected(rejected: Rejected) {
    drop(rejected);
}

/// Records a [`Failure`](Outcome::Failure) on the permit if dropped while armed, which only
/// happens when the inner future's `poll` unwinds.
struct RecordPanic<'a> {
    permit: &'a mut Option<Lease>,
    armed: bool,
}

impl Drop for RecordPanic<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.armed
            && let Some(permit) = self.permit.take()
        {
            // Dropped while the inner future's panic unwinds: a panic of the user's clock
            // while recording would abort the process. The permit, if recording never took
            // it, records as any permit dropped while unwinding does (a panic there is caught).
            let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                permit.record(Outcome::Failure)
            }));
            if let Err(payload) = recorded {
                __integrations::discard_panic(payload);
            }
        }
    }
}
