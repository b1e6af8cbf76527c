//! A shared breaker's record in Redis, the script that reads and changes it, and the payload it
//! publishes.

use core::time::Duration;

use crate::{SharedState, State};

/// A record as the script returns or publishes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Whether the call changed it (script replies only; published records always did).
    pub(crate) changed: bool,
    /// 0 when there is no record (never written, or flushed).
    pub(crate) epoch: u64,
    pub(crate) state: State,
    /// While open: until when, in the server's milliseconds since the Unix epoch.
    pub(crate) open_until_ms: u64,
    /// The server's time when the record was read or written.
    pub(crate) now_ms: u64,
    pub(crate) reopens: u32,
    pub(crate) origin: String,
    pub(crate) reason: String,
    pub(crate) last_failure: String,
}

/// A state as the record writes it.
pub(crate) fn state_name(state: State) -> &'static str {
    match state {
        State::Closed | State::HalfOpen => "closed",
        State::Open => "open",
        State::ForcedOpen => "forced_open",
        State::Disabled => "disabled",
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

    /// The script's reply: `[changed, epoch, state, …]`.
    pub(crate) fn from_reply(reply: &[String]) -> Option<Record> {
        let (changed, rest) = reply.split_first()?;
        Record::from_fields(changed == "1", rest)
    }

    /// How long it stays open from the moment the server wrote or read it; `None` unless open.
    pub(crate) fn open_remaining(&self) -> Option<Duration> {
        (self.state == State::Open)
            .then(|| Duration::from_millis(self.open_until_ms.saturating_sub(self.now_ms)))
    }

    /// As the local breaker takes it on.
    pub(crate) fn shared_state(&self) -> SharedState {
        SharedState::new(self.state, self.open_remaining(), self.reopens)
    }
}

/// A published change: the breaker's name and its new record, each field `<length>:<bytes>`.
/// `None` for a payload that is not one of ours.
pub(crate) fn parse_payload(payload: &[u8]) -> Option<(String, Record)> {
    let mut fields = Vec::with_capacity(9);
    let mut rest = payload;
    while !rest.is_empty() {
        let colon = rest.iter().position(|b| *b == b':')?;
        let len: usize = core::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
        let body = rest.get(colon + 1..colon + 1 + len)?;
        fields.push(String::from_utf8_lossy(body).into_owned());
        rest = &rest[colon + 1 + len..];
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
