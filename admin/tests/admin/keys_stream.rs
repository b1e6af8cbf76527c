//! The admin event stream and a registry family's keys: each key's change names its key, and
//! when many keys change at once the stream stays bounded: per family, the first 20 changes
//! between two metrics ticks are sent one by one, the rest as one `keys` event. It runs
//! [`alone`](crate::support::alone), so that no other test's breakers put events on the
//! process-wide channel.

use std::time::Duration;

use breakerbox_runtime::{Config, ManualClock, registry};
use serde_json::json;
use tower::ServiceExt;

use crate::support::{get, next_event};

/// Changes of one family's keys sent one by one between two ticks (`admin`'s limit).
const KEY_CHANGES: usize = 20;

#[tokio::test(start_paused = true)]
async fn many_keys_changing_at_once_are_coalesced_per_family_and_the_stream_says_so() {
    let _alone = crate::support::alone().await;
    let clock = ManualClock::new();
    assert!(registry().set_clock("stream.hosts", clock.clone()));
    let hosts = registry()
        .family::<String>("stream.hosts", || {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(30))
                .build()
                .unwrap()
        })
        .unwrap();
    let single = registry().get_or_create("stream.single", Config::default);
    let res = breakerbox_admin::router()
        .oneshot(get("/events"))
        .await
        .unwrap();
    let mut body = res.into_body().into_data_stream();
    // The tick due at connecting.
    assert_eq!(next_event(&mut body).await.0, "metrics");

    // 500 hosts fail at once, and a single breaker changes among them.
    for i in 0..500 {
        let _ = hosts.call(&format!("host-{i:03}"), || Err::<(), _>("refused"));
        if i == 250 {
            single.force_open();
        }
    }

    // The first 20 key changes one by one, each with its key; the single breaker's change is
    // never held back.
    for i in 0..KEY_CHANGES {
        let (name, change) = next_event(&mut body).await;
        assert_eq!(name, "state");
        assert_eq!(change["name"], "stream.hosts");
        assert_eq!(change["key"], format!("host-{i:03}"));
        assert_eq!(change["to"], "open");
    }
    let (name, change) = next_event(&mut body).await;
    assert_eq!(name, "state");
    assert_eq!(change["name"], "stream.single");
    assert!(change.get("key").is_none(), "{change}");

    // The next tick, then the rest of the family's changes in one event.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(next_event(&mut body).await.0, "metrics");
    let (name, keys) = next_event(&mut body).await;
    assert_eq!(name, "keys");
    let first: Vec<String> = (20..30).map(|i| format!("host-{i:03}")).collect();
    assert_eq!(
        keys,
        json!({
            "name": "stream.hosts",
            "changes": 480,
            "to": { "open": 480 },
            "first_keys": first,
            "limit": 20,
        })
    );

    // A new window: the next changes go out one by one again.
    hosts.get("host-000").unwrap().reset();
    let (name, change) = next_event(&mut body).await;
    assert_eq!(name, "state");
    assert_eq!(
        (&change["key"], &change["to"]),
        (&json!("host-000"), &json!("closed"))
    );
}
