//! A shared breaker's record ([`Record`], public as `store::Record`), and how Redis's replies,
//! hashes and published payloads read as one (crate-private).

use core::time::Duration;

use breakerbox_runtime::{SharedState, State};

/// A shared breaker's record, as a store reads, writes or publishes it: the store's view of
/// one breaker (or one key of a keyed family) for the whole fleet.
///
/// A store builds one from what it keeps ([`Record::none`], then the fields set); the fleet
/// takes it on as a transition of its local breaker. Times are the store's own clock, in
/// milliseconds since the Unix epoch: the fleet only ever uses their difference
/// ([`open_remaining`](Record::open_remaining)), so a host's clock never matters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Record {
    /// Whether the call that answered this record wrote it: `true` for a write (or a trip) that
    /// took, `false` for a read and for a compare-and-set refused. A published record always
    /// was written: its `changed` is `true`.
    pub changed: bool,
    /// The record's version: 0 when there is none (never written, expired or flushed), else
    /// greater than every epoch the record had before and at least the store's time in ms at
    /// the write. Compare-and-sets ([`Change::seen`](crate::store::Change::seen)) are over
    /// it.
    pub epoch: u64,
    /// The state: [`State::Closed`], [`State::Open`], [`State::ForcedOpen`] or
    /// [`State::Disabled`] (a record holds no other; half-open is each instance's own).
    pub state: State,
    /// While open: until when, on the store's clock (ms since the Unix epoch); 0 otherwise.
    pub open_until_ms: u64,
    /// The store's time when the record was read or written (ms since the Unix epoch).
    pub now_ms: u64,
    /// Re-opens since the last close (the backoff level of the open time).
    pub reopens: u32,
    /// The instance that wrote it ([`Change::instance`](crate::store::Change::instance));
    /// empty for no record.
    pub origin: String,
    /// Why it was written, as text ([`Change::reason`](crate::store::Change::reason)).
    pub reason: String,
    /// The failure that tripped it, as text; empty for none.
    pub last_failure: String,
}

/// The fields of a record's hash a re-read reads, in `Record::from_hash`'s order.
pub(crate) const READ_FIELDS: [&str; 7] = [
    "epoch",
    "state",
    "open_until",
    "reopens",
    "origin",
    "reason",
    "last_failure",
];

/// A state as the record writes it.
pub(crate) fn state_name(state: State) -> &'static str {
    match state {
        State::Open => "open",
        State::ForcedOpen => "forced_open",
        State::Disabled => "disabled",
        // Closed and half-open; `State` is non-exhaustive, and a state the record cannot name
        // is written as the one every instance can run from.
        _ => "closed",
    }
}

fn parse_state(text: &str) -> Option<State> {
    Some(match text {
        "closed" => State::Closed,
        "open" => State::Open,
        "forced_open" => State::ForcedOpen,
        "disabled" => State::Disabled,
        _ => return None,
    })
}

impl Record {
    /// The record of a breaker that has none in the store, read at the store's time `now_ms`:
    /// epoch 0, closed, not changed, every text empty. A store builds any other record from it,
    /// setting the fields.
    ///
    /// ```
    /// use breakerbox_fleet::store::{Record, State};
    ///
    /// let mut record = Record::none(1_700_000_000_000);
    /// record.epoch = 1_700_000_000_001;
    /// record.state = State::Open;
    /// record.open_until_ms = 1_700_000_030_000;
    /// assert_eq!(record.open_remaining(), Some(core::time::Duration::from_secs(30)));
    /// ```
    pub fn none(now_ms: u64) -> Record {
        Record {
            changed: false,
            epoch: 0,
            state: State::Closed,
            open_until_ms: 0,
            now_ms,
            reopens: 0,
            origin: String::new(),
            reason: String::new(),
            last_failure: String::new(),
        }
    }

    /// From the script's nine fields (the flag first), or a payload's eight (no flag).
    fn from_fields(changed: bool, f: &[String]) -> Option<Record> {
        let [
            epoch,
            state,
            open_until,
            now,
            reopens,
            origin,
            reason,
            last_failure,
        ] = f
        else {
            return None;
        };
        Some(Record {
            changed,
            epoch: epoch.parse().ok()?,
            state: parse_state(state)?,
            open_until_ms: open_until.parse().ok()?,
            now_ms: now.parse().ok()?,
            reopens: reopens.parse().unwrap_or(0),
            origin: origin.clone(),
            reason: reason.clone(),
            last_failure: last_failure.clone(),
        })
    }

    /// The fields `READ_FIELDS` of a record's hash (`HMGET`, missing ones `None`), read at the
    /// server's time `now_ms`: as `record.lua`'s `read` makes them (no epoch: no record).
    pub(crate) fn from_hash(now_ms: u64, f: &[Option<String>]) -> Option<Record> {
        let [
            epoch,
            state,
            open_until,
            reopens,
            origin,
            reason,
            last_failure,
        ] = f
        else {
            return None;
        };
        let Some(epoch) = epoch else {
            return Some(Record::none(now_ms));
        };
        let or = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.to_owned());
        let fields = [
            epoch.clone(),
            or(state, "closed"),
            or(open_until, "0"),
            now_ms.to_string(),
            or(reopens, "0"),
            or(origin, ""),
            or(reason, ""),
            or(last_failure, ""),
        ];
        Record::from_fields(false, &fields)
    }

    /// The script's reply: `[changed, epoch, state, …]`.
    pub(crate) fn from_reply(reply: &[String]) -> Option<Record> {
        let (changed, rest) = reply.split_first()?;
        Record::from_fields(changed == "1", rest)
    }

    /// How long it stays open from the moment the store wrote or read it (`open_until_ms` less
    /// `now_ms`, never negative); `None` unless open.
    pub fn open_remaining(&self) -> Option<Duration> {
        (self.state == State::Open)
            .then(|| Duration::from_millis(self.open_until_ms.saturating_sub(self.now_ms)))
    }

    /// As the local breaker takes it on.
    pub(crate) fn shared_state(&self) -> SharedState {
        SharedState::new(self.state, self.open_remaining(), self.reopens)
    }
}

