//! What the admin remembers of each registry breaker, keyed family and family key, from the
//! registry-wide listener and its own controls: the last events in a bounded ring
//! (`GET /breakers/{name}/events`), and whether the current opening was taken on from another
//! instance (fleet mode's imported records), which `GET /health` reads to judge a shared
//! breaker by what this instance saw.
//!
//! One process-wide table behind a std mutex, fed by the listener the first router installs
//! and by the controls. Only the table's own work runs under its lock: no user code.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::SystemTime;

use breakerbox_runtime::__integrations::display_duration;
use breakerbox_runtime::{Event, Reason, State};
use serde::Serialize;

/// Events a breaker's ring keeps, and a family's (its keys' events together).
pub(crate) const BREAKER_EVENTS: usize = 100;

/// Events a family key's ring keeps.
pub(crate) const KEY_EVENTS: usize = 20;

/// Keys of one family whose events are kept; past it, the key that changed least recently
/// loses its ring.
pub(crate) const KEYS_KEPT: usize = 1000;

/// One entry of a ring: a state change, or a control someone used.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Entry {
    /// A state change, as the registry told it.
    Transition {
        /// serde's form of `SystemTime`, as the event stream's.
        wall: SystemTime,
        /// On the breaker's clock, as duration text.
        at: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        from: State,
        to: State,
        reason: Reason,
        /// The reason in words.
        why: String,
        /// For an opening by a failure: its message.
        #[serde(skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
        /// For a change made by a control used through the router: the label of its token.
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// A control used through the admin router.
    Action(Action),
}

/// A control used through the admin router: what, on what, by whom, from where.
#[derive(Clone, Serialize)]
pub(crate) struct Action {
    pub(crate) wall: SystemTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) key: Option<String>,
    /// `force-open`, `disable`, `reset`, `trip-for`, `retry-dead-letters`, `drop-dead-letters`.
    pub(crate) action: &'static str,
    /// `trip-for`'s duration, as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) duration: Option<String>,
    /// The label of the token the request held.
    pub(crate) by: String,
    /// The peer address of the connection, when the server gives it
    /// (`into_make_service_with_connect_info::<SocketAddr>()`).
    pub(crate) peer: Option<String>,
    /// The request's `X-Forwarded-For`, as sent: what the proxies in front say the client was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) forwarded_for: Option<String>,
    /// This instance's name in the fleet, with a fleet view given to the router.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) instance: Option<String>,
}

/// A control this thread is carrying out: on what, the change it makes, and who asked.
struct Acting {
    name: String,
    key: Option<String>,
    reason: Reason,
    by: String,
}

thread_local! {
    /// The control this thread is carrying out, while it does.
    static ACTOR: RefCell<Option<Acting>> = const { RefCell::new(None) };
}

/// Runs `control`, a control used through the router on breaker `name` (or its key `key`)
/// with the token labelled `by`, whose change has reason `reason`: that change, told on this
/// thread, is told with who made it. Only that change: this thread may also tell changes
/// other threads made meanwhile, which are not the control's.
pub(crate) fn acting<R>(
    (name, key): (&str, Option<&str>),
    reason: Reason,
    by: &str,
    control: impl FnOnce() -> R,
) -> R {
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            ACTOR.with(|a| a.borrow_mut().take());
        }
    }
    ACTOR.with(|a| {
        *a.borrow_mut() = Some(Acting {
            name: name.to_owned(),
            key: key.map(str::to_owned),
            reason,
            by: by.to_owned(),
        });
    });
    let _done = Done;
    control()
}

/// Who made `event`, if it is the change of the control this thread is carrying out.
pub(crate) fn actor(event: &Event) -> Option<String> {
    ACTOR.with(|a| {
        a.borrow()
            .as_ref()
            .filter(|a| a.name == event.name && a.key == event.key && a.reason == event.reason)
            .map(|a| a.by.clone())
    })
}

/// A bounded ring of entries, oldest first.
struct Ring {
    entries: VecDeque<Arc<Entry>>,
    cap: usize,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring {
            entries: VecDeque::new(),
            cap,
        }
    }

    fn push(&mut self, entry: Arc<Entry>) {
        if self.entries.len() == self.cap {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }
}

/// A registry breaker, a family, or a family's key.
struct Track {
    ring: Ring,
    /// Its current opening (open or forced open) was taken on from another instance
    /// ([`Reason::Imported`]), not made by this instance's own calls or hands.
    by_fleet: bool,
    /// A family key: when it last changed, on the family's count of changes.
    touched: u64,
}

impl Track {
    fn new(cap: usize) -> Track {
        Track {
            ring: Ring::new(cap),
            by_fleet: false,
            touched: 0,
        }
    }

