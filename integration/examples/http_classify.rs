//! A reqwest client under `#[circuit_breaker]` whose calls are judged by HTTP status and
//! `Retry-After` (`breakerbox::http::HttpClassifier`), against a local axum server.
//!
//! Runs by itself on 127.0.0.1 and exits: `cargo run -p breakerbox-integration --example http_classify`.
//!
//! - 2xx is a success, 404 is ignored (the request was wrong, not the service), 5xx fails.
//! - 503 or 429 with `Retry-After` opens the breaker for that long, at most 60 s here.
//!
//! The breaker reads a `ManualClock` (registered before its first call), so the pauses pass
//! when the program says so: nothing sleeps.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::http::{HeaderName, StatusCode, header::RETRY_AFTER};
use axum::routing::get;
use breakerbox::http::HttpClassifier;
use breakerbox::{ManualClock, Outcome, RejectReason, Rejected, State, circuit_breaker, registry};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Local only: ignores any HTTP_PROXY of the environment.
static HTTP: LazyLock<reqwest::Client> = LazyLock::new(|| {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a plain HTTP client")
});

/// The defaults, with a server's `Retry-After` cut to a minute.
static OUTCOMES: HttpClassifier = HttpClassifier::new().max_retry_after(Duration::from_secs(60));

/// Judges a finished request: a response by its status and `Retry-After`, a transport error
/// (refused, reset) as a failure.
fn by_status(result: &Result<reqwest::Response, FetchError>) -> Outcome {
    match result {
        Ok(response) => OUTCOMES.outcome(response.status(), response.headers(), SystemTime::now()),
        Err(_) => Outcome::Failure,
    }
}

/// Why a request gave no response.
#[derive(Debug)]
enum FetchError {
    Http(reqwest::Error),
    Rejected(Rejected),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Http(e) => write!(f, "request failed: {e}"),
            FetchError::Rejected(r) => r.fmt(f),
        }
    }
}

impl From<reqwest::Error> for FetchError {
    fn from(e: reqwest::Error) -> Self {
        FetchError::Http(e)
    }
}

impl From<Rejected> for FetchError {
    fn from(r: Rejected) -> Self {
        FetchError::Rejected(r)
    }
}

/// GETs `url` through the breaker "quotes-http": three failures in a row open it for 10 s, a
/// `Retry-After` on a 429 or 503 for as long as the server asks (at most a minute).
#[circuit_breaker(name = "quotes-http", failures = 3, open_for = "10s", classify = by_status)]
async fn get_quote(url: &str) -> Result<reqwest::Response, FetchError> {
    Ok(HTTP.get(url).send().await?)
}

/// What the server does: 0 answers, 1 is a 503 asking for 30 s, 2 a 429 asking for an hour,
/// 3 a plain 500.
static MODE: AtomicU8 = AtomicU8::new(0);

async fn quote() -> (StatusCode, [(HeaderName, &'static str); 1], &'static str) {
    let cache = axum::http::header::CACHE_CONTROL;
    match MODE.load(Ordering::Relaxed) {
        0 => (
            StatusCode::OK,
            [(cache, "no-store")],
            "'Fail fast, recover faster.'",
        ),
        1 => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(RETRY_AFTER, "30")],
            "maintenance",
        ),
        2 => (
            StatusCode::TOO_MANY_REQUESTS,
            [(RETRY_AFTER, "3600")],
            "slow down",
        ),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(cache, "no-store")],
            "oops",
        ),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let app = Router::new()
        .route("/quote", get(quote))
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Before the breaker's first call: its clock, and a line for each state change.
    let clock = ManualClock::new();
    registry().set_clock("quotes-http", clock.clone());
    registry().on_state_change(|e| {
        println!(
            "    breaker '{}': {} -> {} ({})",
            e.name, e.from, e.to, e.reason
        );
    });
    let quote_url = format!("{base}/quote");
    let call = |url: String| async move {
        match get_quote(&url).await {
            Ok(response) => {
                let status = response.status();
                println!("  {status}: {}", response.text().await.unwrap_or_default());
                None
            }
            Err(FetchError::Rejected(r)) => {
                println!("  rejected: {r}");
                Some(r)
            }
            Err(e) => {
                println!("  error: {e}");
                None
            }
        }
    };

    println!("the server answers; a 404 says nothing about its health");
    call(quote_url.clone()).await;
    call(format!("{base}/missing")).await;
    // Made by the first call, with the attribute's config.
    let breaker = registry().get("quotes-http").ok_or("no breaker")?;
    assert_eq!(breaker.metrics().ignored, 1);

    println!("the server is down for maintenance: 503, Retry-After: 30");
    MODE.store(1, Ordering::Relaxed);
    call(quote_url.clone()).await; // one 503 is enough: the server said how long
    let rejected = call(quote_url.clone())
        .await
        .ok_or("expected a rejection")?;
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(30)));

    println!("(30 s pass on the breaker's clock)");
    clock.advance(Duration::from_secs(30));
    MODE.store(0, Ordering::Relaxed);
    call(quote_url.clone()).await; // the probe succeeds: closed
    assert_eq!(breaker.state(), State::Closed);

    println!("the server throttles: 429, Retry-After: 3600 (an hour, capped to a minute)");
    MODE.store(2, Ordering::Relaxed);
    call(quote_url.clone()).await;
    let rejected = call(quote_url.clone())
        .await
        .ok_or("expected a rejection")?;
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(60)));

    println!("(60 s pass on the breaker's clock) the server fails: 500, no Retry-After");
    clock.advance(Duration::from_secs(60));
    MODE.store(3, Ordering::Relaxed);
    for _ in 0..3 {
        call(quote_url.clone()).await; // the probe fails: open again for `open_for`
    }

    println!("(10 s pass on the breaker's clock) the server is back");
    clock.advance(Duration::from_secs(10));
    MODE.store(0, Ordering::Relaxed);
    call(quote_url.clone()).await;

    let m = breaker.metrics();
    println!(
        "quotes-http: {} calls, {} successes, {} failures, {} ignored, {} rejected, opened {} times, now {}",
        m.calls, m.successes, m.failures, m.ignored, m.rejected, m.times_opened, m.state
    );
    assert_eq!(m.state, State::Closed);
    assert_eq!(m.times_opened, 3);
    Ok(())
}
