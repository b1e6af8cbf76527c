//! Support for the code `#[circuit_breaker]` generates. Not public API: no stability
//! guarantees, may change in any release.
//!
//! Generated code names only `::breakerbox::__private::…` (or the `crate = "…"` override's
//! equivalent), never a path a user's own items could shadow (tracing #3119/#3126).

use core::fmt::Display;

pub use ::core::option::Option;
pub use ::core::result::Result;
pub use ::core::time::Duration;
pub use ::std::string::String;

/// The runtime's config keys, for the macro crate's mirror test.
pub use breakerbox_runtime::keys::KEYS as CONFIG_KEYS;
pub use breakerbox_runtime::{
    Breaker, BreakerMap, ConfigBuilder, Outcome, Permit, Rejected, Timeout, Window,
};

pub use crate::{CallFailed, FallbackReason};

/// Whether a recorded outcome is one `fallback_on = "error"` answers: a failure or a trip.
#[inline]
pub fn failed(outcome: Outcome) -> bool {
    matches!(outcome.verdict(), Outcome::Failure | Outcome::TripFor(_))
}

pub use breakerbox_runtime::__private::{Guarded, Registration, acquire, register, succeed};

use breakerbox_runtime::registry;

/// A function-local static made on first use: the attribute's breaker or keyed family, made
/// from the function's [`Registration`] by a function shared by every annotated function
/// ([`breaker`] or [`family`]), so that no function carries an initializer of its own.
///
/// Like `std::sync::LazyLock`, but a panic while making it (a registry clock that panics, say)
/// fails that call only, and the next call makes it again: `OnceLock::get_or_init` does not
/// poison, where a `LazyLock` would panic in every later call. A made value is read as a
/// `LazyLock`'s is (one Acquire load and a compare).
pub struct Lazy<T: 'static> {
    cell: ::std::sync::OnceLock<T>,
    init: fn(&'static Registration) -> T,
    registration: &'static Registration,
}

impl<T> Lazy<T> {
    /// A static made by `init(registration)` on first use.
    pub const fn new(
        init: fn(&'static Registration) -> T,
        registration: &'static Registration,
    ) -> Self {
        Lazy {
            cell: ::std::sync::OnceLock::new(),
            init,
            registration,
        }
    }
}

impl<T> Lazy<T> {
    /// Makes the value, out of line: the made value's read loads nothing else.
    #[cold]
    #[inline(never)]
    fn make(&self) -> &T {
        self.cell.get_or_init(|| (self.init)(self.registration))
    }
}

impl<T> ::core::ops::Deref for Lazy<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match self.cell.get() {
            ::core::option::Option::Some(value) => value,
            ::core::option::Option::None => self.make(),
        }
    }
}

/// Creates (or finds) the breaker of a `#[circuit_breaker]` function, from the function's
/// [`Registration`]: its name, its config (validated at expansion time) and where it is
/// written, which the registry names if another site gives the name another config.
///
/// Called once per function, from the function-local [`Lazy`] static (again after a panic).
#[inline(never)]
pub fn breaker(registration: &'static Registration) -> Breaker {
    registry().registered_breaker(registration)
}

/// Finds (or creates) the keyed family of a `#[circuit_breaker(key = …)]` function, named and
/// configured by its (unregistered) [`Registration`]. A family of that name with keys of
/// another type (made with [`Registry::family`](breakerbox_runtime::Registry::family)) cannot
/// be shared: the function then gets a family of its own, outside the registry.
///
/// Called once per function, from the function-local [`Lazy`] static (again after a panic).
#[inline(never)]
pub fn family(registration: &'static Registration) -> BreakerMap<String> {
    registry()
        .registered_family(registration)
        .unwrap_or_else(|_| BreakerMap::new(registration.name(), registration.config()))
}

