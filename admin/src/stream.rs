//! `GET /events`: server-sent events of state changes and per-second metrics.
//!
//! One registry-wide listener, installed by the first router, sends each change to a tokio
//! broadcast channel. Sending never waits: the channel is a ring of [`CAPACITY`] events, and a
//! subscriber that falls further behind loses the oldest and is told how many (`dropped`).
//!
//! A registry family's keys may change by the thousand at once (a wide outage), so their
//! changes are coalesced per family: between two flushes, the first [`KEY_CHANGES`] changes of
//! a family's keys are sent one by one, and the rest are counted and sent as one `keys` event
//! at the next flush. A subscriber's metrics tick flushes, at most every half [`TICK`].

use std::collections::{BTreeMap, HashMap};
use std::pin::pin;
use std::sync::{Arc, Mutex, Once, OnceLock};

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use core::convert::Infallible;
use core::time::Duration;
use futures_util::future::{Either, select};
use serde::Serialize;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::breakers::{self, BreakerView, FamilyView};
use crate::state::AdminState;
use breakerbox_runtime::{Event, registry};

/// Events a subscriber may fall behind by before it loses the oldest.
pub(crate) const CAPACITY: usize = 1024;

/// How often the stream sends metrics.
const TICK: Duration = Duration::from_secs(1);

/// Changes of one family's keys sent one by one between two flushes; the rest are coalesced.
pub(crate) const KEY_CHANGES: u32 = 20;

/// Keys a `keys` event names, the first whose changes it holds.
const KEYS_NAMED: usize = 10;

/// What the channel carries.
#[derive(Clone)]
enum Message {
    /// A state change, and the label of the token whose control made it.
    State(Arc<Event>, Option<String>),
    /// A family's key changes held back since the last flush.
    Keys(Arc<Coalesced>),
}

fn sender() -> &'static broadcast::Sender<Message> {
    static SENDER: OnceLock<broadcast::Sender<Message>> = OnceLock::new();
    SENDER.get_or_init(|| broadcast::channel(CAPACITY).0)
}

/// A family's key changes since the last flush: how many were sent, and those held back.
#[derive(Default)]
struct Window {
    sent: u32,
    held: Option<Coalesced>,
}

/// The `keys` event: a family's key changes held back since the last flush.
#[derive(Clone, Debug, Serialize)]
struct Coalesced {
    /// The family.
    name: String,
    /// Changes held back.
    changes: u64,
    /// Of those, how many entered each state, by the state's name.
    to: BTreeMap<String, u64>,
    /// The keys of the first changes held back (at most [`KEYS_NAMED`]; a key that changed
    /// twice is named twice).
    first_keys: Vec<String>,
    /// [`KEY_CHANGES`]: the changes sent one by one before these.
    limit: u32,
}

/// The coalescing state: by family, and when the last flush was.
struct Coalescer {
    families: BTreeMap<String, Window>,
    flushed: Option<Instant>,
}

fn coalescer() -> &'static Mutex<Coalescer> {
    static COALESCER: Mutex<Coalescer> = Mutex::new(Coalescer {
        families: BTreeMap::new(),
        flushed: None,
    });
    &COALESCER
}

/// Whether `event`, a registry family key's change, goes out on its own; if not, it is held
/// for the family's next `keys` event. No user code runs under the lock.
fn admit(event: &Event) -> bool {
    let mut c = coalescer().lock().unwrap_or_else(|e| e.into_inner());
    let window = c.families.entry(event.name.clone()).or_default();
    if window.sent < KEY_CHANGES {
        window.sent += 1;
        return true;
    }
    let held = window.held.get_or_insert_with(|| Coalesced {
        name: event.name.clone(),
        changes: 0,
        to: BTreeMap::new(),
        first_keys: Vec::new(),
        limit: KEY_CHANGES,
    });
    held.changes += 1;
    let to = serde_json::to_value(event.to)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    *held.to.entry(to).or_default() += 1;
    if held.first_keys.len() < KEYS_NAMED
        && let Some(key) = &event.key
    {
        held.first_keys.push(key.clone());
    }
    false
}

