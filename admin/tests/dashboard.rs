//! The admin dashboard in a real browser: Debian's `chromium`, driven through `chromedriver`
//! with the WebDriver client `fantoccini`, all on 127.0.0.1.
//!
//! The page is served by the admin router, mounted under `/admin` as an application would, with
//! traffic running through a breaker. The test checks what on-call reads on a tile during a real
//! trip: the last 10 s by kind, calls per second without the rejections, latency p50/p99, error
//! rate, a sparkline that keeps moving while open; sorting and filtering the tiles; a family's
//! open keys with time left and last failure, a key search, and a key reset with the token; and
//! every tile going grey and "stale" once the stream drops.
//!
//! It saves its pictures in `target/` (`dashboard.png`, `dashboard-stale.png`); with
//! `BREAKERBOX_SCREENSHOTS=1` it writes them to `docs/img/` instead, the README's pictures.
//!
//! `scripts/test` installs `chromium` and `chromium-driver` when they are missing. Run alone
//! without them, this test says so and passes; with `CI=true` it fails instead. The fleet view
//! has a test of its own, `dashboard_fleet.rs`.

mod browser;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use breakerbox_admin::Admin;
use breakerbox_runtime::{
    Breaker, Config, ConfigBuilder, ManualClock, State, Timeout, Window, registry,
};
use fantoccini::{Client, Locator};
use serde_json::Value;

use browser::{DEADLINE, target_dir, text_of, tile_in, until};

const TOKEN: &str = "dashboard-test-token";

/// The breaker `name` on a manual clock, with `config`; its config's site is the caller's.
#[track_caller]
fn breaker_with(name: &str, config: ConfigBuilder) -> Breaker {
    registry().set_clock(name, ManualClock::new());
    registry().get_or_create(name, || config.build().unwrap())
}

/// The breaker `name` on a manual clock: opens after 2 failures, for an hour.
fn breaker(name: &str) -> Breaker {
    breaker_with(
        name,
        Config::builder()
            .failures(2)
            .open_for(Duration::from_secs(3600)),
    )
}

/// Where the pictures go: `docs/img/` with `BREAKERBOX_SCREENSHOTS=1`, else the target dir.
fn picture(name: &str) -> PathBuf {
    if std::env::var("BREAKERBOX_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/img");
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    } else {
        target_dir().join(name)
    }
}

async fn save(browser: &Client, name: &str) {
    let shot = browser.screenshot().await.unwrap();
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(picture(name), &shot).unwrap();
}

