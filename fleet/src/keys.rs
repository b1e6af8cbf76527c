//! Keyed families in fleet mode: each key of a shared family has a record of its own, under a
//! name of its own, and the fleet keeps what it knows of the keys that are not closed, so that
//! an instance that makes such a key later gives it the fleet's state before its first call.
//!
//! - **Names.** The task knows a key as `NUL <family length> : <family> <key text>`
//!   ([`key_name`]): a breaker whose name begins with NUL is never shared, so no single
//!   breaker's name is a key's. Its record is `{<prefix>/<family length>:<family>}:<key
//!   length>:<key text>` ([`record_key`]), every other key of it that key and a suffix: the
//!   character after the prefix (`/`, where a single breaker's has `:`) and the lengths make
//!   every name unambiguous whatever characters the family and the key hold. All the keys of
//!   a family share one hash tag (one Redis Cluster slot), with the family's open keys
//!   ([`open_set_key`]): a sorted set of the key texts whose record is not closed, by the
//!   expiry of that record, which `record.lua` keeps with the record.
//! - **Bounded.** A key's record expires (`FleetConfig::key_ttl`): a closed one that long
//!   after it closed, an open one that long after its open time and probe timeout have run; a
//!   key forced open or disabled keeps it until a reset. The task tracks a key only while this
//!   instance holds it and it has changed; its idle re-reads skip closed keys, and the open
//!   set, one command a family, stands for them: lost messages about keys are found there.
//! - **New keys.** [`KeyBook`] holds the last record seen of each key not closed in the
//!   fleet; a hook the runtime runs when a shared family makes a key (before the key's first
//!   call, `Inner::born`) gives the new breaker that record's state, and tells the task to
//!   track the key.

use std::collections::{BTreeMap, VecDeque};

use core::time::Duration;
use tokio::time::Instant;

use breakerbox_runtime::{Breaker, SharedState, State, WeakBreaker};

use crate::record::Record;

/// The fleet's name for the key `key` of the keyed family `family`: the name a store is given
/// for that key's record (`NUL <family length> : <family> <key>`, which no single breaker's
/// name can be, since a breaker whose name begins with NUL is never shared). [`split_key`]
/// reads it back.
///
/// ```
/// use breakerbox_fleet::store::{key_name, split_key};
///
/// let name = key_name("users", "ann");
/// assert_eq!(split_key(&name), Some(("users", "ann")));
/// assert_eq!(split_key("payments"), None);
/// ```
pub fn key_name(family: &str, key: &str) -> String {
    format!("\0{}:{family}{key}", family.len())
}

/// The family and the key a key's name ([`key_name`]) stands for; `None` for a single
/// breaker's name. A store keeps a family's keys together with it: a family key's write
/// ([`Change::life`](crate::store::Change::life)) lists the key among its family's open keys
/// ([`FleetStore::open_keys`](crate::store::FleetStore::open_keys)).
pub fn split_key(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix('\0')?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    Some((rest.get(..len)?, rest.get(len..)?))
}

/// The record's key in the store of the breaker or family key `name`: `{<prefix>:<name>}`,
/// or for a key `{<prefix>/<n>:<family>}:<m>:<key>`. A record's other keys are this and
/// `:<what>`.
pub(crate) fn record_key(prefix: &str, name: &str) -> String {
    match split_key(name) {
        Some((family, key)) => {
            format!("{{{prefix}/{}:{family}}}:{}:{key}", family.len(), key.len())
        }
        None => format!("{{{prefix}:{name}}}"),
    }
}

/// The family's open keys in the store: `{<prefix>/<n>:<family>}:open`.
pub(crate) fn open_set_key(prefix: &str, family: &str) -> String {
    format!("{{{prefix}/{}:{family}}}:open", family.len())
}

/// How a name shows in logs: a key as `<family>[<key>]`.
pub(crate) fn shown(name: &str) -> String {
    match split_key(name) {
        Some((family, key)) => format!("{family}[{key}]"),
        None => name.to_owned(),
    }
}

/// `state` as this instance takes it on: an open record held one `probe_timeout` longer, for
/// the fleet's probe leases.
pub(crate) fn held(breaker: &Breaker, mut state: SharedState) -> SharedState {
    if state.state == State::Open {
        let hold = breaker.config().probe_timeout();
        // Saturating: a `probe_timeout` may be past what a duration can add.
        state.open_remaining = Some(
            state
                .open_remaining
                .unwrap_or_default()
                .saturating_add(hold),
        );
    }
    state
}

/// Why a breaker takes on `state` from a record written by `origin` for `reason`, with the
/// failure behind it: who changed it and its reason (`web-2 tripped it (5 consecutive
/// failures)`), and for an open state the failure, `web-2: HTTP 503`. A record this instance
/// (`instance`) wrote tells its own reason and failure as they were.
pub(crate) fn told_of(
    instance: &str,
    (origin, reason, failure): (&str, &str, &str),
    state: State,
) -> (Option<String>, Option<String>) {
    let failure = (state == State::Open && !failure.is_empty()).then_some(failure);
    if origin.is_empty() || origin == instance {
        let told = (!reason.is_empty()).then(|| reason.to_owned());
        return (told, failure.map(str::to_owned));
    }
    let did = if state == State::Open {
        "tripped it"
    } else {
        "changed it"
    };
    let told = if reason.is_empty() {
        format!("{origin} {did}")
    } else {
        format!("{origin} {did} ({reason})")
    };
    (Some(told), failure.map(|f| format!("{origin}: {f}")))
}

