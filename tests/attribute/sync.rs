//! `#[circuit_breaker]` on synchronous functions and methods, end to end.
//!
//! Every test uses its own breaker name (tests run in parallel in one process) and a
//! `ManualClock` registered for that name before the first call, so nothing sleeps.

use std::cell::Cell;
use std::time::Duration;

use crate::support::{ApiError, manual_clock, state};
use breakerbox::{Outcome, State, circuit_breaker, registry};

thread_local! {
    static UP: Cell<bool> = const { Cell::new(true) };
    static RAN: Cell<u32> = const { Cell::new(0) };
}

fn set_up(up: bool) {
    UP.with(|u| u.set(up));
}

fn ran() -> u32 {
    RAN.with(Cell::get)
}

#[circuit_breaker(name = "sync-trip", failures = 3, open_for = "10s")]
fn flaky(id: u32) -> Result<u32, ApiError> {
    RAN.with(|r| r.set(r.get() + 1));
    if UP.with(Cell::get) {
        Ok(id)
    } else {
        Err(ApiError::Down)
    }
}

#[test]
fn trips_after_failures_rejects_then_probes_and_closes() {
    let clock = manual_clock("sync-trip");
    set_up(false);
    for _ in 0..3 {
        assert!(matches!(flaky(1), Err(ApiError::Down)));
    }
    assert_eq!(state("sync-trip"), State::Open);

    // Open: rejected without running the body, through `From<Rejected>`.
    let before = ran();
    match flaky(1) {
        Err(ApiError::Rejected(rejected)) => {
            assert_eq!(rejected.name(), "sync-trip");
            assert_eq!(rejected.retry_after(), Some(Duration::from_secs(10)));
            // The error's `Display` was kept as the cause.
            assert_eq!(rejected.last_failure().as_deref(), Some("service down"));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(ran(), before);

    // After open_for, one probe goes through; it succeeds and closes the breaker.
    clock.advance(Duration::from_secs(10));
    set_up(true);
    assert_eq!(flaky(7).unwrap(), 7);
    assert_eq!(ran(), before + 1);
    assert_eq!(state("sync-trip"), State::Closed);
    let metrics = registry().get("sync-trip").unwrap().metrics();
    assert_eq!(
        (metrics.failures, metrics.rejected, metrics.successes),
        (3, 1, 1)
    );
}

/// An error type without `Display`: its failures count, and keep no message.
#[derive(Debug)]
enum Opaque {
    Down,
    Rejected,
}

impl From<breakerbox::Rejected> for Opaque {
    fn from(_: breakerbox::Rejected) -> Self {
        Opaque::Rejected
    }
}

#[circuit_breaker(name = "sync-opaque-error", failures = 2, open_for = "10s")]
fn opaque() -> Result<u32, Opaque> {
    Err(Opaque::Down)
}

#[test]
fn an_error_without_display_trips_the_breaker_and_keeps_no_message() {
    let _clock = manual_clock("sync-opaque-error");
    for _ in 0..2 {
        assert!(matches!(opaque(), Err(Opaque::Down)));
    }
    assert_eq!(state("sync-opaque-error"), State::Open);
    assert!(matches!(opaque(), Err(Opaque::Rejected)));
    let breaker = registry().get("sync-opaque-error").unwrap();
    assert_eq!(breaker.last_failure(), None);
    let metrics = breaker.metrics();
    assert_eq!((metrics.failures, metrics.rejected), (2, 1));
}

fn cached_price(item: &str) -> Result<u32, ApiError> {
    Ok(u32::try_from(item.len()).unwrap_or(0) * 100)
}

#[circuit_breaker(name = "sync-fallback", failures = 2, open_for = "1m", fallback = cached_price)]
fn price(item: &str) -> Result<u32, ApiError> {
    if UP.with(Cell::get) {
        Ok(1)
    } else {
        Err(ApiError::Down)
    }
}

#[test]
fn fallback_answers_while_open_and_failed_probe_reopens() {
    let clock = manual_clock("sync-fallback");
    set_up(false);
    assert!(price("tea").is_err());
    assert!(price("tea").is_err());
    assert_eq!(state("sync-fallback"), State::Open);
    // While open the fallback answers, with the same arguments.
    assert_eq!(price("tea").unwrap(), 300);
    assert_eq!(price("coffee").unwrap(), 600);

    // A failed probe opens it again.
    clock.advance(Duration::from_secs(60));
    assert!(matches!(price("tea"), Err(ApiError::Down)));
    assert_eq!(state("sync-fallback"), State::Open);
    assert_eq!(price("tea").unwrap(), 300);

    clock.advance(Duration::from_secs(60));
    set_up(true);
    assert_eq!(price("tea").unwrap(), 1);
    assert_eq!(state("sync-fallback"), State::Closed);
}

#[circuit_breaker(
    name = "sync-rounds",
    failures = 1,
    open_for = "5s",
    half_open_calls = 2,
    successes = 2
)]
fn needs_two(up: bool) -> Result<(), ApiError> {
    if up { Ok(()) } else { Err(ApiError::Down) }
}