/// The breaker of `key` in `family`: a handle (a reference-count increment), so the key
/// expression's borrows of the arguments end before the body runs. Looking up an existing
/// key does not allocate.
#[inline]
pub fn keyed_breaker(family: &BreakerMap<String>, key: &str) -> Breaker {
    family.breaker(key)
}

/// Asks `breaker`, the breaker of `key` in `family`, for a permit; a rejection names the key.
#[inline]
pub fn keyed_try_acquire<'b>(
    family: &BreakerMap<String>,
    breaker: &'b Breaker,
    key: &str,
) -> Result<Permit<'b>, Rejected> {
    match acquire(breaker) {
        Ok(permit) => Ok(permit),
        Err(rejected) => Err(family.name_rejection(key, rejected)),
    }
}

/// The config of a function whose attribute sets no policy key: the defaults (and a file's
/// layers), shared by every such function rather than a closure of each.
#[inline]
pub fn no_keys(config: ConfigBuilder) -> ConfigBuilder {
    config
}

/// What `key = …` may evaluate to: anything that is `AsRef<str>`, looked up as a `&str`.
#[diagnostic::on_unimplemented(
    message = "the `key` of `#[circuit_breaker]` must be string-like (`AsRef<str>`), but this expression is `{Self}`",
    label = "`{Self}` is not `AsRef<str>`",
    note = "each distinct key gets its own breaker, looked up by `&str`: give a `&str` or `String` (for a number, `key = id.to_string()`)"
)]
pub trait KeyStr {
    /// The key as looked up.
    fn key_str(&self) -> &str;
}

impl<T: AsRef<str> + ?Sized> KeyStr for T {
    #[inline]
    fn key_str(&self) -> &str {
        self.as_ref()
    }
}

/// What `replay_key = …` may evaluate to: anything that is `AsRef<str>`, kept as a `String`.
#[diagnostic::on_unimplemented(
    message = "the `replay_key` of `#[circuit_breaker]` must be string-like (`AsRef<str>`), but this expression is `{Self}`",
    label = "`{Self}` is not `AsRef<str>`",
    note = "a call whose key is already in the journal is not journaled again: give a `&str` or `String` (for a number, `replay_key = id.to_string()`)"
)]
pub trait ReplayKeyStr {
    /// The key as journaled.
    fn key_str(&self) -> &str;
}

impl<T: AsRef<str> + ?Sized> ReplayKeyStr for T {
    #[inline]
    fn key_str(&self) -> &str {
        self.as_ref()
    }
}

/// Moved into the closure that wraps a synchronous body so that it is `FnOnce`: such a body
/// may move its captured arguments out and return borrows of them (fn-error-context).
#[derive(Debug)]
pub struct ForceFnOnce;

impl ForceFnOnce {
    /// Consumes the marker; does nothing else.
    #[inline]
    pub fn consume(self) {}
}

/// The function's return type can take a rejected call: `Result<T, E>` with
/// `E: From<Rejected>`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` without `fallback` needs the function to return `Result<T, E>` with `E: From<breakerbox::Rejected>`, but it returns `{Self}`",
    label = "a rejected call cannot be returned as `{Self}`",
    note = "add `fallback = path_to_fn` to answer rejected calls, or return a `Result` whose error type implements `From<breakerbox::Rejected>`"
)]
pub trait FromRejected {
    /// The rejection as this return type.
    fn from_rejected(rejected: Rejected) -> Self;
}

impl<T, E: ErrorFromRejected> FromRejected for Result<T, E> {
    #[inline]
    fn from_rejected(rejected: Rejected) -> Self {
        Result::Err(E::convert(rejected))
    }
}

