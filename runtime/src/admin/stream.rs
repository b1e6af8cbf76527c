//! `GET /events`: server-sent events of state changes and per-second metrics.
//!
//! One registry-wide listener, installed by the first router, sends each change to a tokio
//! broadcast channel. Sending never waits: the channel is a ring of [`CAPACITY`] events, and a
//! subscriber that falls further behind loses the oldest and is told how many (`dropped`).

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Once, OnceLock};

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use core::convert::Infallible;
use core::time::Duration;
use futures_util::future::{Either, select};
use serde::Serialize;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::view::{self, BreakerView, FamilyView};
use crate::event::Event;
use crate::registry::registry;

/// Events a subscriber may fall behind by before it loses the oldest.
pub(crate) const CAPACITY: usize = 1024;

/// How often the stream sends metrics.
const TICK: Duration = Duration::from_secs(1);

fn sender() -> &'static broadcast::Sender<Arc<Event>> {
    static SENDER: OnceLock<broadcast::Sender<Arc<Event>>> = OnceLock::new();
    SENDER.get_or_init(|| broadcast::channel(CAPACITY).0)
}

/// Installs the registry-wide listener, once per process.
pub(crate) fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let tx = sender().clone();
        registry().on_state_change(move |event| {
            // Never waits: a full ring overwrites its oldest event (the lagging subscriber is
            // told), and with no subscriber the event is not even copied.
            if tx.receiver_count() > 0 {
                let _ = tx.send(Arc::new(event.clone()));
            }
        });
    });
}

/// `GET /events`.
pub(crate) async fn events() -> Response {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let subscriber = Subscriber {
        rx: sender().subscribe(),
        tick,
        last: None,
        dropped: 0,
    };
    let stream = futures_util::stream::unfold(subscriber, |mut s| async move {
        let event = s.next().await;
        Some((Ok::<_, Infallible>(event), s))
    });
    Sse::new(stream).into_response()
}

/// One client of the stream.
struct Subscriber {
    rx: broadcast::Receiver<Arc<Event>>,
    tick: Interval,
    /// The previous tick's time and totals by breaker name, for the rates per second.
    last: Option<(Instant, HashMap<String, Totals>)>,
    /// Events this client lost by lagging.
    dropped: u64,
}

/// A breaker's totals at one tick.
#[derive(Clone, Copy)]
struct Totals {
    calls: u64,
    failures: u64,
    slow: u64,
    rejected: u64,
}

/// Rates per second since the previous tick.
#[derive(Serialize)]
struct PerSecond {
    calls: f64,
    failures: f64,
    slow: f64,
    rejected: f64,
}

#[derive(Serialize)]
struct Tick {
    breakers: Vec<TickBreaker>,
    families: Vec<FamilyView>,
    /// Events this client lost by lagging, in all.
    dropped: u64,
}

#[derive(Serialize)]
struct TickBreaker {
    #[serde(flatten)]
    view: BreakerView,
    /// `null` on the first tick.
    per_second: Option<PerSecond>,
}

/// A state change with its reason in words.
#[derive(Serialize)]
struct StateChange<'a> {
    #[serde(flatten)]
    event: &'a Event,
    why: String,
}

impl Subscriber {
    /// The next event for the client: the tick if one is due, else a state change if one is
    /// waiting, else whichever comes first. The tick is asked first: asked second, it lost to
    /// every waiting change, and a steady stream of changes (a flapping breaker, a slow client
    /// whose ring stays full) held the `metrics` events back for as long as it lasted.
    async fn next(&mut self) -> SseEvent {
        // The futures borrow the receiver and the interval: done with them before the answer.
        let woke = {
            let tick = pin!(self.tick.tick());
            let recv = pin!(self.rx.recv());
            match select(tick, recv).await {
                Either::Left(_) => None,
                Either::Right((received, _)) => Some(received),
            }
        };
        match woke {
            Some(Ok(event)) => state_event(&event),
            Some(Err(RecvError::Lagged(n))) => {
                self.dropped += n;
                SseEvent::default()
                    .event("dropped")
                    .data(format!("{{\"dropped\":{n}}}"))
            }
            // The sender lives in a static and never closes; were it to, ticks go on alone.
            Some(Err(RecvError::Closed)) => {
                self.tick.tick().await;
                self.metrics()
            }
            None => self.metrics(),
        }
    }

    /// Every breaker's view with its rates since the previous tick.
    fn metrics(&mut self) -> SseEvent {
        let now = Instant::now();
        let views = view::breakers(true);
        let mut totals = HashMap::with_capacity(views.len());
        let mut breakers = Vec::with_capacity(views.len());
        for v in views {
            let m = &v.metrics;
            let t = Totals {
                calls: m.calls,
                failures: m.failures,
                slow: m.slow,
                rejected: m.rejected,
            };
            let per_second = self.last.as_ref().and_then(|(then, before)| {
                let secs = now.duration_since(*then).as_secs_f64();
                let b = before.get(&v.name)?;
                (secs > 0.0).then(|| PerSecond {
                    calls: t.calls.saturating_sub(b.calls) as f64 / secs,
                    failures: t.failures.saturating_sub(b.failures) as f64 / secs,
                    slow: t.slow.saturating_sub(b.slow) as f64 / secs,
                    rejected: t.rejected.saturating_sub(b.rejected) as f64 / secs,
                })
            });
            totals.insert(v.name.clone(), t);
            breakers.push(TickBreaker {
                view: v,
                per_second,
            });
        }
        self.last = Some((now, totals));
        let tick = Tick {
            breakers,
            families: view::families(),
            dropped: self.dropped,
        };
        data("metrics", &tick)
    }
}

fn state_event(event: &Event) -> SseEvent {
    data(
        "state",
        &StateChange {
            event,
            why: event.reason.to_string(),
        },
    )
}

fn data(name: &str, value: &impl Serialize) -> SseEvent {
    // Our views hold strings, numbers and maps with string keys only: they always serialize.
    let text = serde_json::to_string(value)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string());
    SseEvent::default().event(name).data(text)
}