    fn opened(&mut self, event: &Event) {
        let opened = matches!(event.to, State::Open | State::ForcedOpen);
        let was_open = matches!(event.from, State::Open | State::ForcedOpen);
        if !opened || event.reason != Reason::Imported {
            self.by_fleet = false;
        } else if !was_open {
            // An opening that came from the fleet; an import over an opening of this
            // instance's own (the fleet's record of its own trip) leaves it this instance's.
            self.by_fleet = true;
        }
    }
}

/// A keyed family: its keys' events together, and each key's.
struct Family {
    all: Ring,
    keys: HashMap<String, Track>,
    changes: u64,
}

impl Family {
    /// Key `key`'s track, made if new; at [`KEYS_KEPT`] keys the least recently changed goes.
    fn key(&mut self, key: &str) -> &mut Track {
        self.changes += 1;
        if !self.keys.contains_key(key) && self.keys.len() >= KEYS_KEPT {
            let oldest = self
                .keys
                .iter()
                .min_by_key(|(_, t)| t.touched)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.keys.remove(&oldest);
            }
        }
        let changes = self.changes;
        let track = self
            .keys
            .entry(key.to_owned())
            .or_insert_with(|| Track::new(KEY_EVENTS));
        track.touched = changes;
        track
    }
}

/// The table: registry breakers, and keyed families, by name.
#[derive(Default)]
struct Table {
    breakers: HashMap<String, Track>,
    families: HashMap<String, Family>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);
    // A poisoned lock still holds a usable table: every update leaves it whole.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn breaker<'t>(t: &'t mut Table, name: &str) -> &'t mut Track {
    t.breakers
        .entry(name.to_owned())
        .or_insert_with(|| Track::new(BREAKER_EVENTS))
}

fn family<'t>(t: &'t mut Table, name: &str) -> &'t mut Family {
    t.families.entry(name.to_owned()).or_insert_with(|| Family {
        all: Ring::new(BREAKER_EVENTS),
        keys: HashMap::new(),
        changes: 0,
    })
}

/// A state change's reason in words: for a state taken on from another instance, who changed
/// it and why (`web-1 changed it (reset)`), else the reason (`5 consecutive failures`).
pub(crate) fn why(event: &Event) -> String {
    match &event.origin {
        Some(origin) => origin.clone(),
        None => event.reason.to_string(),
    }
}

/// Records one state change (the registry-wide listener calls it).
pub(crate) fn record(event: &Event) {
    let entry = Arc::new(Entry::Transition {
        wall: event.wall,
        at: display_duration(event.at),
        key: event.key.clone(),
        from: event.from,
        to: event.to,
        reason: event.reason,
        why: why(event),
        failure: event.failure.clone(),
        by: actor(event),
    });
    let mut t = table();
    match &event.key {
        None => {
            let track = breaker(&mut t, &event.name);
            track.opened(event);
            track.ring.push(entry);
        }
        Some(key) => {
            let f = family(&mut t, &event.name);
            f.all.push(entry.clone());
            let track = f.key(key);
            track.opened(event);
            track.ring.push(entry);
        }
    }
}

/// Records a control used on breaker `name` (or on `action.key` of family `name`).
pub(crate) fn act(name: &str, action: Action) {
    let key = action.key.clone();
    let entry = Arc::new(Entry::Action(action));
    let mut t = table();
    match key {
        None => breaker(&mut t, name).ring.push(entry),
        Some(key) => {
            let f = family(&mut t, name);
            f.all.push(entry.clone());
            f.key(&key).ring.push(entry);
        }
    }
}

/// The entries kept of breaker `name`, or of family `name` (`key: None`), or of its key
/// `key`, oldest first; `None` if nothing was ever kept of it.
pub(crate) fn events(name: &str, key: Option<&str>) -> Option<Vec<Arc<Entry>>> {
    let t = table();
    let ring = match key {
        None => t
            .breakers
            .get(name)
            .map(|b| &b.ring)
            .or_else(|| t.families.get(name).map(|f| &f.all)),
        Some(key) => t
            .families
            .get(name)
            .and_then(|f| f.keys.get(key))
            .map(|k| &k.ring),
    }?;
    Some(ring.entries.iter().cloned().collect())
}

/// Whether breaker `name` (or key `key` of family `name`) is open by a record taken on from
/// another instance rather than by this instance's own calls or hands.
pub(crate) fn open_by_fleet(name: &str, key: Option<&str>) -> bool {
    let t = table();
    match key {
        None => t.breakers.get(name).is_some_and(|b| b.by_fleet),
        Some(key) => t
            .families
            .get(name)
            .and_then(|f| f.keys.get(key))
            .is_some_and(|k| k.by_fleet),
    }
}