/// The error type of a `#[circuit_breaker]` function without fallback: `From<Rejected>`.
#[diagnostic::on_unimplemented(
    message = "the error type `{Self}` must implement `From<breakerbox::Rejected>` to report calls rejected by `#[circuit_breaker]`",
    label = "`{Self}` does not implement `From<breakerbox::Rejected>`",
    note = "implement `From<breakerbox::Rejected> for {Self}` (for example with a `#[from] Rejected` variant in a thiserror enum), or add `fallback = path_to_fn` to answer rejected calls",
    note = "an error type of another crate, such as `std::io::Error` (`io::Result`), cannot be given that impl: return an error type of your own that wraps it, or `Box<dyn std::error::Error + Send + Sync>`, which takes a `Rejected` as it is"
)]
pub trait ErrorFromRejected {
    /// `From::from`.
    fn convert(rejected: Rejected) -> Self;
}

// Not recommended, so that a missing `From<Rejected>` is reported with the message above
// rather than as a bare `E: From<Rejected>` bound.
#[diagnostic::do_not_recommend]
impl<E: From<Rejected>> ErrorFromRejected for E {
    #[inline]
    fn convert(rejected: Rejected) -> Self {
        E::from(rejected)
    }
}

/// What a function without fallback returns for a rejected call.
#[inline]
pub fn reject<R: FromRejected>(rejected: Rejected) -> R {
    R::from_rejected(rejected)
}

/// The function's return type can take a timed-out call: `Result<T, E>` with
/// `E: From<Timeout>`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(timeout = …)]` without `fallback` needs the function to return `Result<T, E>` with `E: From<breakerbox::Timeout>`, but it returns `{Self}`",
    label = "a timed-out call cannot be returned as `{Self}`",
    note = "add `fallback = path_to_fn` to answer timed-out calls, or return a `Result` whose error type implements `From<breakerbox::Timeout>`"
)]
pub trait FromTimeout {
    /// The timeout as this return type.
    fn from_timeout(timeout: Timeout) -> Self;
}

impl<T, E: ErrorFromTimeout> FromTimeout for Result<T, E> {
    #[inline]
    fn from_timeout(timeout: Timeout) -> Self {
        Result::Err(E::convert(timeout))
    }
}

/// The error type of a `#[circuit_breaker(timeout = …)]` function without fallback.
#[diagnostic::on_unimplemented(
    message = "the error type `{Self}` must implement `From<breakerbox::Timeout>` to report calls that `#[circuit_breaker(timeout = …)]` cut short",
    label = "`{Self}` does not implement `From<breakerbox::Timeout>`",
    note = "implement `From<breakerbox::Timeout> for {Self}`, or add `fallback = path_to_fn` to answer timed-out calls",
    note = "an error type of another crate, such as `std::io::Error` (`io::Result`), cannot be given that impl: return an error type of your own that wraps it, or `Box<dyn std::error::Error + Send + Sync>`, which takes a `Timeout` as it is"
)]
pub trait ErrorFromTimeout {
    /// `From::from`.
    fn convert(timeout: Timeout) -> Self;
}

#[diagnostic::do_not_recommend]
impl<E: From<Timeout>> ErrorFromTimeout for E {
    #[inline]
    fn convert(timeout: Timeout) -> Self {
        E::from(timeout)
    }
}

/// What a function without fallback returns for a timed-out call.
#[inline]
pub fn reject_timeout<R: FromTimeout>(timeout: Timeout) -> R {
    R::from_timeout(timeout)
}

/// Return types the default classifier understands: `Result<T, E>`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` cannot tell whether a call that returns `{Self}` failed",
    label = "not a `Result`",
    note = "return a `Result<T, E>` (`Err` counts as a failure), or add `classify = path_to_fn`, a `fn(&{Self}) -> breakerbox::Outcome`"
)]
pub trait DefaultClassify: Sized {
    /// The error type.
    type Error;

    /// Records the result — `Ok` a success, `Err` a failure with `C`'s cause — and gives it
    /// back.
    fn finish<C: Cause<Self::Error>>(self, permit: Permit<'_>, cause: C) -> Self;
}

impl<T, E> DefaultClassify for Result<T, E> {
    type Error = E;

