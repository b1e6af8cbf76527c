//! A breaker's replay (feature `replay`): its journal's status, its dead letters, and the
//! controls that retry or drop them, behind the token.

use std::time::Duration;

use axum::http::StatusCode;
use breakerbox_admin::Admin;
use breakerbox_replay::{Replay, ReplayConfig, Settled, StoreError, Take};
use breakerbox_runtime::{Breaker, ManualClock, Rejected};

use crate::support::{TOKEN, breaker, get, post, send, shared};

/// A replay over `breaker`, on its clock, whose entries die at their first failure.
fn replay(breaker: &Breaker, clock: &ManualClock) -> Replay<u32> {
    Replay::builder(breaker)
        .clock(clock.clone())
        .config(ReplayConfig::new().attempts(1))
        .key(|n: &u32| format!("n{}", n % 10))
        .memory(|_: u32| async { Err::<(), _>("still down") })
        .unwrap()
}

fn journal(replay: &Replay<u32>, n: u32) {
    let rejected = replay.breaker().try_acquire().map(drop).unwrap_err();
    let rejected: Rejected = replay.journal(rejected, n);
    assert!(rejected.journaled());
}

/// The oldest entry taken and failed: a dead letter (the replayer waits while open).
fn bury_one(replay: &Replay<u32>, clock: &ManualClock) {
    let journal = replay.journal_ref();
    let Take::Due(taken) = journal.take(breakerbox_runtime::Clock::now(clock)) else {
        panic!("nothing due");
    };
    journal.settle(
        taken.id,
        Settled::Failed,
        breakerbox_runtime::Clock::now(clock),
    );
}

