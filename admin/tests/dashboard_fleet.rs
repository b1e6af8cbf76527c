//! The dashboard's fleet view in a real browser (feature `fleet`): the tile of a shared breaker
//! says how many instances report it and each one's local state, as `GET /fleet` has them, and
//! follows them as they change, until the fleet stops.
//!
//! Two fleet instances run in this process, as the fleet's own tests stand several instances in
//! one (fleet/tests/fleet/instances.rs): `web-1` shares the registry's `ledger`, the breaker the
//! page shows (and `audit`, alone, under `FleetTrip::Any`), and serves the admin router; `web-2`
//! shares a `Breaker::new` of the same name, a breaker of its own. They meet only in a real `redis-server` on 127.0.0.1: `scripts/test`'s
//! (`$BREAKERBOX_TEST_REDIS_URL`), else one the test starts. One process is enough: each
//! instance's local state is its own breaker's, and `web-1` learns `web-2`'s only from the
//! heartbeats in the store.
//!
//! Browser, skip and failure pictures as in tests/dashboard.rs (`tests/browser/`); without
//! `redis-server` it fails.
//!
//!   cargo test -p breakerbox-admin --features fleet --test dashboard_fleet

mod browser;
mod redis;

use std::time::Duration;

use breakerbox_admin::Admin;
use breakerbox_fleet::{Fleet, FleetConfig, FleetTrip, Quorum};
use breakerbox_runtime::{Breaker, Config, State, registry};
use fantoccini::Client;

use browser::{target_dir, text_of, tile_in, until};
use redis::Redis;

/// Opens on one failure, for a minute: a trip stays until something changes it.
fn trip_once() -> Config {
    Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// An instance of the fleet: heartbeats every 200 ms (each lives 600 ms), and a local trip opens
/// the fleet only once two live instances are open.
fn config(url: &str, prefix: &str, instance: &str) -> FleetConfig {
    FleetConfig::new(url)
        .prefix(prefix)
        .instance(instance)
        .resync_every(Duration::from_millis(200))
        .fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)))
}

/// Waits until the tile of `breaker` is in `state` and its fleet line reads `hosts`, with one
/// chip per instance of `chips` (`(name, whether it is this process, its local state)`), in that
/// order.
async fn fleet_line(
    browser: &Client,
    what: &str,
    (breaker, state): (&str, &str),
    hosts: &str,
    chips: &[(&str, bool, &str)],
) {
    let tile = format!(r#"section.tile[data-name="{breaker}"]"#);
    let want = chips
        .iter()
        .map(|(name, this, local)| {
            let here = if *this { " (here)" } else { "" };
            format!("{name}={local}:{name}{here} {local}")
        })
        .collect::<Vec<_>>()
        .join(" | ");
    until(
        browser,
        what,
        &format!(
            r#"const t = document.querySelector({tile:?});
               const f = t && t.querySelector("div.fleet");
               if (!f) return "no fleet line on the tile";
               const chips = [...f.querySelectorAll("span.host")]
                 .map((c) => c.dataset.instance + "=" + c.dataset.state + ":" + c.textContent);
               const got = [t.dataset.state, {hosts_text}, chips.join(" | ")];
               const want = [{state:?}, {hosts:?}, {want:?}];
               return got.every((v, i) => v === want[i]) || got.join(" / ");"#,
            hosts_text = text_of(&format!("{tile} div.fleet span.hosts")),
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_breakers_tile_shows_each_instances_local_state_as_it_changes() {
    let Some(installed) = browser::installed() else {
        return;
    };
    let redis = Redis::start().unwrap_or_else(|e| {
        panic!(
            "the fleet view's browser test needs redis-server (scripts/test installs it: \
             apt-get install -y redis-server), or BREAKERBOX_TEST_REDIS_URL: {e}"
        )
    });
    let prefix = format!("dashfleet{}", std::process::id());
    let ledger = registry().get_or_create("ledger", trip_once);
    // `audit` is web-1's alone, and any instance's trip of it is the fleet's.
    let _audit = registry().get_or_create("audit", trip_once);
    let web1 = Fleet::start(
        config(&redis.url, &prefix, "web-1")
            .share("ledger")
            .share("audit")
            .fleet_trip_for("audit", FleetTrip::Any),
    )
    .unwrap();
    let web2 = Fleet::start(config(&redis.url, &prefix, "web-2")).unwrap();
    let theirs = Breaker::new("ledger", trip_once());
    web2.share(&theirs);

    // web-1's admin router, with its fleet view, under /admin on a free loopback port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let page = format!("http://{}/admin", listener.local_addr().unwrap());
    let app = axum::Router::new().nest("/admin", Admin::new().fleet(web1.view()).router());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let (_driver, browser) = browser::open(installed).await;
    browser.goto(&page).await.unwrap();
    tile_in(&browser, "ledger", "closed").await;
    let two = "fleet: 2 hosts reporting · quorum 2";
    fleet_line(
        &browser,
        "both instances report ledger, closed",
        ("ledger", "closed"),
        two,
        &[("web-1", true, "closed"), ("web-2", false, "closed")],
    )
    .await;
    // Heartbeats are one per instance, not one per breaker: the line of a breaker lists every
    // live instance of the fleet, and one that does not share it (web-2 here) reads closed.
    fleet_line(
        &browser,
        "audit's line reads the fleet's live hosts, and its mode",
        ("audit", "closed"),
        "fleet: 2 hosts reporting · any instance trips the fleet",
        &[("web-1", true, "closed"), ("web-2", false, "closed")],
    )
    .await;

    // web-2's own breaker trips: its chip turns open. One open of two live is no quorum, so the
    // fleet stays closed, and so do this process's breaker and its tile.
    let _ = theirs.call(|| Err::<(), _>("ledger db refused"));
    assert_eq!(theirs.state(), State::Open);
    fleet_line(
        &browser,
        "web-2's chip turns open, web-1's and the tile stay closed",
        ("ledger", "closed"),
        two,
        &[("web-1", true, "closed"), ("web-2", false, "open")],
    )
    .await;
    assert_eq!(
        ledger.state(),
        State::Closed,
        "one open of two is no quorum"
    );
    let shot = browser.screenshot().await.unwrap();
    std::fs::write(target_dir().join("dashboard-fleet.png"), shot).unwrap();

    // A reset there (a manual change: the fleet's, under a quorum too) closes it again.
    theirs.reset();
    fleet_line(
        &browser,
        "web-2's chip turns closed again",
        ("ledger", "closed"),
        two,
        &[("web-1", true, "closed"), ("web-2", false, "closed")],
    )
    .await;

    // web-2 stops: its heartbeat expires, and the line counts one host.
    drop(web2);
    fleet_line(
        &browser,
        "web-2 leaves the fleet line",
        ("ledger", "closed"),
        "fleet: 1 host reporting · quorum 2",
        &[("web-1", true, "closed")],
    )
    .await;

    // web-1's fleet stops: the view lists nothing, and the line goes.
    drop(web1);
    until(
        &browser,
        "the fleet line goes with the fleet",
        r#"const t = document.querySelector('section.tile[data-name="ledger"]');
           return t !== null && t.querySelector("div.fleet") === null;"#,
    )
    .await;

    browser.close().await.unwrap();
    server.abort();
}