    // Takes the result by value and rebuilds it: nothing takes its address on the success
    // path, so it stays in registers. Recording through `&result` kept it in memory, and
    // LLVM's 16-byte reload of the two 8-byte stores stalled store forwarding (~10 ns).
    #[inline]
    fn finish<C: Cause<E>>(self, permit: Permit<'_>, _cause: C) -> Self {
        match self {
            Result::Ok(value) => {
                succeed(permit);
                Result::Ok(value)
            }
            Result::Err(error) => {
                permit.record_with(Outcome::Failure, C::of(&error));
                Result::Err(error)
            }
        }
    }
}

/// The default classifier: records `result` on `permit` and returns it. `cause` is picked at
/// the call site, where the error type is concrete (see [`ErrorCause`]). Generic over the
/// result's type and the pick only, so every annotated function of one return type shares
/// one instance.
#[inline]
pub fn finish<R: DefaultClassify, C: Cause<R::Error>>(
    cause: C,
    result: R,
    permit: Permit<'_>,
) -> R {
    result.finish(permit, cause)
}

/// How a failure's message is taken from its error `E`: [`DisplayCause`] or [`NoCause`].
pub trait Cause<E> {
    /// The message of `error`, if it has one.
    fn of(error: &E) -> Option<&dyn Display>;
}

/// The error is `Display`: its text is the cause.
#[derive(Debug)]
pub struct DisplayCause;

impl<E: Display> Cause<E> for DisplayCause {
    #[inline]
    fn of(error: &E) -> Option<&dyn Display> {
        Option::Some(error)
    }
}

/// The error has no text: no cause.
#[derive(Debug)]
pub struct NoCause;

impl<E> Cause<E> for NoCause {
    #[inline]
    fn of(_: &E) -> Option<&dyn Display> {
        Option::None
    }
}

/// A result, inspected for how its error gives a message when it trips the breaker:
/// `(&ErrorCause(&result)).__breakerbox_error_cause()` picks [`ErrorCauseDisplay`] (giving
/// [`DisplayCause`]) for a `Result` whose error is `Display` and [`ErrorCauseNone`] (giving
/// [`NoCause`]) otherwise (autoref specialization).
#[derive(Debug)]
pub struct ErrorCause<'a, R>(pub &'a R);

/// A `Result` whose error is `Display`.
pub trait ErrorCauseDisplay {
    /// [`DisplayCause`].
    fn __breakerbox_error_cause(&self) -> DisplayCause;
}

impl<T, E: Display> ErrorCauseDisplay for ErrorCause<'_, Result<T, E>> {
    #[inline]
    fn __breakerbox_error_cause(&self) -> DisplayCause {
        DisplayCause
    }
}

/// Anything else.
pub trait ErrorCauseNone {
    /// [`NoCause`].
    fn __breakerbox_error_cause(&self) -> NoCause;
}

impl<R> ErrorCauseNone for &ErrorCause<'_, R> {
    #[inline]
    fn __breakerbox_error_cause(&self) -> NoCause {
        NoCause
    }
}

/// A call's result, classified without `classify = …` when the function has a fallback:
/// `(&OutcomeOf(&result)).__breakerbox_outcome()` picks [`ClassifyResult`] for a `Result` and
/// [`ClassifyAny`] (a success: only panics and timeouts fail) for any other type.
#[derive(Debug)]
pub struct OutcomeOf<'a, R>(pub &'a R);

/// A `Result`: `Ok` → success, `Err` → failure.
pub trait ClassifyResult {
    /// The outcome.
    fn __breakerbox_outcome(&self) -> Outcome;
}

impl<T, E> ClassifyResult for OutcomeOf<'_, Result<T, E>> {
    #[inline]
    fn __breakerbox_outcome(&self) -> Outcome {
        Outcome::of_result(self.0)
    }
}

/// Any other return value: the call ran to the end, a success.
pub trait ClassifyAny {
    /// Always [`Outcome::Success`].
    fn __breakerbox_outcome(&self) -> Outcome;
}