/// A published change: the breaker's name and its new record, each field `<length>:<bytes>`.
/// `None` for a payload that is not one of ours: any bytes at all, read with checked
/// arithmetic, so a foreign message on the channel (another application's, or crafted) is
/// skipped in every build profile.
pub(crate) fn parse_payload(payload: &[u8]) -> Option<(String, Record)> {
    let mut fields = Vec::with_capacity(9);
    let mut rest = payload;
    while !rest.is_empty() {
        if fields.len() == 9 {
            return None; // more fields than a record has
        }
        let colon = rest.iter().position(|b| *b == b':')?;
        let len: usize = core::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
        let start = colon.checked_add(1)?;
        let end = start.checked_add(len)?;
        let body = rest.get(start..end)?;
        fields.push(String::from_utf8_lossy(body).into_owned());
        rest = &rest[end..];
    }
    if fields.len() != 9 {
        return None;
    }
    let name = fields.remove(0);
    Some((name, Record::from_fields(true, &fields)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(s: &str) -> String {
        format!("{}:{s}", s.len())
    }

    #[test]
    fn a_payload_reads_back_with_colons_and_newlines_in_its_fields() {
        let fields = [
            "pay:ments",
            "1700000000123",
            "open",
            "1700000030123",
            "1700000000123",
            "2",
            "host-1",
            "5 consecutive failures",
            "refused:\nport 80",
        ];
        let payload: String = fields.iter().map(|f| field(f)).collect();
        let (name, record) = parse_payload(payload.as_bytes()).unwrap();
        assert_eq!(name, "pay:ments");
        assert_eq!(record.epoch, 1_700_000_000_123);
        assert_eq!(record.state, State::Open);
        assert_eq!(record.open_remaining(), Some(Duration::from_secs(30)));
        assert_eq!(record.reopens, 2);
        assert_eq!(record.last_failure, "refused:\nport 80");
    }

    #[test]
    fn a_foreign_or_cut_payload_is_refused() {
        assert_eq!(parse_payload(b"hello"), None);
        assert_eq!(parse_payload(b"3:abc"), None);
        assert_eq!(parse_payload(b"99:abc"), None);
        let mut payload: String = ["a", "1", "sideways", "0", "0", "0", "", "", ""]
            .iter()
            .map(|f| field(f))
            .collect();
        assert_eq!(parse_payload(payload.as_bytes()), None, "unknown state");
        payload.push_str("1:x");
        assert_eq!(parse_payload(payload.as_bytes()), None, "ten fields");
    }

    #[test]
    fn a_length_that_overflows_is_refused_not_a_panic() {
        for payload in [
            &b"18446744073709551615:x"[..],
            b"18446744073709551614:xy",
            b"99999999999999999999999:x",
            b"1:a18446744073709551615:",
            b"-1:x",
            b"+3:abc",
            b":",
            b"0:",
        ] {
            assert_eq!(parse_payload(payload), None, "{payload:?}");
        }
    }

    proptest::proptest! {
        /// Any bytes at all: a record or `None`, never a panic, in any profile.
        #[test]
        fn any_bytes_parse_or_are_refused(payload in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse_payload(&payload);
        }

        /// Bytes made of length-prefixed fields, with lengths that lie: never a panic.
        #[test]
        fn lying_lengths_are_refused(fields in proptest::collection::vec((proptest::num::u64::ANY, "[a-z:0-9]{0,12}"), 0..12)) {
            let payload: String = fields.iter().map(|(len, body)| format!("{len}:{body}")).collect();
            let _ = parse_payload(payload.as_bytes());
        }

        /// What the script publishes reads back whole, whatever the fields hold.
        #[test]
        fn a_published_record_reads_back(name in ".{0,40}", reason in ".{0,40}", failure in ".{0,40}", epoch in 1u64..u64::MAX, reopens in 0u32..1000) {
            let epoch_text = epoch.to_string();
            let reopens_text = reopens.to_string();
            let fields = [name.as_str(), &epoch_text, "open", "1000", "500", &reopens_text, "origin", &reason, &failure];
            let payload: String = fields.iter().map(|f| format!("{}:{f}", f.len())).collect();
            let (n, record) = parse_payload(payload.as_bytes()).expect("a record");
            proptest::prop_assert_eq!(n, name);
            proptest::prop_assert_eq!(record.epoch, epoch);
            proptest::prop_assert_eq!(record.reopens, reopens);
            proptest::prop_assert_eq!(record.reason, reason);
            proptest::prop_assert_eq!(record.last_failure, failure);
        }
    }

    #[test]
    fn an_expired_open_time_is_zero_not_negative() {
        let reply: Vec<String> = ["0", "5", "open", "100", "250", "0", "a", "r", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let record = Record::from_reply(&reply).unwrap();
        assert!(!record.changed);
        assert_eq!(record.open_remaining(), Some(Duration::ZERO));
    }
}
