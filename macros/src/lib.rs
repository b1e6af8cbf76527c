//! The `#[circuit_breaker]` attribute of [breakerbox](https://docs.rs/breakerbox).
//!
//! Use it through the `breakerbox` crate, which re-exports it next to the runtime it
//! expands to; all documentation is on [`macro@circuit_breaker`].
//!
//! The macro works in stages, one module each, run in one direction by `expand::try_expand`:
//! `parse` reads the attribute into `args::Args`, a typed config that keeps every key's span,
//! reading each value with `values` (durations with `duration`) and naming the closest key
//! for a misspelt one with `suggest`; `valid` checks the keys against each other; `func`
//! checks the function's shape; `expand` edits the function in place. Every stage reports
//! into one `args::Errors`, so all mistakes come in one compile.
#![forbid(unsafe_code)]

mod args;
mod duration;
mod expand;
mod func;
mod parse;
// Shared with the runtime: `macros/src/suggest.rs` is a symlink to `runtime/src/suggest.rs`.
mod suggest;
mod valid;
mod values;

use proc_macro::TokenStream;

/// Runs every call of a function through a circuit breaker.
///
/// ```
/// use breakerbox::{Rejected, circuit_breaker};
///
/// #[derive(Debug)]
/// enum ApiError {
///     Down,
///     Rejected(Rejected),
/// }
///
/// impl From<Rejected> for ApiError {
///     fn from(rejected: Rejected) -> Self {
///         ApiError::Rejected(rejected)
///     }
/// }
///
/// #[circuit_breaker(name = "doc-users", failures = 2, open_for = "30s")]
/// fn fetch_user(id: u32) -> Result<String, ApiError> {
///     if id == 0 { Err(ApiError::Down) } else { Ok(format!("user {id}")) }
/// }
///
/// assert_eq!(fetch_user(7).unwrap(), "user 7");
/// assert!(matches!(fetch_user(0), Err(ApiError::Down)));
/// assert!(matches!(fetch_user(0), Err(ApiError::Down)));
/// // Two failures in a row: the breaker is open, and calls are rejected without running.
/// assert!(matches!(fetch_user(7), Err(ApiError::Rejected(_))));
/// ```
///
/// Each call asks the breaker for a permit. While the breaker is **closed** the body runs
/// and its outcome is recorded. While it is **open** the body does not run: the `fallback`
/// answers, or the function returns the rejection converted into its error type. After
/// `open_for` it is **half-open**: up to `half_open_calls` probe calls run; `successes` of
/// them close it, a failure opens it again.
///
/// The breaker is created on the first call, from the registry (`breakerbox::registry()`),
/// and kept in a static inside the function: later calls do no lookup, take no lock and
/// allocate nothing. The registry knows it before that: the attribute registers its name,
/// config and line at link time (a `linkme` distributed slice), so `registry().names()`,
/// `get(name)`, `breakers()` and `check()` see every annotated function from the start. On
/// platforms `linkme` does not support (WebAssembly among them) an annotated breaker is known
/// from its first call only.
///
/// # Keys
///
/// All keys are optional and checked at compile time: a wrong value, a duplicate or an
/// impossible combination is an error at the offending token that says how to fix it. The
/// policy keys are those of `breakerbox::Config`, with the same defaults.
///
/// | Key | Value | Default | Example |
/// |---|---|---|---|
/// | `name` | the registry name: a string, or the path of a `&str` constant (not through `Self`: name the type) | the module path and function name, e.g. `"my_app::client::fetch_user"` | `name = "users"` or `name = names::USERS` |
/// | `key` | a breaker per distinct value of this expression over the arguments, which must be `AsRef<str>`; see [Per-key breakers](#per-key-breakers) | one breaker | `key = url.host_str().unwrap_or("")` |
/// | `config` | a config file's `[configs.<name>]` table, under the attribute's keys: its name, in ASCII letters, digits, `_` and `-`. Every file `registry().load_toml` loads must have that table (else a `LoadError::UnknownConfig` naming this attribute); until one is loaded the attribute's keys stand alone, and a warning says so when the breaker is made. See docs/configuration.md | — | `config = "fast"` |
/// | `failures` | trip after this many failures in a row (≥ 1) | `5` | `failures = 3` |
/// | `failures_within` | count failures in a row only within this duration of the first; with `failures` only | — | `failures_within = "10s"` |
/// | `failure_rate` | trip when this percentage (1–100) of the window's calls fail; replaces `failures` | — | `failure_rate = 50` |
/// | `window` | for `failure_rate` and `slow_rate`: the last N calls (1–10 000), or the calls of the last duration (≥ `"10ms"`) | `100` calls | `window = 200` or `window = "30s"` |
/// | `min_calls` | for `failure_rate` and `slow_rate`: calls the window must hold before a rate is judged; at most a count window's size | `10` (or a smaller count window's size) | `min_calls = 20` |
/// | `slow` | calls that take at least this long are slow: they count as failures, or by their own rate with `slow_rate` | — | `slow = "1s"` |
/// | `slow_rate` | trip when this percentage (1–100) of the window's calls are slow; needs `slow` | — | `slow_rate = 80` |
/// | `open_for` | how long the breaker stays open before probing | `"60s"` | `open_for = "30s"` |
/// | `max_open_for` | the cap on the open time under `backoff` (≥ `open_for`) | `open_for`; with `backoff`, `"5m"` or `open_for` if longer | `max_open_for = "10m"` |
/// | `backoff` | multiply the open time by this (1.0–100.0) each time it re-opens without closing between | `1.0` | `backoff = 2.0` |
/// | `jitter` | randomize each open time by up to this fraction (0.0–1.0) | `0.0` | `jitter = 0.1` |
/// | `half_open_calls` | probe calls a half-open round lets through (1–65 535) | `1` | `half_open_calls = 3` |
/// | `successes` | successful probes that close the breaker (1 to `half_open_calls`) | `1` | `successes = 2` |
/// | `probe_timeout` | a half-open round whose probes have not finished after this re-opens | `"60s"` | `probe_timeout = "10s"` |
/// | `max_concurrent` | at most this many calls at once while closed; more are rejected (a bulkhead). A call whose future is leaked (`mem::forget`) or parked for ever holds its place until the next state change or reset, which frees every place | unlimited | `max_concurrent = 100` |
/// | `probe` | a health check called while the breaker is open: a function of no arguments returning `bool` or a `Result` (run on a thread of its own), or an `async fn` returning one (run on tokio; feature `tokio`). Its first success half-opens the breaker before `open_for` ends; not with `key`, not `Self::…` (name the type). See `docs/probes.md` | — | `probe = ping_users` |
/// | `probe_every` | with `probe`: how often it runs while open, and how long each may take (a probe still running then counts as failed) | `"5s"` | `probe_every = "2s"` |
/// | `max_keys` | with `key`: keep about this many keys (≥ 1); see `BreakerMap` for what is never evicted | `10000` | `max_keys = 1000` |
/// | `idle_for` | with `key`: a key uncalled this long may be evicted | `"10m"` | `idle_for = "1h"` |
/// | `latency` | time every call into a latency histogram, read with `Breaker::latency` (p50/p90/p99 of the last minute); a breaker with `slow` times its calls anyway | `false` | `latency = true` |
/// | `health` | whether `Registry::health` (the admin router's `GET /health`) counts this breaker | `true` | `health = false` |
/// | `critical` | this breaker open makes the health `DOWN` rather than `DEGRADED`; with `key`, any open key | `false` | `critical = true` |
/// | `timeout` | `async fn` only, needs the `tokio` feature: a call still running after this is dropped and counts as a failure, and as a timeout in `Metrics::timeouts` (and, where calls are timed, as taking the timeout in the latency histogram). It is the breaker's `timeout` config key too: each call reads the breaker's value, which a config file's table, a variable or a reload may replace (docs/configuration.md) | — | `timeout = "500ms"` |
/// | `fallback` | the function that answers rejected (and timed-out) calls; see [Fallbacks](#fallbacks) | — | `fallback = cached_user` |
/// | `fallback_with_reason` | instead of `fallback`: a fallback that is also told why it answers, as a last `breakerbox::FallbackReason` argument | — | `fallback_with_reason = cached_user` |
/// | `fallback_on` | with a fallback: `"rejected"`, it answers rejected (and timed-out) calls; `"error"`, also calls that ran and failed; see [Fallbacks](#fallbacks) | `"rejected"` | `fallback_on = "error"` |
/// | `classify` | a `fn(&ReturnType) -> Outcome` that judges each call; see [Outcomes](#outcomes) | `Ok` is a success, `Err` a failure | `classify = by_status` |
/// | `replay` | feature `replay`: calls rejected while open are journaled, `"memory"` (arguments `Clone + Send + 'static`), `"disk"` (a file per breaker under `$BREAKERBOX_REPLAY_DIR`, default `./breakerbox-replay`; arguments `Serialize + DeserializeOwned + Send + 'static`) or `"fleet"` (feature `redis` too: the running fleet's Redis, each entry replayed by one instance; arguments as for disk), and replayed through the breaker once it closes; the rejection's `journaled()` says so. Only for calls safe to repeat; not with `key`, `fallback` or `self`; see [Replay](#replay) | — | `replay = "disk"` |
/// | `replay_key` | with `replay`: the entry's key, an `AsRef<str>` expression over the arguments; a call whose key is queued already is not journaled again | none | `replay_key = order.id.to_string()` |
/// | `replay_max` | with `replay`: at most this many entries; a call beyond is not journaled | `10000` | `replay_max = 50000` |
/// | `replay_ttl` | with `replay`: an entry not replayed within this expires | `"1h"` | `replay_ttl = "15m"` |
/// | `replay_rate` | with `replay`: at most this many replays a second (each instance's, with `"fleet"`) | `10` | `replay_rate = 50` |
/// | `replay_attempts` | with `replay`: failed replays before an entry is a dead letter | `5` | `replay_attempts = 3` |
/// | `replay_claim_after` | with `replay = "fleet"`: an entry an instance took and did not finish within this (it died, or its replay is slower) is taken over by another instance | `"30s"` | `replay_claim_after = "2m"` |
/// | `crate` | where breakerbox is; see [Renaming the crate](#renaming-the-crate) | `::breakerbox` | `crate = "my_crate::breakerbox"` |
///
/// Durations are strings: a number, optionally with a fraction, and one unit of `ns`, `us`,
/// `ms`, `s`, `m` or `h`: `"250ms"`, `"1.5s"`, `"2m"`. They are parsed at compile time and
/// emitted as `Duration` constants; nothing is parsed at run time.
///
/// ```
/// # use breakerbox::{Rejected, circuit_breaker};
/// # #[derive(Debug)] pub struct ApiError;
/// # impl From<Rejected> for ApiError { fn from(_: Rejected) -> Self { ApiError } }
/// /// Opens when half of the last 30 seconds' calls failed or took a second or more
/// /// (once 20 calls were seen); stays open 10s, doubling up to 5 minutes while it keeps
/// /// failing; closes after 3 good probes out of 5.
/// #[circuit_breaker(
///     name = "search",
///     failure_rate = 50,
///     window = "30s",
///     min_calls = 20,
///     slow = "1s",
///     slow_rate = 50,
///     open_for = "10s",
///     backoff = 2.0,
///     max_open_for = "5m",
///     jitter = 0.1,
///     half_open_calls = 5,
///     successes = 3,
/// )]
/// fn search(query: &str) -> Result<Vec<String>, ApiError> {
///     Ok(vec![query.to_owned()])
/// }
/// # search("rust").unwrap();
/// ```
///
/// # Fallbacks
///
/// `fallback = path` names a function (a path, not a string or a closure) that answers
/// while the breaker rejects calls, and, with `timeout`, calls that ran out of time (with
/// `fallback_on = "error"`, also calls that failed; see below):
///
/// - It is called with the function's arguments, in order; for a method, `self` comes first
///   (`fallback = Self::cached`, taking `&self`, `&mut self`, `self` or `self: Arc<Self>`
///   like the method). With a fallback, arguments must be plain names (`id: u32`, not a
///   pattern such as `(a, b): (u32, u32)`), so that they can be passed on.
/// - It returns the function's return type. For an `async fn` it is an `async fn` too, and
///   is awaited.
/// - Generic parameters are inferred from the arguments and return type, or given:
///   `fallback = cached::<T>`.
/// - A fallback whose signature does not fit is a compile error at `fallback = …`, and so is
///   a fallback that is the function itself (it would call itself while the breaker is open).
/// - It runs outside the breaker: its result is not recorded.
///
/// `fallback_with_reason = path` names a fallback that is also told why it answers: it takes
/// the function's arguments as above, then a `breakerbox::FallbackReason`. That is
/// `Rejected(rejected)` when the breaker refused the call, with `rejected.reason()` telling
/// open, half-open with every probe taken, at `max_concurrent`, and forced open apart, or
/// `TimedOut(timeout)` when the call ran past `timeout`. A fallback whose last parameter has
/// another type is a compile error at `fallback_with_reason = …` (expected `FallbackReason`).
/// Use one of `fallback` and `fallback_with_reason`.
///
/// ```
/// use breakerbox::{FallbackReason, RejectReason, circuit_breaker};
/// # #[derive(Debug)] pub struct ApiError;
///
/// #[circuit_breaker(name = "doc-reason", max_concurrent = 10, fallback_with_reason = busy)]
/// fn quote(symbol: &str) -> Result<u64, ApiError> {
///     Ok(42)
/// }
///
/// fn busy(symbol: &str, reason: FallbackReason) -> Result<u64, ApiError> {
///     match reason.reject_reason() {
///         // Too many calls at once: the service is fine, this client is busy.
///         Some(RejectReason::BulkheadFull) => Err(ApiError),
///         // Open, half-open, forced open, or (with `timeout`) timed out.
///         _ => Ok(0),
///     }
/// }
/// # assert_eq!(quote("X").unwrap(), 42);
/// ```
///
/// `fallback_on = "error"` makes the fallback also answer a call that ran, while the breaker
/// was closed or half-open, and failed: an `Err` (by the default classifier), or a result that
/// `classify` judges a failure or a trip (`Outcome::Failure`, `TripFor`, with or without a
/// reason), such as an HTTP 500 that comes back as `Ok(response)`. The failure is recorded
/// first, as without it; then the fallback's answer is returned. `fallback_with_reason` is
/// told `FallbackReason::Failed(failed)`, where `failed.classified()` tells a `classify`
/// verdict from an `Err` and `failed.outcome()` gives the verdict and its reason. A panic is
/// not answered: it is a bug in the program rather than an answer of the service, so it is
/// recorded as a failure and goes on. As with `timeout`, the body must then not move the
/// arguments the fallback receives. The default, `"rejected"`, is the behaviour without the key.
///
/// ```
/// use breakerbox::{Outcome, circuit_breaker};
///
/// pub struct Response(pub u16);
///
/// fn by_status(r: &Response) -> Outcome {
///     if r.0 >= 500 { Outcome::failure_with("HTTP 5xx") } else { Outcome::Success }
/// }
///
/// fn degraded(_path: &str) -> Response {
///     Response(203)
/// }
///
/// #[circuit_breaker(name = "doc-on-error", classify = by_status, fallback = degraded, fallback_on = "error")]
/// fn get(path: &str) -> Response {
///     Response(if path == "/broken" { 500 } else { 200 })
/// }
/// assert_eq!(get("/").0, 200);
/// assert_eq!(get("/broken").0, 203, "the 500 was recorded, then answered by the fallback");
/// ```
///
/// Without a fallback, a rejected call returns `Err(From::from(rejected))`: the function must
/// return `Result<T, E>` with `E: From<breakerbox::Rejected>` (with `timeout`, also
/// `E: From<breakerbox::Timeout>`). Otherwise the compile error says which impl to add.
///
/// ```
/// use std::sync::Arc;
/// use breakerbox::{Rejected, circuit_breaker};
/// # #[derive(Debug)] pub struct ApiError;
/// # impl From<Rejected> for ApiError { fn from(_: Rejected) -> Self { ApiError } }
///
/// pub struct Client {
///     cache: Vec<String>,
/// }
///
/// impl Client {
///     #[circuit_breaker(name = "doc-client", fallback = Self::cached)]
///     pub async fn user(&self, id: usize) -> Result<String, ApiError> {
///         Ok(format!("fresh {id}"))
///     }
///
///     async fn cached(&self, id: usize) -> Result<String, ApiError> {
///         self.cache.get(id).cloned().ok_or(ApiError)
///     }
/// }
/// ```
///
/// With both `timeout` and `fallback`, the body must not move the arguments the fallback
/// receives (they are still needed after a timeout): the body borrows what it does not
/// move, and moving one is a borrow error. For the same reason a method taking `&mut self`
/// cannot return a borrow of `self` (`Result<&mut T, E>`) with both: the body's borrow
/// would outlive the fallback's.
///
/// A fallback cannot stand in for a function returning `impl Trait` (whole, or inside
/// `Result<…>`): its own `impl Trait` is another type. Return a named type there.
///
/// The fallback is called with the function's parameters by name, so `clippy::pedantic`'s
/// `used_underscore_binding` blames an `_unused` parameter at `fallback = …`; allow it on the
/// function, or name the parameter without the underscore.
///
/// # Outcomes
///
/// Each call that ran is judged as an `Outcome`:
///
/// - By default `Ok` is a `Success` and `Err` a `Failure`. The error's `Display` text, when
///   it has one, is kept as the breaker's last failure and shown in `Rejected`'s message.
///   Without a fallback the function must return a `Result` (its error carries the
///   rejection); with a fallback any return type works, and a call that returns a value
///   other than a `Result` is a `Success` — only a panic or a `timeout` fails it.
/// - `classify = path` names a `fn(&ReturnType) -> breakerbox::Outcome`, for any return
///   type: `Success`, `Failure`, `Ignored` (says nothing about the service, such as a 404)
///   or `TripFor(duration)` (open now for that long, such as a 503 with `Retry-After`).
/// - A panic in the body counts as a failure, and the panic goes on.
/// - A future that is dropped before it finishes (a cancelled call) counts as neither.
///
/// ```
/// use std::time::Duration;
/// use breakerbox::{Outcome, circuit_breaker};
///
/// pub struct Response {
///     pub status: u16,
///     pub retry_after: Option<Duration>,
/// }
///
/// fn by_status(response: &Response) -> Outcome {
///     match (response.status, response.retry_after) {
///         (503, Some(pause)) => Outcome::TripFor(pause),
///         (404, _) => Outcome::Ignored,
///         (500.., _) => Outcome::Failure,
///         _ => Outcome::Success,
///     }
/// }
///
/// fn offline(_path: &str) -> Response {
///     Response { status: 503, retry_after: None }
/// }
///
/// #[circuit_breaker(name = "doc-http", classify = by_status, fallback = offline)]
/// fn get(path: &str) -> Response {
///     Response { status: if path == "/missing" { 404 } else { 200 }, retry_after: None }
/// }
/// # assert_eq!(get("/").status, 200);
/// ```
///
/// # Functions
///
/// Sync and `async` functions; free functions, associated functions and methods taking
/// `self`, `&self`, `&mut self` or `self: Arc<Self>`; methods in trait impls (including
/// native `async fn` in traits) and default method bodies; generics, lifetimes and
/// where-clauses; `impl Trait` arguments and return types; `unsafe fn`. The body keeps its
/// meaning: `?` and `return` work as before, and results may borrow from the arguments.
/// One exception: a plain `fn`'s body runs in a closure, so under `#[track_caller]`
/// `Location::caller()` (and an `unwrap`'s panic message) in the body names the body's
/// own line, not its caller's.
///
/// The function's signature, attributes, docs and lints are left as they are; only the
/// statements of its body are wrapped. `const fn`, `extern` functions (but for `extern
/// "Rust"`, the ABI of every Rust function), functions declared in `extern` blocks, variadic
/// functions and functions that return a future without being `async` (such as `#[async_trait]`
/// output, which would be judged when the future is created rather than when it finishes;
/// written `impl Future` or `Pin<Box<dyn Future>>`, or behind an alias such as `BoxFuture`)
/// are rejected with an error.
///
/// Functions with one `name` share one breaker, wherever they are. The default name is the
/// module path and the function's name, so two methods with the same name in one module
/// (in different `impl` blocks) share a breaker unless one is given a `name`. The breaker
/// has its attribute's config (with two attributes, the first by file and line), whoever
/// creates it. Each call takes its own permit, so a function that calls itself (or another
/// function of its breaker) takes one per level: half-open with `half_open_calls = 1`, or at
/// `max_concurrent`, the inner call is rejected, and a function that always recurses and
/// passes the inner error on fails its own probe. A config registered beforehand with
/// `breakerbox::registry().configure(name, …)` replaces it whole; a config file
/// (`load_toml`) changes only the keys it names, over the attribute's (see
/// docs/configuration.md). Attributes that give one name different configs are a
/// mistake `breakerbox::registry().check()` reports at startup, with both lines:
///
/// ```
/// # use breakerbox::{Rejected, circuit_breaker, registry};
/// # #[derive(Debug)] pub struct Error;
/// # impl From<Rejected> for Error { fn from(_: Rejected) -> Self { Error } }
/// #[circuit_breaker(name = "doc-orders", failures = 3)]
/// fn read_order() -> Result<(), Error> {
///     Ok(())
/// }
///
/// #[circuit_breaker(name = "doc-orders", failures = 5)]
/// fn write_order() -> Result<(), Error> {
///     Ok(())
/// }
///
/// # #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))] {
/// let conflicts = registry().check().unwrap_err().to_string();
/// // circuit breaker 'doc-orders' is given different configs:
/// //   #[circuit_breaker] at src/main.rs:4: failures = 3
/// //   #[circuit_breaker] at src/main.rs:9: failures = 5
/// assert!(conflicts.contains("'doc-orders' is given different configs"), "{conflicts}");
/// assert_eq!(registry().get("doc-orders").unwrap().config().failures(), Some(3));
/// # }
/// ```
///
/// # Replay
///
/// With `replay = "memory"`, `replay = "disk"` or `replay = "fleet"` (feature `replay`), a call rejected while the
/// breaker is open (half-open and full, or forced open) is journaled with its arguments, and
/// the function returns its error built `From<Rejected>` as usual, the `Rejected` saying
/// `Rejected::journaled()`: answer "accepted" (HTTP 202). Once
/// the breaker closes, the journaled calls run the body again, through the breaker, oldest
/// first, `replay_rate` a second. The body is moved into a closure of the arguments, so the
/// function takes named, owned arguments, no `self` and no generic parameters of its own (an
/// associated function's body may name `Self` and its `impl`'s `'static` ones); each argument
/// must be `Clone + Send + 'static` (memory) or `Serialize + DeserializeOwned + Send +
/// 'static` (disk, fleet), a compile error at the argument otherwise. The replay starts at the
/// function's first call inside a tokio runtime (a disk journal's entries from the last run
/// replay from then). **Replay runs a call again, perhaps more than once: use it only for
/// calls that are safe to repeat.** `docs/replay.md` has the guarantees and the limits.
///
/// `replay = "fleet"` (features `replay` and `redis`) journals in the Redis of the fleet this
/// process runs (`breakerbox::fleet::Fleet::start`, started before the function's first call;
/// until one runs, calls are not journaled and each first call tries again): its URL, its TLS
/// CA, its prefix (`<prefix>:replay:`). Every instance of the fleet journals into the one
/// stream of the breaker's name, and each entry is replayed by exactly one instance, once its
/// breaker there closes; an instance that dies holding an entry leaves it to the others after
/// 30 s. `replay_rate` is each instance's: a fleet of three replays up to three times it.
///
/// # Per-key breakers
///
/// With `key = <expression>`, each distinct value of the expression gets its own breaker
/// with the attribute's config, so one failing host, tenant or shard opens only its own. The
/// expression is evaluated before the body, over the function's arguments (`self` included),
/// and must give something `AsRef<str>` (`&str`, `String`, …; for a number write
/// `key = id.to_string()`); anything else is a compile error at the expression. A key already
/// held is looked up as a `&str` without allocating; the lookup's borrows end before the
/// body runs, so the body may move the arguments. Fallbacks, `fallback_with_reason`,
/// `classify` and `timeout` work as without `key`.
///
/// The breakers form the keyed family `name` in the registry
/// (`breakerbox::registry().family::<String>(name, …)` returns it, and `families()` lists
/// it once the function has first been called; it is not one of `breakers()`). It is bounded
/// by `max_keys` and `idle_for`; see `breakerbox::BreakerMap`. A clock set with
/// `registry().set_clock(name, …)` before the first call applies to every key. A family of
/// that name made beforehand with another key type cannot be shared: the function then gets
/// a family of its own, outside the registry.
///
/// ```
/// # use breakerbox::{Rejected, State, circuit_breaker, registry};
/// # #[derive(Debug)] pub struct Error;
/// # impl From<Rejected> for Error { fn from(_: Rejected) -> Self { Error } }
/// #[circuit_breaker(name = "doc-hosts", key = host, failures = 1, max_keys = 1000)]
/// fn fetch(host: &str, up: bool) -> Result<(), Error> {
///     if up { Ok(()) } else { Err(Error) }
/// }
///
/// assert!(fetch("down.example", false).is_err());
/// assert!(fetch("up.example", true).is_ok());
/// let hosts = registry().family::<String>("doc-hosts", Default::default).unwrap();
/// assert_eq!(hosts.get("down.example").unwrap().state(), State::Open);
/// assert_eq!(hosts.get("up.example").unwrap().state(), State::Closed);
/// ```
///
/// # Equivalent code
///
/// ```
/// # use breakerbox::{Rejected, circuit_breaker};
/// # #[derive(Debug)] pub struct Error;
/// # impl From<Rejected> for Error { fn from(_: Rejected) -> Self { Error } }
/// # fn cached(_: u32) -> Result<u32, Error> { Ok(0) }
/// #[circuit_breaker(name = "users", failures = 3, open_for = "2s", fallback = cached)]
/// fn fetch(id: u32) -> Result<u32, Error> {
///     Ok(id)
/// }
/// ```
///
/// expands to about this (the helpers in `breakerbox::__private` are not public API; names
/// starting with `__breakerbox` are hygienic and cannot clash with the function's own):
///
/// ```ignore
/// fn fetch(id: u32) -> Result<u32, Error> {
///     // In the registrations the linker gathers (`#[linkme::distributed_slice]`).
///     __private::register! {
///         static __BREAKERBOX_REGISTRATION: Registration = Registration::new(
///             "users",
///             |config| config.failures(3u32).open_for(Duration::from_nanos(2000000000u64)),
///             file!(),
///             line!(),
///             column!(),
///         );
///     }
///     static __BREAKERBOX_BREAKER: Lazy<Breaker> = Lazy::new(|| {
///         // The registry's breaker for this registration, created with its config if needed
///         // (again at the next call if creating it panicked: a `OnceLock`, not a `LazyLock`).
///         __private::breaker(&__BREAKERBOX_REGISTRATION)
///     });
///     let __breakerbox_permit = match Breaker::try_acquire(&__BREAKERBOX_BREAKER) {
///         Ok(permit) => permit,
///         // Without a fallback: `return __private::reject(rejected)`, i.e.
///         // `Err(From::from(rejected))`. With `fallback_with_reason = cached`:
///         // `Err(rejected) => return cached(id, FallbackReason::Rejected(rejected))`.
///         Err(_) => return cached(id),
///     };
///     // The body, as a closure that is called once (`FnOnce`), so that it can move its
///     // arguments and return borrows of them. An `async fn` runs `async move { body }.await`
///     // instead; with `timeout`, inside `tokio::time::timeout`, for the breaker's timeout at
///     // that call (`breaker.config().timeout()`: the attribute's, or a file's over it). A
///     // call that runs out of time is recorded by `Permit::timed_out`: a failure, counted
///     // among the timeouts too.
///     let __breakerbox_once = __private::ForceFnOnce;
///     let __breakerbox_result = (move || -> Result<u32, Error> {
///         __private::ForceFnOnce::consume(__breakerbox_once);
///         Ok(id)
///     })();
///     // Recorded by value, so the result stays in registers: `Ok` is a success, `Err` a
///     // failure whose `Display` text, if it has one, is kept as the cause. With
///     // `classify = path`, `path(&result)` gives the outcome instead. A success is recorded
///     // inline for a closed breaker with a plain config, by one call otherwise.
///     match __breakerbox_result {
///         Ok(value) => {
///             __private::succeed(__breakerbox_permit);
///             Ok(value)
///         }
///         Err(error) => {
///             Permit::record_with(__breakerbox_permit, Outcome::Failure, cause_of(&error));
///             Err(error)
///         }
///     }
/// }
/// ```
///
/// A permit dropped without being recorded records a `Failure` if the thread is panicking
/// and `Ignored` otherwise, which is how panics and cancelled futures are counted.
///
/// # Renaming the crate
///
/// Generated code names `::breakerbox::__private::…`. If breakerbox is renamed in
/// `Cargo.toml`, or re-exported by another crate whose users do not depend on it directly,
/// say where it is with `crate`:
///
/// ```
/// // A library re-exporting breakerbox for its users.
/// mod my_framework {
///     pub use breakerbox;
/// }
///
/// # #[derive(Debug)] pub struct Error;
/// # impl From<breakerbox::Rejected> for Error { fn from(_: breakerbox::Rejected) -> Self { Error } }
/// #[my_framework::breakerbox::circuit_breaker(crate = "my_framework::breakerbox")]
/// fn call() -> Result<(), Error> {
///     Ok(())
/// }
/// # call().unwrap();
/// ```
#[proc_macro_attribute]
pub fn circuit_breaker(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into()).into()
}