/// Keys not closed in the fleet that the book holds at most: past it, a new one is not kept
/// (a key made here then starts closed, and takes the fleet's record on at its first re-read).
pub(crate) const MAX_KNOWN: usize = 65_536;

/// Keys made lately that the book remembers, and for how long: a record the task takes in
/// between the hook's look at the book and the key's breaker entering its family reaches the
/// breaker through this list.
const MAX_BIRTHS: usize = 4_096;
const BIRTH_LIFE: Duration = Duration::from_secs(1);

/// What the fleet knows of the keys of shared families that are not closed.
#[derive(Default)]
pub(crate) struct KeyBook {
    /// By the key's name: the last record seen of it, and when.
    known: BTreeMap<String, (Record, Instant)>,
    /// Keys made lately: their name, breaker, and when.
    births: VecDeque<(String, WeakBreaker, Instant)>,
}

impl KeyBook {
    /// Takes `record` in as the fleet's newest of the key `name` (epoch 0: none); returns the
    /// breakers made for the key lately, which may not be in their family yet.
    pub(crate) fn know(&mut self, name: &str, record: &Record) -> Vec<WeakBreaker> {
        let newer = self
            .known
            .get(name)
            .is_none_or(|(r, _)| r.epoch <= record.epoch);
        if record.epoch == 0 || (record.state == State::Closed && newer) {
            self.known.remove(name);
        } else if record.state != State::Closed
            && newer
            && (self.known.len() < MAX_KNOWN || self.known.contains_key(name))
        {
            self.known
                .insert(name.to_owned(), (record.clone(), Instant::now()));
        }
        self.births
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, b, _)| b.clone())
            .collect()
    }

    /// Remembers `breaker`, just made for the key `name`, and returns the fleet's last record
    /// of the key (with when it was taken in), if the key is not closed in the fleet.
    pub(crate) fn birth(&mut self, name: &str, breaker: WeakBreaker) -> Option<(Record, Instant)> {
        if self.births.len() >= MAX_BIRTHS {
            self.births.pop_front();
        }
        self.births
            .push_back((name.to_owned(), breaker, Instant::now()));
        self.known.get(name).cloned()
    }

    /// The breaker made lately for the key `name`, if it is alive.
    pub(crate) fn born(&self, name: &str) -> Option<Breaker> {
        self.births
            .iter()
            .rev()
            .filter(|(n, _, _)| n == name)
            .find_map(|(_, b, _)| b.upgrade())
    }

    /// The last record seen of the key `name`, if the book holds it, with its `now_ms` moved
    /// on by the time since it was taken in: its open time left is what is left now.
    pub(crate) fn record(&self, name: &str) -> Option<Record> {
        self.known.get(name).map(|(r, at)| {
            let mut record = r.clone();
            let since = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
            record.now_ms = record.now_ms.saturating_add(since);
            record
        })
    }

    /// Whether the book holds the key `name`.
    pub(crate) fn holds(&self, name: &str) -> bool {
        self.known.contains_key(name)
    }

    /// Forgets every key of `family` taken in before `before` that is not in `open`, the
    /// family's open keys as the store listed them after `before`: their records closed or
    /// expired, and the message saying so was lost.
    pub(crate) fn keep_open(
        &mut self,
        family: &str,
        open: &std::collections::BTreeSet<String>,
        before: Instant,
    ) {
        self.known.retain(|name, (_, at)| {
            *at >= before || split_key(name).is_none_or(|(f, _)| f != family) || open.contains(name)
        });
    }

    /// Forgets the keys made more than a moment ago.
    pub(crate) fn prune(&mut self) {
        let now = Instant::now();
        while self
            .births
            .front()
            .is_some_and(|(_, _, at)| now >= *at + BIRTH_LIFE)
        {
            self.births.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_and_record_keys_are_unambiguous() {
        assert_eq!(
            split_key(&key_name("hosts", "a.example")),
            Some(("hosts", "a.example"))
        );
        assert_eq!(split_key(&key_name("", "")), Some(("", "")));
        assert_eq!(
            split_key(&key_name("a:b", "\u{0}1:x")),
            Some(("a:b", "\u{0}1:x"))
        );
        assert_eq!(split_key("payments"), None);
        assert_eq!(split_key("\0x"), None);
        assert_eq!(split_key("\u{0}9:ab"), None);
        assert_eq!(
            record_key("bb", &key_name("hosts", "a.example")),
            "{bb/5:hosts}:9:a.example"
        );
        assert_eq!(record_key("bb", "hosts"), "{bb:hosts}");
        // A key whose text ends like another key's suffix, a family whose name holds a brace,
        // and single breakers named like them: all apart.
        let names = [
            key_name("hosts", "a"),
            key_name("hosts", "a:probes"),
            key_name("hosts}:1:a", ""),
            key_name("hosts", "}:1:a"),
            "hosts".to_owned(),
            "bb/5:hosts}:1:a".to_owned(),
        ];
        let mut keys = Vec::new();
        for n in &names {
            keys.push(record_key("bb", n));
            keys.push(format!("{}:probes", record_key("bb", n)));
        }
        keys.push(open_set_key("bb", "hosts"));
        let all = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), all, "{keys:?}");
    }
}
