//! The breaker JSON's `latency`: p50, p90 and p99 of the last minute, in seconds.

use std::time::Duration;

use breakerbox_admin as admin;
use breakerbox_runtime::{Config, ManualClock, registry};

use crate::support::*;

fn near(v: &serde_json::Value, want: f64) -> bool {
    v.as_f64()
        .is_some_and(|got| (got - want).abs() <= want / 16.0)
}

#[tokio::test]
async fn the_breaker_json_gives_the_last_minutes_percentiles() {
    let _shared = crate::support::shared().await;
    let clock = ManualClock::new();
    registry().set_clock("adm-latency", clock.clone());
    let b = registry().get_or_create("adm-latency", || {
        Config::builder().latency(true).build().unwrap()
    });
    for i in 0..100u64 {
        let ms = match i {
            0..90 => 3,
            90..99 => 50,
            _ => 900,
        };
        b.call(|| {
            clock.advance(Duration::from_millis(ms));
            Ok::<_, &str>(())
        })
        .unwrap();
    }
    let (_, _, body) = send(&admin::router(), get("/breakers/adm-latency")).await;
    let l = &body["latency"];
    assert_eq!(l["calls"], 100);
    assert!(
        near(&l["p50"], 0.003) && near(&l["p90"], 0.003) && near(&l["p99"], 0.050),
        "{l}"
    );
    // A minute on, the last minute holds no call.
    clock.advance(Duration::from_secs(61));
    let (_, _, body) = send(&admin::router(), get("/breakers/adm-latency")).await;
    assert_eq!(body["latency"]["calls"], 0);
    assert!(body["latency"]["p50"].is_null());

    let (plain, _) = breaker("adm-latency-none");
    plain.call(|| Ok::<_, &str>(())).unwrap();
    let (_, _, body) = send(&admin::router(), get("/breakers/adm-latency-none")).await;
    assert!(body["latency"].is_null(), "{body}");
}