#[test]
fn closes_only_after_the_configured_successes() {
    let clock = manual_clock("sync-rounds");
    assert!(needs_two(false).is_err());
    assert_eq!(state("sync-rounds"), State::Open);
    clock.advance(Duration::from_secs(5));
    assert!(needs_two(true).is_ok());
    assert_eq!(state("sync-rounds"), State::HalfOpen);
    assert!(needs_two(true).is_ok());
    assert_eq!(state("sync-rounds"), State::Closed);
}

/// A client with methods of every receiver kind.
struct Client {
    up: bool,
    calls: u32,
}

impl Client {
    fn offline(&self, id: u32) -> Result<String, ApiError> {
        Ok(format!("offline {id}"))
    }

    #[circuit_breaker(name = "sync-method", failures = 2, open_for = "1s", fallback = Self::offline)]
    fn get(&self, id: u32) -> Result<String, ApiError> {
        if self.up {
            Ok(format!("user {id}"))
        } else {
            Err(ApiError::Down)
        }
    }

    #[circuit_breaker(name = "sync-method-mut", failures = 1)]
    fn bump(&mut self) -> Result<u32, ApiError> {
        self.calls += 1;
        if self.up {
            Ok(self.calls)
        } else {
            Err(ApiError::Down)
        }
    }

    #[circuit_breaker(name = "sync-method-owned", failures = 1)]
    fn into_calls(self) -> Result<u32, ApiError> {
        Ok(self.calls)
    }
}

#[test]
fn methods() {
    let clock = manual_clock("sync-method");
    let mut client = Client {
        up: false,
        calls: 0,
    };
    assert!(client.get(1).is_err());
    assert!(client.get(1).is_err());
    assert_eq!(client.get(1).unwrap(), "offline 1");
    clock.advance(Duration::from_secs(1));
    client.up = true;
    assert_eq!(client.get(2).unwrap(), "user 2");
    assert_eq!(state("sync-method"), State::Closed);

    assert_eq!(client.bump().unwrap(), 1);
    client.up = false;
    assert!(matches!(client.bump(), Err(ApiError::Down)));
    assert!(matches!(client.bump(), Err(ApiError::Rejected(_))));
    assert_eq!(client.calls, 2, "the rejected call did not run");
    assert_eq!(client.into_calls().unwrap(), 2);
}

#[circuit_breaker(name = "sync-shared", failures = 2, open_for = "1m")]
fn shared_read() -> Result<(), ApiError> {
    Err(ApiError::Down)
}

#[circuit_breaker(name = "sync-shared", failures = 2, open_for = "1m")]
fn shared_write() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn two_functions_with_one_name_share_a_breaker() {
    manual_clock("sync-shared");
    assert!(shared_read().is_err());
    assert!(shared_read().is_err());
    // The other function's calls are rejected too: one breaker.
    assert!(matches!(shared_write(), Err(ApiError::Rejected(_))));
    assert_eq!(registry().get("sync-shared").unwrap().metrics().rejected, 1);
}

enum Response {
    Ok,
    NotFound,
    Unavailable { retry_after: Duration },
}

fn classify_response(result: &Result<Response, ApiError>) -> Outcome {
    match result {
        Ok(Response::Ok) => Outcome::Success,
        Ok(Response::NotFound) | Err(ApiError::NotFound) => Outcome::Ignored,
        Ok(Response::Unavailable { retry_after }) | Err(ApiError::Busy { retry_after }) => {
            Outcome::TripFor(*retry_after)
        }
        Err(_) => Outcome::Failure,
    }
}

#[circuit_breaker(name = "sync-classify", failures = 2, open_for = "1m", classify = classify_response)]
fn http(response: Result<Response, ApiError>) -> Result<Response, ApiError> {
    response
}