impl<R> ClassifyAny for &OutcomeOf<'_, R> {
    #[inline]
    fn __breakerbox_outcome(&self) -> Outcome {
        Outcome::Success
    }
}

/// A call's result, inspected for a cause to keep when it trips the breaker.
///
/// Autoref specialization: `(&CauseOf(&result)).__breakerbox_cause()` picks
/// [`CauseDisplay`] when the result is `Err(e)` with `e: Display` and [`CauseNone`]
/// otherwise. It resolves at the call site, where the result's type is concrete (the
/// expansion fixes it before this call). The method name is prefixed because method
/// resolution also sees the user's traits in scope at the call site.
#[derive(Debug)]
pub struct CauseOf<'a, R>(pub &'a R);

/// A `Result` whose error is `Display`: its error is the cause.
pub trait CauseDisplay {
    /// The error, if the result is one.
    fn __breakerbox_cause(&self) -> Option<&dyn Display>;
}

impl<T, E: Display> CauseDisplay for CauseOf<'_, Result<T, E>> {
    #[inline]
    fn __breakerbox_cause(&self) -> Option<&dyn Display> {
        match self.0 {
            Result::Ok(_) => Option::None,
            Result::Err(error) => Option::Some(error),
        }
    }
}

/// Anything else: no cause.
pub trait CauseNone {
    /// Always `None`.
    fn __breakerbox_cause(&self) -> Option<&dyn Display>;
}

impl<R> CauseNone for &CauseOf<'_, R> {
    #[inline]
    fn __breakerbox_cause(&self) -> Option<&dyn Display> {
        Option::None
    }
}

/// A synchronous function's return value, checked not to be a future: the attribute sees a
/// future written as `impl Future` or `Pin<Box<dyn Future>>`, but not one behind a type alias
/// (`futures::future::BoxFuture`) or a named type. `(&ReturnOf(&result)).__breakerbox_return()`
/// picks [`FutureReturn`] for a future and [`ValueReturn`] for anything else (autoref
/// specialization), and [`not_a_future`] accepts only the latter.
#[derive(Debug)]
pub struct ReturnOf<'a, R>(pub &'a R);

/// What [`FutureReturn`] gives: a function that returns a future.
#[derive(Debug)]
pub struct ReturnsFuture;

/// What [`ValueReturn`] gives: a function that returns something else.
#[derive(Debug)]
pub struct ReturnsValue;

/// A future.
pub trait FutureReturn {
    /// [`ReturnsFuture`].
    fn __breakerbox_return(&self) -> ReturnsFuture;
}

impl<F: Future> FutureReturn for ReturnOf<'_, F> {
    #[inline]
    fn __breakerbox_return(&self) -> ReturnsFuture {
        ReturnsFuture
    }
}

/// Anything else.
pub trait ValueReturn {
    /// [`ReturnsValue`].
    fn __breakerbox_return(&self) -> ReturnsValue;
}

impl<R> ValueReturn for &ReturnOf<'_, R> {
    #[inline]
    fn __breakerbox_return(&self) -> ReturnsValue {
        ReturnsValue
    }
}

/// Implemented by [`ReturnsValue`] only.
#[diagnostic::on_unimplemented(
    message = "#[circuit_breaker] on a function that returns a future would record the outcome when the future is created, not when it finishes",
    label = "this type is a future",
    note = "write an `async fn` instead (for traits, native `async fn` in the trait rather than `#[async_trait]` or `BoxFuture`), or put the attribute on an `async fn` the future awaits"
)]
pub trait NotAFuture {}

impl NotAFuture for ReturnsValue {}

/// Compiles only for a function that does not return a future.
#[inline]
pub fn not_a_future<K: NotAFuture>(_returns: K) {}

