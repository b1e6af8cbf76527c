//! Alert on trips and recoveries: a registry listener posts a JSON notification to a chat
//! webhook (here a local axum endpoint standing in for one).
//!
//! Runs by itself on 127.0.0.1 and exits: `cargo run -p breakerbox-integration --example alerts`.
//!
//! Listeners run synchronously on the thread whose call changed the state, so they must not
//! block: this one only puts the event on a channel, and a task does the HTTP.

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::routing::post;
use breakerbox::{Config, Event, ManualClock, State, registry};
use serde_json::{Value, json};
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    // The "chat" webhook: prints each notification and hands it to `main`.
    let (received_tx, mut received) = mpsc::unbounded_channel::<Value>();
    let app = Router::new().route(
        "/hooks/breakers",
        post(move |Json(note): Json<Value>| async move {
            println!("webhook got: {}", note["text"].as_str().unwrap_or_default());
            let _ = received_tx.send(note);
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook = format!("http://{}/hooks/breakers", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The alert: open and forced-open are trips, closed is a recovery; half-open is noise.
    let (events_tx, mut events) = mpsc::unbounded_channel::<Event>();
    registry().on_state_change(move |event| {
        if matches!(event.to, State::Open | State::ForcedOpen | State::Closed) {
            // Never block in a listener: `send` on an unbounded channel does not.
            let _ = events_tx.send(event.clone());
        }
    });
    tokio::spawn(async move {
        // Local only: ignore any HTTP_PROXY of the environment.
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("a plain HTTP client");
        while let Some(event) = events.recv().await {
            let body = serde_json::to_vec(&notification(&event)).expect("JSON");
            let sent = http
                .post(&hook)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            if let Err(e) = sent {
                eprintln!("could not notify: {e}");
            }
        }
    });

    // A breaker that trips after 2 failures and probes after 10 s (of a manual clock).
    let clock = ManualClock::new();
    registry().set_clock("payments", clock.clone());
    let payments = registry().get_or_create("payments", || {
        Config::builder()
            .failures(2)
            .open_for(Duration::from_secs(10))
            .build()
            .expect("valid config")
    });
    // At startup: two attributes (or an attribute and a `get_or_create`) that give one name
    // different configs are reported here, each with its file and line.
    registry().check()?;
    let charge = |ok: bool| {
        let r = payments.call(|| {
            if ok {
                Ok(())
            } else {
                Err("card processor timed out")
            }
        });
        println!(
            "charge: {:?} -> breaker {}",
            r.map_err(|e| e.to_string()),
            payments.state()
        );
    };

    charge(true);
    charge(false);
    charge(false); // trips: notification 1
    charge(true); // rejected
    clock.advance(Duration::from_secs(10));
    charge(true); // the probe succeeds and closes: notification 2

    // No deadline: on a loaded machine the webhook may take its time (a failed post says so).
    for _ in 0..2 {
        let note = received.recv().await.ok_or("webhook closed")?;
        assert_eq!(note["breaker"], "payments");
    }
    println!("both notifications delivered");
    Ok(())
}

/// A chat message, with the event itself for machines.
fn notification(event: &Event) -> Value {
    let text = match event.to {
        State::Closed => format!(
            "✅ circuit breaker '{}' recovered ({})",
            event.name, event.reason
        ),
        _ => {
            let last = registry()
                .get(&event.name)
                .and_then(|b| b.last_failure())
                .map(|f| format!("; last failure: {f}"))
                .unwrap_or_default();
            format!(
                "🔴 circuit breaker '{}' is {}: {}{last}",
                event.name, event.to, event.reason
            )
        }
    };
    json!({ "text": text, "breaker": event.name, "event": event })
}