#[tokio::test]
async fn the_replay_view_shows_size_oldest_entry_dead_letters_and_counts() {
    let _shared = shared().await;
    let (b, clock) = breaker("adm-replay-view");
    let replay = replay(&b, &clock);
    b.force_open();
    journal(&replay, 1);
    clock.advance(Duration::from_secs(2));
    journal(&replay, 2);
    journal(&replay, 12); // the same key as 2: one entry
    clock.advance(Duration::from_secs(3));
    bury_one(&replay, &clock);
    let app = Admin::new().router();
    let (status, _, body) = send(&app, get("/breakers/adm-replay-view/replay")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["breaker"], "adm-replay-view");
    assert_eq!(body["entries"], 1);
    assert_eq!(body["dead_letters"], 1);
    assert_eq!(body["oldest_age"], 3.0, "entry 2, journaled 3 s ago");
    assert_eq!(body["counts"]["queued"], 2);
    assert_eq!(body["counts"]["deduplicated"], 1);
    assert_eq!(body["counts"]["dead_lettered"], 1);
    assert_eq!(body["store_error"], serde_json::Value::Null);
    assert!(body["bytes"].as_u64().unwrap() > 0);

    let (status, _, body) = send(&app, get("/breakers/adm-replay-view/replay/dead-letters")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let dead = body["dead_letters"].as_array().unwrap();
    assert_eq!(dead.len(), 1, "{body}");
    assert_eq!(dead[0]["key"], "n1");
    assert_eq!(dead[0]["attempts"], 1);
    assert_eq!(dead[0]["age"], 5.0);

    // The dashboard's list: every live replay, this one as above.
    let (status, _, body) = send(&app, get("/replays")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["replays"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["breaker"] == "adm-replay-view")
        .unwrap_or_else(|| panic!("not listed: {body}"));
    assert_eq!(
        (listed["entries"].as_u64(), listed["dead_letters"].as_u64()),
        (Some(1), Some(1))
    );
}

#[tokio::test]
async fn dead_letters_are_retried_or_dropped_with_the_token_only() {
    let _shared = shared().await;
    let (b, clock) = breaker("adm-replay-dead");
    let replay = replay(&b, &clock);
    b.force_open();
    journal(&replay, 1);
    journal(&replay, 2);
    bury_one(&replay, &clock);
    bury_one(&replay, &clock);
    let retry = "/breakers/adm-replay-dead/replay/dead-letters/retry";
    let drop = "/breakers/adm-replay-dead/replay/dead-letters/drop";

    for (app, token, want) in [
        (Admin::new().router(), Some(TOKEN), StatusCode::FORBIDDEN),
        (
            Admin::new().token(TOKEN).router(),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (
            Admin::new().token(TOKEN).router(),
            Some("guess"),
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        for path in [retry, drop] {
            let (status, _, body) = send(&app, post(path, token, "")).await;
            assert_eq!(status, want, "{path}: {body}");
        }
    }
    assert_eq!(
        replay.status().dead_letters,
        2,
        "refused controls change nothing"
    );

    let app = Admin::new().token(TOKEN).router();
    let (status, _, body) = send(&app, post(retry, Some(TOKEN), r#"{"all": true}"#)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(replay.status().dead_letters, 2);

    let (status, _, body) = send(&app, post(retry, Some(TOKEN), "")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["retried"], 2);
    assert_eq!(body["replay"]["dead_letters"], 0);
    assert_eq!(body["replay"]["entries"], 2);

    bury_one(&replay, &clock);
    let (status, _, body) = send(&app, post(drop, Some(TOKEN), "{}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["dropped"], 1);
    assert_eq!(
        (replay.status().dead_letters, replay.status().entries),
        (0, 1)
    );
}

#[tokio::test]
async fn a_breaker_without_a_replay_is_a_404_naming_it_after_the_token() {
    let _shared = shared().await;
    let app = Admin::new().token(TOKEN).router();
    let message = "no replay for breaker 'adm-replay-none': a breaker has one once a `Replay` is \
                   built over it (or a `#[circuit_breaker(replay = …)]` function is first called)";
    for req in [
        get("/breakers/adm-replay-none/replay"),
        get("/breakers/adm-replay-none/replay/dead-letters"),
        post(
            "/breakers/adm-replay-none/replay/dead-letters/retry",
            Some(TOKEN),
            "",
        ),
        post(
            "/breakers/adm-replay-none/replay/dead-letters/drop",
            Some(TOKEN),
            "",
        ),
    ] {
        let (status, _, body) = send(&app, req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["error"], message);
    }
    let (status, _, body) = send(
        &app,
        post(
            "/breakers/adm-replay-none/replay/dead-letters/drop",
            Some("guess"),
            "",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the token first: {body}");
    let (status, _, body) = send(
        &app,
        post("/breakers/adm-replay-none/replay", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(
        body["error"],
        "POST is not allowed on '/breakers/adm-replay-none/replay': use GET"
    );
}

#[tokio::test]
async fn a_dropped_replay_is_no_longer_served() {
    let _shared = shared().await;
    let (b, clock) = breaker("adm-replay-gone");
    let replay = replay(&b, &clock);
    let app = Admin::new().router();
    let (status, _, _) = send(&app, get("/breakers/adm-replay-gone/replay")).await;
    assert_eq!(status, StatusCode::OK);
    drop(replay);
    let (status, _, _) = send(&app, get("/breakers/adm-replay-gone/replay")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A journal whose store does not answer: every operation that can say so fails with this
/// reason (what the fleet journal does while its Redis hangs); the rest are the memory
/// journal's.
struct Unanswering(breakerbox_replay::MemoryJournal<u32>);

const UNANSWERED: &str = "the replay journal `adm-replay-hung`'s Redis did not answer within 500ms";

impl breakerbox_replay::Journal<u32> for Unanswering {
    fn push(
        &self,
        key: Option<String>,
        args: u32,
        now: Duration,
    ) -> Result<breakerbox_replay::Pushed, breakerbox_replay::NotJournaled> {
        self.0.push(key, args, now)
    }
    fn take(&self, now: Duration) -> Take<u32> {
        self.0.take(now)
    }
    fn settle(&self, id: u64, how: Settled, now: Duration) {
        self.0.settle(id, how, now)
    }
    fn status(&self) -> breakerbox_replay::JournalStatus {
        self.0.status()
    }
    fn entries(&self) -> Vec<breakerbox_replay::EntryInfo> {
        self.0.entries()
    }
    fn dead_letters(&self) -> Vec<breakerbox_replay::EntryInfo> {
        Vec::new()
    }
    fn retry_dead_letters(&self, _: Duration) -> usize {
        0
    }
    fn drop_dead_letters(&self) -> usize {
        0
    }
    fn try_status(&self) -> Result<breakerbox_replay::JournalStatus, StoreError> {
        Err(StoreError(UNANSWERED.to_owned()))
    }
    fn try_dead_letters(&self) -> Result<Vec<breakerbox_replay::EntryInfo>, StoreError> {
        Err(StoreError(UNANSWERED.to_owned()))
    }
    fn try_retry_dead_letters(&self, _: Duration) -> Result<usize, StoreError> {
        Err(StoreError(UNANSWERED.to_owned()))
    }
    fn try_drop_dead_letters(&self) -> Result<usize, StoreError> {
        Err(StoreError(UNANSWERED.to_owned()))
    }
    fn store_error(&self) -> Option<String> {
        Some(UNANSWERED.to_owned())
    }
}

#[tokio::test]
async fn a_journal_whose_store_does_not_answer_is_a_503_with_its_reason() {
    let _shared = shared().await;
    let (b, _clock) = breaker("adm-replay-hung");
    let unanswering = Unanswering(breakerbox_replay::MemoryJournal::new(
        "adm-replay-hung",
        &ReplayConfig::new(),
    ));
    let replay = Replay::builder(&b)
        .journal(std::sync::Arc::new(unanswering), |_: u32| async {
            Ok::<_, String>(())
        })
        .unwrap();
    b.force_open();
    journal(&replay, 1);
    let app = Admin::new().token(TOKEN).router();

    let dead = "/breakers/adm-replay-hung/replay/dead-letters";
    let (status, _, body) = send(&app, get(dead)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.to_string().contains(UNANSWERED), "{body}");
    for control in ["retry", "drop"] {
        let path = format!("{dead}/{control}");
        let (status, _, body) = send(&app, post(&path, Some(TOKEN), "")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {body}");
        assert!(body.to_string().contains(UNANSWERED), "{body}");
    }
    // The view: the last status the journal knows, and why it is not fresh.
    let (status, _, body) = send(&app, get("/breakers/adm-replay-hung/replay")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["entries"], 1);
    assert_eq!(body["store_error"], UNANSWERED);
}