/// Sends what every family held back, and starts a new window, unless the last flush was less
/// than half a tick ago (several subscribers tick, each on its own schedule).
///
/// A last flush later than `now` was made on another runtime's clock (each tokio runtime with
/// paused time has its own, as in an application's tests): it says nothing about this one's
/// ticks, so it does not hold this flush back.
fn flush(now: Instant) {
    let held: Vec<Coalesced> = {
        let mut c = coalescer().lock().unwrap_or_else(|e| e.into_inner());
        if c.flushed.is_some_and(|then| {
            now.checked_duration_since(then)
                .is_some_and(|since| since < TICK / 2)
        }) {
            return;
        }
        c.flushed = Some(now);
        core::mem::take(&mut c.families)
            .into_values()
            .filter_map(|w| w.held)
            .collect()
    };
    for h in held {
        let _ = sender().send(Message::Keys(Arc::new(h)));
    }
}

/// Installs the registry-wide listener, once per process.
pub(crate) fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let tx = sender().clone();
        registry().on_state_change(move |event| {
            crate::history::record(event);
            // Never waits: a full ring overwrites its oldest event (the lagging subscriber is
            // told), and with no subscriber the event is not even copied.
            if tx.receiver_count() > 0 && (event.key.is_none() || admit(event)) {
                let by = crate::history::actor(event);
                let _ = tx.send(Message::State(Arc::new(event.clone()), by));
            }
        });
    });
}

/// `GET /events`: until the client goes, or the router's `end_streams_on` signal completes.
pub(crate) async fn events(State(state): State<Arc<AdminState>>) -> Response {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let subscriber = Subscriber {
        rx: sender().subscribe(),
        tick,
        last: None,
        dropped: 0,
    };
    let end = state.streams_end.clone();
    let stream = futures_util::stream::unfold((subscriber, end), |(mut s, end)| async move {
        let event = match end {
            None => s.next().await,
            // The signal first: a stream asked for after it ends before its first event.
            Some(ref end) => match select(end.clone(), pin!(s.next())).await {
                Either::Left(_) => return None,
                Either::Right((event, _)) => event,
            },
        };
        Some((Ok::<_, Infallible>(event), (s, end)))
    });
    Sse::new(stream).into_response()
}

/// One client of the stream.
struct Subscriber {
    rx: broadcast::Receiver<Message>,
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
    timeouts: u64,
    rejected: u64,
}

/// Rates per second since the previous tick.
#[derive(Serialize)]
struct PerSecond {
    calls: f64,
    failures: f64,
    slow: f64,
    /// Failures that were timeouts (also in `failures`).
    timeouts: f64,
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
    /// For a change made by a control used through the router: the label of its token.
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
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
            Some(Ok(Message::State(event, by))) => state_event(&event, by.as_deref()),
            Some(Ok(Message::Keys(held))) => data("keys", &*held),
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
        // What families held back goes out after this tick, on the channel.
        flush(now);
        let views = breakers::breakers(true);
        let mut totals = HashMap::with_capacity(views.len());
        let mut breakers = Vec::with_capacity(views.len());
        for v in views {
            let m = &v.metrics;
            let t = Totals {
                calls: m.calls,
                failures: m.failures,
                slow: m.slow,
                timeouts: m.timeouts,
                rejected: m.rejected,
            };
            let per_second = self.last.as_ref().and_then(|(then, before)| {
                let secs = now.duration_since(*then).as_secs_f64();
                let b = before.get(&v.name)?;
                (secs > 0.0).then(|| PerSecond {
                    calls: t.calls.saturating_sub(b.calls) as f64 / secs,
                    failures: t.failures.saturating_sub(b.failures) as f64 / secs,
                    slow: t.slow.saturating_sub(b.slow) as f64 / secs,
                    timeouts: t.timeouts.saturating_sub(b.timeouts) as f64 / secs,
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
            families: breakers::families(),
            dropped: self.dropped,
        };
        data("metrics", &tick)
    }
}

fn state_event(event: &Event, by: Option<&str>) -> SseEvent {
    data(
        "state",
        &StateChange {
            event,
            why: crate::history::why(event),
            by,
        },
    )
}

fn data(name: &str, value: &impl Serialize) -> SseEvent {
    // Our views hold strings, numbers and maps with string keys only: they always serialize.
    let text = serde_json::to_string(value)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string());
    SseEvent::default().event(name).data(text)
}