#[test]
fn classify_ignores_and_trips_for() {
    let clock = manual_clock("sync-classify");
    for _ in 0..5 {
        assert!(http(Ok(Response::NotFound)).is_ok());
        assert!(http(Err(ApiError::NotFound)).is_err());
    }
    assert_eq!(state("sync-classify"), State::Closed);
    let metrics = registry().get("sync-classify").unwrap().metrics();
    assert_eq!((metrics.ignored, metrics.failures), (10, 0));

    // A 503 with Retry-After opens it at once, for that long instead of `open_for`.
    let unavailable = Response::Unavailable {
        retry_after: Duration::from_secs(3),
    };
    assert!(http(Ok(unavailable)).is_ok());
    assert_eq!(state("sync-classify"), State::Open);
    assert!(matches!(http(Ok(Response::Ok)), Err(ApiError::Rejected(_))));
    clock.advance(Duration::from_secs(3));
    assert!(matches!(http(Ok(Response::Ok)), Ok(Response::Ok)));
    assert_eq!(state("sync-classify"), State::Closed);

    // The same from an error: a busy service opens it for as long as it asks.
    let busy = ApiError::Busy {
        retry_after: Duration::from_secs(7),
    };
    assert!(http(Err(busy)).is_err());
    let rejected = match http(Ok(Response::Ok)) {
        Err(ApiError::Rejected(rejected)) => rejected,
        _ => panic!("expected a rejection"),
    };
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(7)));
}

fn classify_u32(n: &u32) -> Outcome {
    if *n == 0 {
        Outcome::Failure
    } else {
        Outcome::Success
    }
}

fn zero_fallback(_n: u32) -> u32 {
    42
}

/// Any return type works with `classify` and `fallback`.
#[circuit_breaker(name = "sync-plain", failures = 1, classify = classify_u32, fallback = zero_fallback)]
fn plain(n: u32) -> u32 {
    n
}

#[test]
fn plain_return_type_with_classify_and_fallback() {
    manual_clock("sync-plain");
    assert_eq!(plain(5), 5);
    assert_eq!(plain(0), 0);
    assert_eq!(plain(5), 42);
}

fn stale_total(_n: u32) -> u32 {
    7
}

/// With a fallback, a plain return type needs no `classify`: a call that returns succeeds,
/// one that panics fails.
#[circuit_breaker(name = "sync-plain-default", failures = 2, fallback = stale_total)]
fn plain_total(n: u32) -> u32 {
    assert!(n != 0, "cannot total zero");
    n * 10
}

#[test]
fn plain_return_type_with_fallback_counts_returns_as_successes_and_panics_as_failures() {
    manual_clock("sync-plain-default");
    assert_eq!(plain_total(1), 10);
    assert!(std::panic::catch_unwind(|| plain_total(0)).is_err());
    assert_eq!(plain_total(2), 20, "a success broke the streak");
    assert!(std::panic::catch_unwind(|| plain_total(0)).is_err());
    assert!(std::panic::catch_unwind(|| plain_total(0)).is_err());
    assert_eq!(state("sync-plain-default"), State::Open);
    assert_eq!(plain_total(3), 7, "the fallback answers while open");
    let m = registry().get("sync-plain-default").unwrap().metrics();
    assert_eq!((m.successes, m.failures, m.rejected), (2, 3, 1));
}

#[circuit_breaker(name = "sync-panic", failures = 1)]
fn panics(yes: bool) -> Result<(), ApiError> {
    assert!(!yes, "boom");
    Ok(())
}

#[test]
fn a_panic_counts_as_a_failure_and_resumes() {
    manual_clock("sync-panic");
    let caught = std::panic::catch_unwind(|| panics(true));
    assert!(caught.is_err(), "the panic resumed");
    assert_eq!(state("sync-panic"), State::Open);
    assert!(matches!(panics(false), Err(ApiError::Rejected(_))));
}

#[circuit_breaker(name = "sync-question-mark", failures = 1)]
fn parse_sum(a: &str, b: &str) -> Result<u64, ApiError> {
    let a: u64 = a.parse().map_err(|_| ApiError::NotFound)?;
    if a == 0 {
        return Ok(0);
    }
    let b: u64 = b.parse().map_err(|_| ApiError::NotFound)?;
    Ok(a + b)
}

#[test]
fn question_mark_and_early_return_keep_their_meaning() {
    manual_clock("sync-question-mark");
    assert_eq!(parse_sum("0", "x").unwrap(), 0);
    assert_eq!(parse_sum("1", "2").unwrap(), 3);
    assert!(matches!(parse_sum("1", "x"), Err(ApiError::NotFound)));
    assert!(matches!(parse_sum("1", "2"), Err(ApiError::Rejected(_))));
}

#[circuit_breaker(name = "sync-default-name-check")]
fn named_by_path() -> Result<(), ApiError> {
    Ok(())
}

#[circuit_breaker]
fn default_name() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn default_name_is_module_path_and_fn_name() {
    named_by_path().unwrap();
    default_name().unwrap();
    let name = concat!(module_path!(), "::default_name");
    assert!(registry().get(name).is_some(), "no breaker named {name}");
}

