//! What every topic uses: breakers on a `ManualClock`, one call of each outcome, the event
//! log, the `tracing` capture, and the registry lock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, ConfigBuilder, Event, ManualClock, Reason, Rejected, State, Window,
};

/// One nanosecond: the smallest step of the clock.
pub const NS: Duration = Duration::from_nanos(1);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker on a fresh manual clock.
pub fn breaker(builder: ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = builder.clock(clock.clone()).build().expect("valid config");
    (Breaker::new("b", config), clock)
}

/// One admitted call that fails.
pub fn fail(b: &Breaker) {
    b.try_acquire().expect("admitted").failure();
}

/// One admitted call that succeeds.
pub fn succeed(b: &Breaker) {
    b.try_acquire().expect("admitted").success();
}

/// The rejection of one call that must not be admitted.
pub fn rejected(b: &Breaker) -> Rejected {
    match b.try_acquire() {
        Ok(p) => panic!("admitted {p:?} in state {:?}", b.state()),
        Err(r) => r,
    }
}

/// Records every event of `b` for later inspection.
pub fn events(b: &Breaker) -> Arc<Mutex<Vec<Event>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    b.on_state_change(move |e| log.lock().unwrap().push(e.clone()));
    seen
}

/// The `(from, to, reason)` of every event logged by [`events`].
pub fn transitions(seen: &Mutex<Vec<Event>>) -> Vec<(State, State, Reason)> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|e| (e.from, e.to, e.reason))
        .collect()
}

/// Trips a `failures(1)` breaker and lets `open_for` pass so the next call probes.
pub fn to_half_open(b: &Breaker, clock: &ManualClock) {
    fail(b);
    assert_eq!(b.state(), State::Open);
    clock.advance(b.metrics().retry_after.unwrap());
}

/// A failure-rate policy over `window`, judged from `min_calls`.
pub fn rate_config(window: Window, min_calls: u32, rate: u8) -> ConfigBuilder {
    Config::builder()
        .failure_rate(rate)
        .window(window)
        .min_calls(min_calls)
}

/// The registry is one per process and `reset_all` reaches every breaker in it: tests that
/// change registry breakers take turns.
pub fn registry_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub mod capture {
    //! A `tracing` subscriber that keeps every event it sees.
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::fmt;
    use std::sync::Once;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Level, Metadata, Subscriber};

    #[derive(Clone, Debug)]
    pub struct Seen {
        pub target: String,
        pub level: Level,
        pub fields: BTreeMap<String, String>,
    }

    /// Installed once as the global subscriber, so that no callsite's interest is ever cached
    /// as "never" by a race between scoped subscribers of tests on other threads; it keeps the
    /// events of the threads inside [`run`].
    pub struct Capture;

    thread_local!(static SEEN: RefCell<Option<Vec<Seen>>> = const { RefCell::new(None) });

    struct Fields<'a>(&'a mut BTreeMap<String, String>);
    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
    }

    impl Subscriber for Capture {
        fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
            Interest::sometimes()
        }
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            let seen = Seen {
                target: event.metadata().target().to_owned(),
                level: *event.metadata().level(),
                fields,
            };
            SEEN.with(|s| {
                if let Some(v) = s.borrow_mut().as_mut() {
                    v.push(seen);
                }
            });
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Runs `f` with a capturing subscriber on this thread; returns what it saw.
    pub fn run(f: impl FnOnce()) -> Vec<Seen> {
        static INIT: Once = Once::new();
        INIT.call_once(|| tracing::subscriber::set_global_default(Capture).unwrap());
        SEEN.with(|s| *s.borrow_mut() = Some(Vec::new()));
        f();
        SEEN.with(|s| s.borrow_mut().take().unwrap())
    }
}
