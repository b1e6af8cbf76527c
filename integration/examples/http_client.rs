//! A reqwest client function under `#[circuit_breaker]`, with a `timeout` and a fallback,
//! against a local axum server that fails, hangs and recovers on command.
//!
//! Runs by itself on 127.0.0.1 and exits: `cargo run -p breakerbox-integration --example http_client`.
//!
//! The breaker reads a `ManualClock` (registered before its first call), so its `open_for`
//! passes when the program says so; only the `timeout` waits, for real, 500 ms at a time,
//! because a real socket is on the other end.

use std::fmt;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use breakerbox::{ManualClock, Rejected, Timeout, circuit_breaker, registry};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Local only: ignores any HTTP_PROXY of the environment.
static HTTP: LazyLock<reqwest::Client> = LazyLock::new(|| {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a plain HTTP client")
});

/// Why a quote could not be fetched.
#[derive(Debug)]
enum QuoteError {
    Http(reqwest::Error),
    Status(StatusCode),
    Rejected(Rejected),
    Timeout(Timeout),
}

impl fmt::Display for QuoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuoteError::Http(e) => write!(f, "request failed: {e}"),
            QuoteError::Status(s) => write!(f, "server answered {s}"),
            QuoteError::Rejected(r) => r.fmt(f),
            QuoteError::Timeout(t) => t.fmt(f),
        }
    }
}

impl From<reqwest::Error> for QuoteError {
    fn from(e: reqwest::Error) -> Self {
        QuoteError::Http(e)
    }
}

// Needed only without a fallback; kept so the function can drop `fallback` and still compile.
impl From<Rejected> for QuoteError {
    fn from(r: Rejected) -> Self {
        QuoteError::Rejected(r)
    }
}

impl From<Timeout> for QuoteError {
    fn from(t: Timeout) -> Self {
        QuoteError::Timeout(t)
    }
}

/// Fetches a quote. Three failures in a row open the breaker for 10 s; a call that takes
/// longer than 5 s is cut short and counts as a failure; while open, and on a timeout, the
/// fallback answers instead.
#[circuit_breaker(
    name = "quotes",
    failures = 3,
    open_for = "10s",
    timeout = "5s",
    fallback = cached_quote
)]
async fn fetch_quote(base: &str) -> Result<String, QuoteError> {
    let resp = HTTP.get(format!("{base}/quote")).send().await?;
    if resp.status().is_server_error() {
        return Err(QuoteError::Status(resp.status()));
    }
    Ok(resp.text().await?)
}

/// The fallback: same arguments, same return type.
async fn cached_quote(_base: &str) -> Result<String, QuoteError> {
    Ok("(fallback) the last quote we had: 'Fail fast, recover faster.'".to_owned())
}

/// What the server does: 0 answers, 1 fails with 500, 2 hangs.
static MODE: AtomicU8 = AtomicU8::new(0);

async fn quote() -> Result<&'static str, StatusCode> {
    match MODE.load(Ordering::Relaxed) {
        0 => Ok("'Fail fast, recover faster.'"),
        1 => Err(StatusCode::INTERNAL_SERVER_ERROR),
        _ => {
            // Hang well past the client's timeout; the client gives up and drops the request.
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok("too late")
        }
    }
}

async fn set_mode(Path(mode): Path<String>) -> StatusCode {
    let m = match mode.as_str() {
        "up" => 0,
        "fail" => 1,
        "hang" => 2,
        _ => return StatusCode::BAD_REQUEST,
    };
    MODE.store(m, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let app = Router::new()
        .route("/quote", get(quote))
        .route("/control/{mode}", post(set_mode));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Before the breaker's first call: its clock, and a line for each state change.
    let clock = ManualClock::new();
    registry().set_clock("quotes", clock.clone());
    registry().on_state_change(|e| {
        println!(
            "    breaker '{}': {} -> {} ({})",
            e.name, e.from, e.to, e.reason
        );
    });

    // At startup: two attributes (or an attribute and a `get_or_create`) that give one name
    // different configs are reported here, each with its file and line.
    registry().check()?;

    let command = |mode: &'static str| {
        let req = HTTP.post(format!("{base}/control/{mode}"));
        async move {
            let status = req.send().await?.status();
            println!("server is now {mode:?} ({status})");
            Ok::<_, reqwest::Error>(())
        }
    };
    let call = || async {
        match fetch_quote(&base).await {
            Ok(quote) => println!("  ok:    {quote}"),
            Err(e) => println!("  error: {e}"),
        }
    };

    command("up").await?;
    call().await;
    call().await;

    command("fail").await?;
    for _ in 0..4 {
        call().await; // three 500s open the breaker; the fourth call gets the fallback
    }

    println!("(10 s pass on the breaker's clock)");
    clock.advance(Duration::from_secs(10));
    command("hang").await?;
    // tokio's clock stands still while nothing is ready and jumps to the next timer, so the
    // 5 s timeout passes at once, however loaded the machine is.
    tokio::time::pause();
    call().await; // the probe times out after 5 s: open again, the fallback answers
    tokio::time::resume();

    println!("(10 s pass on the breaker's clock)");
    clock.advance(Duration::from_secs(10));
    command("up").await?;
    call().await; // the probe succeeds: closed
    call().await;

    let m = registry().get("quotes").ok_or("no breaker")?.metrics();
    println!(
        "quotes: {} calls, {} successes, {} failures, {} rejected, opened {} times, now {}",
        m.calls, m.successes, m.failures, m.rejected, m.times_opened, m.state
    );
    assert_eq!(m.state, breakerbox::State::Closed);
    assert_eq!(m.times_opened, 2);
    Ok(())
}