/// Names kept in one place, so that functions sharing a breaker cannot drift apart.
mod names {
    pub const INVENTORY: &str = "sync-shared-const";
}

#[circuit_breaker(name = names::INVENTORY, failures = 1)]
fn inventory_read() -> Result<(), ApiError> {
    Err(ApiError::Down)
}

#[circuit_breaker(name = names::INVENTORY, failures = 1)]
fn inventory_write() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn a_name_constant_shares_a_breaker() {
    manual_clock(names::INVENTORY);
    assert!(matches!(inventory_read(), Err(ApiError::Down)));
    assert!(matches!(inventory_write(), Err(ApiError::Rejected(_))));
}

#[allow(non_snake_case)]
#[circuit_breaker]
fn r#match() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn a_raw_identifier_is_named_without_r_hash() {
    r#match().unwrap();
    assert!(registry().get(concat!(module_path!(), "::match")).is_some());
}

// ---------------------------------------------------------------------------------------------
// `fallback_with_reason`: the fallback is told why it answers.

/// What `why` answered: the body ran, or the fallback answered for this request and reason.
#[derive(Debug, PartialEq)]
enum Answer {
    Ran,
    FellBack(u32, breakerbox::RejectReason, Option<Duration>),
}

/// Gets the function's argument, then the reason.
fn explain(request: u32, reason: breakerbox::FallbackReason) -> Result<Answer, ApiError> {
    let rejected = reason
        .rejected()
        .expect("a sync call is only ever rejected");
    assert_eq!(reason.name(), "sync-fallback-reason");
    assert!(reason.timed_out().is_none());
    assert_eq!(reason.to_string(), rejected.to_string());
    Ok(Answer::FellBack(
        request,
        rejected.reason(),
        rejected.retry_after(),
    ))
}

const OK: u32 = 0;
const FAIL: u32 = 1;
/// Calls `why(OK)` from inside the body, while this call holds its permit.
const NESTED: u32 = 2;

#[circuit_breaker(
    name = "sync-fallback-reason",
    failures = 1,
    open_for = "5s",
    max_concurrent = 1,
    fallback_with_reason = explain
)]
fn why(request: u32) -> Result<Answer, ApiError> {
    match request {
        FAIL => Err(ApiError::Down),
        NESTED => why(OK),
        _ => Ok(Answer::Ran),
    }
}

#[test]
fn fallback_with_reason_tells_each_rejection_apart() {
    use breakerbox::RejectReason::{BulkheadFull, ForcedOpen, HalfOpenFull, Open};
    let clock = manual_clock("sync-fallback-reason");
    assert_eq!(why(OK).unwrap(), Answer::Ran);
    // Closed, with the one place taken by the outer call.
    assert_eq!(
        why(NESTED).unwrap(),
        Answer::FellBack(OK, BulkheadFull, None)
    );
    // Open.
    assert!(matches!(why(FAIL), Err(ApiError::Down)));
    let secs = |s| Some(Duration::from_secs(s));
    assert_eq!(why(OK).unwrap(), Answer::FellBack(OK, Open, secs(5)));
    clock.advance(Duration::from_secs(2));
    assert_eq!(why(FAIL).unwrap(), Answer::FellBack(FAIL, Open, secs(3)));
    // Half-open, with the one probe taken by the outer call, whose success closes it.
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        why(NESTED).unwrap(),
        Answer::FellBack(OK, HalfOpenFull, None)
    );
    assert_eq!(state("sync-fallback-reason"), State::Closed);
    // Forced open.
    registry().get("sync-fallback-reason").unwrap().force_open();
    assert_eq!(
        why(NESTED).unwrap(),
        Answer::FellBack(NESTED, ForcedOpen, None)
    );
}

/// A method's fallback gets `self`, the arguments, then the reason.
struct Catalog {
    stale: &'static str,
}

impl Catalog {
    #[circuit_breaker(name = "sync-fallback-reason-method", fallback_with_reason = Self::stale)]
    fn item(&self, id: u32) -> Result<String, ApiError> {
        Ok(format!("item {id}"))
    }

    fn stale(&self, id: u32, reason: breakerbox::FallbackReason) -> Result<String, ApiError> {
        Ok(format!("{} {id}: {reason}", self.stale))
    }
}

#[test]
fn a_methods_fallback_with_reason_gets_self_the_arguments_and_the_reason() {
    let catalog = Catalog { stale: "stale" };
    assert_eq!(catalog.item(1).unwrap(), "item 1");
    registry()
        .get("sync-fallback-reason-method")
        .unwrap()
        .force_open();
    assert_eq!(
        catalog.item(2).unwrap(),
        "stale 2: circuit breaker 'sync-fallback-reason-method' is forced open"
    );
}
