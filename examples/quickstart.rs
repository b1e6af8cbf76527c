//! A flaky client behind `#[circuit_breaker]`: it trips, the fallback answers, a probe goes
//! through after `open_for`, and the breaker recovers.
//!
//! No network and no waiting: the "service" is a flag, and the breaker reads a manual clock
//! that the example moves forward.
//!
//! ```sh
//! cargo run --example quickstart
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use breakerbox::{ManualClock, Rejected, circuit_breaker, registry};

/// Whether the pretend quote service answers.
static SERVICE_UP: AtomicBool = AtomicBool::new(true);

#[derive(Debug)]
enum FetchError {
    Unavailable,
    Rejected(Rejected),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Unavailable => f.write_str("quote service unavailable"),
            FetchError::Rejected(rejected) => rejected.fmt(f),
        }
    }
}

impl std::error::Error for FetchError {}

// Without a fallback, rejected calls would come back as `FetchError::Rejected`.
impl From<Rejected> for FetchError {
    fn from(rejected: Rejected) -> Self {
        FetchError::Rejected(rejected)
    }
}

/// The flaky client: three failures in a row open the breaker for five seconds; while it is
/// open, `cached_quote` answers with the same argument.
#[circuit_breaker(name = "quotes", failures = 3, open_for = "5s", fallback = cached_quote)]
fn fetch_quote(symbol: &str) -> Result<String, FetchError> {
    if SERVICE_UP.load(Ordering::Relaxed) {
        Ok(format!("{symbol} 101.25 (live)"))
    } else {
        Err(FetchError::Unavailable)
    }
}

fn cached_quote(symbol: &str) -> Result<String, FetchError> {
    Ok(format!("{symbol} 100.00 (cached)"))
}

fn call(symbol: &str) {
    match fetch_quote(symbol) {
        Ok(quote) => println!("  fetch_quote({symbol:?}) -> {quote}"),
        Err(error) => println!("  fetch_quote({symbol:?}) -> error: {error}"),
    }
}

fn main() {
    // Before the breaker exists: make it read a clock we control, and print every state
    // change of every breaker.
    let clock = ManualClock::new();
    registry().set_clock("quotes", clock.clone());
    registry().on_state_change(|event| {
        println!(
            "  ** breaker '{}': {} -> {} ({})",
            event.name, event.from, event.to, event.reason
        );
    });

    // At startup: two attributes (or an attribute and a `get_or_create`) that give one name
    // different configs are reported here, each with its file and line.
    if let Err(conflicts) = registry().check() {
        panic!("{conflicts}");
    }

    println!("The service is up: calls run.");
    call("ACME");
    call("INIT");

    println!("\nThe service goes down: three failures in a row open the breaker.");
    SERVICE_UP.store(false, Ordering::Relaxed);
    for _ in 0..3 {
        call("ACME");
    }

    println!("\nOpen: calls do not reach the service; the fallback answers.");
    call("ACME");
    call("INIT");

    println!("\n5s later: one probe goes through. The service is still down, so it opens again.");
    clock.advance(Duration::from_secs(5));
    call("ACME");
    call("ACME");

    println!("\nThe service recovers. 5s later the probe succeeds and the breaker closes.");
    SERVICE_UP.store(true, Ordering::Relaxed);
    clock.advance(Duration::from_secs(5));
    call("ACME");
    call("INIT");

    let breaker = registry().get("quotes").expect("created by the first call");
    let metrics = breaker.metrics();
    println!(
        "\nBreaker '{}' is {}: {} successes, {} failures, {} rejected (answered by the fallback), opened {} times.",
        breaker.name(),
        breaker.state(),
        metrics.successes,
        metrics.failures,
        metrics.rejected,
        metrics.times_opened
    );
}