#[tokio::test]
async fn the_dashboard_shows_a_trip_under_traffic_to_on_call() {
    let Some(installed) = browser::installed() else {
        return;
    };

    // `checkout` times its calls; its traffic runs below, on its manual clock: each call takes
    // 3 ms, one in ten 40 ms.
    let clock = ManualClock::new();
    registry().set_clock("checkout", clock.clone());
    let checkout = registry().get_or_create("checkout", || {
        Config::builder()
            .failures(5)
            .open_for(Duration::from_secs(3600))
            .latency(true)
            .build()
            .unwrap()
    });
    // Breakers in each state, so the page (and its picture) shows every colour.
    let search_line = line!() + 1;
    let search = breaker_with(
        "search",
        Config::builder()
            .failure_rate(50)
            .window(Window::Calls(20))
            .min_calls(10),
    );
    for i in 0..8 {
        let _ = search.call(|| {
            if i % 4 == 3 {
                Err("index shard timed out")
            } else {
                Ok(())
            }
        });
    }
    breaker("payments").force_open();
    breaker("recommendations").disable();
    // A family that times its calls, on a manual clock: 12 ms a call, 300 ms on `c.example`.
    let hosts_clock = ManualClock::new();
    registry().set_clock("hosts", hosts_clock.clone());
    let hosts = registry()
        .family::<String>("hosts", || {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(3600))
                .latency(true)
                .build()
                .unwrap()
        })
        .unwrap();
    for host in [
        "a.example",
        "b.example",
        "c.example",
        "api.internal",
        "a.example",
    ] {
        let _ = hosts.call(host, || {
            hosts_clock.advance(Duration::from_millis(if host == "c.example" {
                300
            } else {
                12
            }));
            if host == "b.example" {
                Err("connection refused")
            } else {
                Ok(())
            }
        });
    }

    // The application: the admin router under /admin, on a free loopback port, on a runtime
    // of its own, so that shutting that runtime down drops the page's event stream.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    // axum's `nest` serves the page at `/admin` (not `/admin/`); the page finds `/admin/events`.
    let page = format!("http://{}/admin", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let app = axum::Router::new().nest("/admin", Admin::new().token(TOKEN).router());
            // With the peer's address, which the controls' records name.
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            tokio::select! {
                _ = axum::serve(listener, app) => {}
                _ = stopped => {}
            }
        });
        // Dropping the runtime drops every connection's task with it.
    });

    // Traffic: a call every 5 ms, successes until `failing` is set, failures after: the 2nd
    // and 4th of those hang and are timed out after 20 ms (real time), the others answer 502.
    let failing = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (checkout, failing, clock) = (checkout.clone(), failing.clone(), clock.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(5));
            let mut failed = 0u64;
            for n in 0u64.. {
                every.tick().await;
                if failing.load(Ordering::Relaxed) {
                    failed += 1;
                    if failed == 2 || failed == 4 {
                        let Ok(permit) = checkout.try_acquire() else {
                            continue;
                        };
                        let after = Duration::from_millis(20);
                        let hung = std::future::pending::<()>();
                        assert!(tokio::time::timeout(after, hung).await.is_err());
                        permit.timed_out(&Timeout::new("checkout", after));
                        continue;
                    }
                }
                let _ = checkout.call(|| {
                    clock.advance(Duration::from_millis(if n % 10 == 0 { 40 } else { 3 }));
                    if failing.load(Ordering::Relaxed) {
                        Err("payment gateway answered 502")
                    } else {
                        Ok(())
                    }
                });
            }
        })
    };

    let (_driver, browser) = browser::open(installed).await;

    browser.goto(&page).await.unwrap();
    tile_in(&browser, "checkout", "closed").await;
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css("#live.on"))
        .await
        .expect("the page connects to the event stream");

    let tile = r#"section.tile[data-name="checkout"]"#;
    let cell = |k: &str| format!(r#"{tile} td[data-k="{k}"]"#);
    let field = |f: &str| format!(r#"{tile} dd[data-f="{f}"]"#);
    // Closed, with traffic: successes in the last 10 s, calls per second, latency.
    until(
        &browser,
        "checkout's tile shows its traffic and latency",
        &format!(
            "return Number({}) > 20 && Number({}) > 5 && {}.includes('ms') && {}.includes('ms') && {} === '0.0 %'",
            text_of(&cell("success")),
            text_of(&field("rate")),
            text_of(&field("p50")),
            text_of(&field("p99")),
            text_of(&field("err")),
        ),
    )
    .await;
    // p50 is a 3 ms call, p99 a 40 ms one (each within 6.25%).
    let p50 = browser
        .execute(&format!("return {}", text_of(&field("p50"))), vec![])
        .await
        .unwrap();
    let p99 = browser
        .execute(&format!("return {}", text_of(&field("p99"))), vec![])
        .await
        .unwrap();
    let ms = |v: &Value| {
        v.as_str()
            .unwrap()
            .trim_end_matches(" ms")
            .parse::<f64>()
            .unwrap()
    };
    assert!((ms(&p50) - 3.0).abs() <= 3.0 / 16.0 + 0.05, "p50 {p50}");
    assert!((ms(&p99) - 40.0).abs() <= 40.0 / 16.0 + 0.5, "p99 {p99}");
    // p90 falls on a 3 ms or a 40 ms call, as the count of calls so far has it (one in ten is
    // 40 ms); the family below, whose calls are fixed, pins it.
    let p90 = browser
        .execute(&format!("return {}", text_of(&field("p90"))), vec![])
        .await
        .unwrap();
    assert!(
        ms(&p50) <= ms(&p90) && ms(&p90) <= ms(&p99),
        "p50 {p50}, p90 {p90}, p99 {p99}"
    );

    // The trip, with the traffic going on.
    failing.store(true, Ordering::Relaxed);
    tile_in(&browser, "checkout", "open").await;
    assert_eq!(checkout.state(), State::Open);
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::XPath(
            r#"//section[@data-name="checkout"]/div[@class="why" and contains(., "because 5 calls failed in a row (threshold 5); last failure: 'payment gateway answered 502'")]"#,
        ))
        .await
        .expect("the explanation on the tile");
    until(
        &browser,
        "the tile counts failures, timeouts and rejections and an error rate",
        &format!(
            "return Number({}) === 3 && Number({}) === 2 && Number({}) > 10 && parseFloat({}) > 0",
            text_of(&cell("failure")),
            text_of(&cell("timeout")),
            text_of(&cell("rejected")),
            text_of(&field("err")),
        ),
    )
    .await;
    let m = checkout.metrics();
    assert_eq!((m.failures, m.timeouts), (5, 2));
    // The sparkline moves each tick while open: rejections are its traffic.
    let points = format!(
        r#"return document.querySelector('{tile} polyline.rejected').getAttribute('points')"#
    );
    let before = browser.execute(&points, vec![]).await.unwrap();
    until(
        &browser,
        "the sparkline moves while open",
        &format!(
            "return document.querySelector('{tile} polyline.rejected').getAttribute('points') !== {before}"
        ),
    )
    .await;
    save(&browser, "dashboard.png").await;

    // Sorted by state: open tiles first, in rank order all the way down.
    browser
        .find(Locator::Css("#sort"))
        .await
        .unwrap()
        .select_by_value("state")
        .await
        .unwrap();
    until(
        &browser,
        "tiles sorted by state",
        r#"const rank = {"open": 0, "forced-open": 1, "half-open": 2, "disabled": 3, "closed": 4};
           const r = [...document.querySelectorAll("section.tile")].map((t) => rank[t.dataset.state]);
           return r[0] === 0 && r.every((v, i) => i === 0 || r[i - 1] <= v);"#,
    )
    .await;
    // By error rate: the shown rates never go up down the page.
    browser
        .find(Locator::Css("#sort"))
        .await
        .unwrap()
        .select_by_value("error")
        .await
        .unwrap();
    until(
        &browser,
        "tiles sorted by error rate",
        r#"const e = [...document.querySelectorAll("section.tile:not(.family)")].map((t) => {
             const v = parseFloat(t.querySelector('dd[data-f="err"]').textContent);
             return Number.isNaN(v) ? -1 : v; });
           return e[0] > 0 && e.every((v, i) => i === 0 || e[i - 1] >= v);"#,
    )
    .await;
    // By volume: the calls and rejections of the last 10 s, as a breaker's tile counts them by
    // kind, never go up down the page ("slow" overlaps the others); checkout's rejections first.
    browser
        .find(Locator::Css("#sort"))
        .await
        .unwrap()
        .select_by_value("volume")
        .await
        .unwrap();
    until(
        &browser,
        "tiles sorted by volume",
        r#"const v = [...document.querySelectorAll("section.tile:not(.family)")].map((t) =>
             ["success", "failure", "timeout", "rejected", "ignored"].reduce((a, k) =>
               a + Number(t.querySelector('td[data-k="' + k + '"]').textContent), 0));
           return (v[0] > 0 && document.querySelector("section.tile").dataset.name === "checkout"
             && v.every((x, i) => i === 0 || v[i - 1] >= x)) || v.join(" ");"#,
    )
    .await;
    // Filtered by name: only checkout is shown.
    browser
        .find(Locator::Id("filter"))
        .await
        .unwrap()
        .send_keys("check")
        .await
        .unwrap();
    until(
        &browser,
        "the filter leaves checkout alone",
        r#"const shown = [...document.querySelectorAll("section.tile")].filter((t) => !t.hidden);
           return shown.length === 1 && shown[0].dataset.name === "checkout";"#,
    )
    .await;
    browser
        .find(Locator::Id("filter"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    browser
        .execute(
            "document.getElementById('filter').dispatchEvent(new Event('input')); return true",
            vec![],
        )
        .await
        .unwrap();

    // Calls per second leave the rejections out: 10 s after the trip, nothing ran, and the
    // rejections go on.
    until(
        &browser,
        "calls/s reads 0.0 while only rejections arrive",
        &format!(
            "return {} === '0.0' && Number({}) > 100 && Number({}) === 0",
            text_of(&field("rate")),
            text_of(&cell("rejected")),
            text_of(&cell("success")),
        ),
    )
    .await;
    traffic.abort();

    // The family: its latency over all its keys, its open key with time left and last
    // failure, and a search for any key.
    let family = r#"section.tile.family[data-family="hosts"]"#;
    until(
        &browser,
        "the family's latency is over all its keys: p50 a 12 ms call, p90 and p99 the 300 ms one",
        // Five calls: p90 is the 5th (rank ceil(0.9 × 5)). Each within 6.25%, the histogram's
        // resolution.
        &format!(
            "const p50 = {}, p90 = {}, p99 = {};
             return (p50.endsWith(' ms') && Math.abs(parseFloat(p50) - 12) <= 0.75
                 && p90.endsWith(' ms') && Math.abs(parseFloat(p90) - 300) <= 18.75
                 && p99.endsWith(' ms') && Math.abs(parseFloat(p99) - 300) <= 18.75)
                 || [p50, p90, p99].join(' / ')",
            text_of(&format!(r#"{family} dd[data-f="p50"]"#)),
            text_of(&format!(r#"{family} dd[data-f="p90"]"#)),
            text_of(&format!(r#"{family} dd[data-f="p99"]"#)),
        ),
    )
    .await;
    // Its last 10 s by kind and its sparkline, over all its keys, as a breaker's tile: three
    // calls on `a.example`, two rejected by the open `b.example`.
    for host in [
        "a.example",
        "b.example",
        "a.example",
        "b.example",
        "a.example",
    ] {
        let _ = hosts.call(host, || {
            hosts_clock.advance(Duration::from_millis(12));
            Ok::<_, &str>(())
        });
    }
    until(
        &browser,
        "the family's tile counts its keys' last 10 s by kind and draws the rejections",
        &format!(
            r#"const tile = document.querySelector({family:?});
               const kind = (k) => tile.querySelector('td[data-k="' + k + '"]').textContent;
               const got = ["success", "failure", "timeout", "rejected", "ignored"].map(kind).join(" ");
               const drawn = (tile.querySelector("polyline.rejected").getAttribute("points") || "")
                 .split(" ").some((p) => parseFloat(p.split(",")[1]) < 100);
               const rate = Number(tile.querySelector('dd[data-f="rate"]').textContent);
               return (got === "3 0 0 2 0" && rate > 0 && drawn) || [got, rate, drawn].join(" / ");"#
        ),
    )
    .await;
    let open_key = format!(r#"{family} ul.open-keys li[data-key="b.example"]"#);
    until(
        &browser,
        "the family lists its open key with time left, since when and last failure",
        // It opened at its failure; the family's clock has run 360 ms since, in the calls after
        // it (300 + 12 + 12 at the start, three of 12 above).
        &format!(
            "return ({left}.startsWith('open for ') && {since} === ' · since 360ms ago'
                 && {last}.includes('connection refused')) || [{left}, {since}, {last}].join(' / ')",
            left = text_of(&format!("{open_key} .left")),
            since = text_of(&format!("{open_key} .since")),
            last = text_of(&format!("{open_key} .last")),
        ),
    )
    .await;
    browser
        .find(Locator::Css(&format!("{family} input.key-search")))
        .await
        .unwrap()
        .send_keys("api.int")
        .await
        .unwrap();
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css(&format!(
            r#"{family} ul.key-results li[data-key="api.internal"][data-state="closed"]"#
        )))
        .await
        .expect("the key search finds a closed key");

    // The controls need the token: a refusal first, then the reset of checkout and of the key.
    let reset = format!(r#"{tile} button[data-action="reset"]"#);
    browser
        .find(Locator::Css(&reset))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::XPath(
            r#"//section[@data-name="checkout"]/div[@class="msg err" and text()="missing token: send the header `Authorization: Bearer <token>`"]"#,
        ))
        .await
        .expect("the refusal shown on the tile");
    assert_eq!(checkout.state(), State::Open);
    browser
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    browser
        .find(Locator::Css(&reset))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    tile_in(&browser, "checkout", "closed").await;
    assert_eq!(checkout.state(), State::Closed);
    // Its Events disclosure: the reset by the token's label from this browser's address, the
    // change it made, and the trip before them, newest first.
    let events = format!("{tile} details.events");
    until(
        &browser,
        "checkout's Events disclosure lists its reset, who did it and from where, and its trip",
        &format!(
            r#"const d = document.querySelector({events:?});
               if (!d) return "no disclosure";
               if (!d.open) d.querySelector("summary").click();
               const rows = [...d.querySelectorAll("li")].map((li) => li.querySelector(".what")?.textContent);
               const reset = rows.findIndex((r) => /^reset by admin from 127\.0\.0\.1:[0-9]+$/.test(r || ""));
               const closed = rows.indexOf("open → closed: reset by admin");
               const tripped = rows.findIndex((r) => (r || "").startsWith("closed → open: "));
               return (closed === 0 && reset === 1 && tripped > reset) || rows.join(" / ");"#
        ),
    )
    .await;
    // The open-key list is drawn again on every tick, so a button found by one WebDriver
    // command may be gone by the next: the page finds and clicks it in one script.
    let key_reset = format!(r#"{open_key} button[data-key-action="reset"]"#);
    until(
        &browser,
        "the key's reset button is clicked",
        &format!(
            "const b = document.querySelector({key_reset:?}); if (!b) return false; b.click(); return true"
        ),
    )
    .await;
    until(
        &browser,
        "the key's reset is done and the family lists no open key",
        &format!(
            "return document.querySelector({open_key:?}) === null && {} === '0'",
            text_of(&format!(r#"{family} dd[data-f="open"]"#))
        ),
    )
    .await;
    assert_eq!(
        hosts.breaker(&"b.example".to_owned()).state(),
        State::Closed
    );

    // The Config disclosure of `search`'s tile: each key's value and where it came from, the
    // code that made the breaker and a config file's table over it. The tile and its
    // disclosure live across ticks; the page opens it and reads its rows in one script.
    registry()
        .load_toml_str("dashboard.toml", "[breakers.search]\nopen_for = \"90s\"\n")
        .unwrap();
    let config = r#"section.tile[data-name="search"] details.config"#;
    until(
        &browser,
        "search's Config disclosure shows its keys, values and sources",
        &format!(
            r#"const d = document.querySelector({config:?});
               if (!d) return "no disclosure";
               if (!d.open) d.querySelector("summary").click();
               const row = (k) => {{ const r = d.querySelector('tr[data-key="' + k + '"]');
                 return r ? [...r.cells].map((c) => c.textContent).join(" | ") : null; }};
               const rate = row("failure_rate"), open = row("open_for"), probes = row("half_open_calls");
               return (rate === "failure_rate | 50 | get_or_create at admin/tests/dashboard.rs:{search_line}"
                 && open === "open_for | 90s | [breakers.search] at dashboard.toml:2"
                 && probes === "half_open_calls | 1 | the built-in default")
                 || [d.open, d.textContent.slice(0, 300), rate, open, probes].join(" / ");"#
        ),
    )
    .await;

    // The family's tile has its Config disclosure too: the family's keys and their sources.
    let family_config = format!("{family} details.config");
    until(
        &browser,
        "the family's Config disclosure shows its keys, values and sources",
        &format!(
            r#"const d = document.querySelector({family_config:?});
               if (!d) return "no disclosure";
               if (!d.open) d.querySelector("summary").click();
               const row = (k) => {{ const r = d.querySelector('tr[data-key="' + k + '"]');
                 return r ? [...r.cells].map((c) => c.textContent) : null; }};
               const failures = row("failures"), open = row("open_for");
               return (failures !== null && failures[1] === "1" && failures[2].includes("admin/tests/dashboard.rs")
                 && open !== null && open[1] === "3600s")
                 || [d.open, d.textContent.slice(0, 300), failures, open].join(" / ");"#
        ),
    )
    .await;

    // The stream drops (the server's runtime goes): every tile goes grey and says "stale".
    stop.send(()).unwrap();
    server.join().unwrap();
    until(
        &browser,
        "every tile says stale",
        r#"const all = [...document.querySelectorAll("section.tile")];
           return all.length >= 5 && all.every((t) => t.classList.contains("stale")
             && getComputedStyle(t.querySelector(".stale-label")).display !== "none"
             && t.querySelector(".stale-label").textContent === "stale");"#,
    )
    .await;
    save(&browser, "dashboard-stale.png").await;

    browser.close().await.unwrap();
}