/// The timeout of a call to a function whose attribute names `timeout`: the breaker's
/// config's now (the attribute's value is one of its layers, which a file, a variable or a
/// reload may change), or the attribute's should the config have none.
#[inline]
pub fn call_timeout(breaker: &Breaker, attribute: Duration) -> Duration {
    match breaker.config().timeout() {
        Option::Some(timeout) => timeout,
        Option::None => attribute,
    }
}

/// `future` run for at most `after` on tokio's timer (`None` if it ran out of time), and the
/// call's permit. The timer is set up here, before the call runs: without one (outside a
/// runtime, or on a runtime built without `enable_time`) tokio panics, and the permit is
/// recorded as ignored first, so that a program's setup error never counts as the service's
/// failure.
#[cfg(feature = "tokio")]
#[inline]
pub fn timeout<'a, F: Future>(
    after: Duration,
    future: F,
    permit: Permit<'a>,
) -> (impl Future<Output = Option<F::Output>>, Permit<'a>) {
    let set_up = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {
        ::tokio::time::timeout(after, future)
    }));
    match set_up {
        Result::Ok(timeout) => (async move { timeout.await.ok() }, permit),
        Result::Err(panic) => {
            permit.ignore();
            ::std::panic::resume_unwind(panic)
        }
    }
}

/// Stands in for the tokio version so that, without the `tokio` feature, the only error
/// is the one from [`require_tokio!`].
#[cfg(not(feature = "tokio"))]
#[inline]
pub fn timeout<'a, F: Future>(
    _after: Duration,
    future: F,
    permit: Permit<'a>,
) -> (impl Future<Output = Option<F::Output>>, Permit<'a>) {
    (async move { Option::Some(future.await) }, permit)
}

// `timeout = "…"` needs the facade's `tokio` feature. The attribute cannot see the facade's
// features, so it emits `require_tokio!{}`, which is empty with the feature and a
// `compile_error!` naming the feature without it (cached's `__require_async_feature!`,
// tokio's `main_fail`). A `macro_rules!` can only be re-exported from another module if it is
// `#[macro_export]`ed; the hidden, prefixed name keeps it out of users' way.
#[cfg(feature = "tokio")]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_require_tokio {
    () => {};
}

#[cfg(not(feature = "tokio"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_require_tokio {
    () => {
        ::core::compile_error! {
            "`timeout` needs the `tokio` feature of breakerbox: add `features = [\"tokio\"]` to the breakerbox dependency in Cargo.toml"
        }
    };
}

pub use crate::__breakerbox_require_tokio as require_tokio;

/// `replay = …`: the replay crate's support, or without the `replay` feature stand-ins with
/// the same shapes, so that the only error is the one from [`require_replay!`].
#[cfg(feature = "replay")]
pub use breakerbox_replay::__private as replay;
#[cfg(not(feature = "replay"))]
#[path = "replay_stub.rs"]
pub mod replay;

#[cfg(feature = "replay")]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_require_replay {
    () => {};
}

#[cfg(not(feature = "replay"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_require_replay {
    () => {
        ::core::compile_error! {
            "`replay` needs the `replay` feature of breakerbox: add `features = [\"replay\"]` to the breakerbox dependency in Cargo.toml"
        }
    };
}

pub use crate::__breakerbox_require_replay as require_replay;

/// `replay = "fleet"` also needs `redis`; without `replay`, `require_replay!` is the error.
#[cfg(any(feature = "redis", not(feature = "replay")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_require_replay_fleet {
    () => {};
}

#[cfg(all(feature = "replay", not(feature = "redis")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_require_replay_fleet {
    () => {
        ::core::compile_error! {
            "`replay = \"fleet\"` journals in the fleet's Redis, which needs the `redis` feature of breakerbox: add `features = [\"replay\", \"redis\"]` to the breakerbox dependency in Cargo.toml, or use `replay = \"disk\"` (one journal per process)"
        }
    };
}

pub use crate::__breakerbox_require_replay_fleet as require_replay_fleet;
