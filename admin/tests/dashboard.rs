//! The admin dashboard in a real browser: Debian's `chromium`, driven through `chromedriver`
//! with the WebDriver client `fantoccini`, all on 127.0.0.1.
//!
//! The page is served by the admin router, mounted under `/admin` as an application would. The
//! test trips a breaker and sees its tile turn open (the event stream), enters the token, clicks
//! reset and sees the tile turn closed, then opens the tile's Config disclosure and reads where
//! two values came from; it saves `target/dashboard.png` on the way.
//!
//! `scripts/test` installs `chromium` and `chromium-driver` when they are missing. Run alone
//! without them, this test says so and passes; with `CI=true` it fails instead.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use breakerbox_admin::Admin;
use breakerbox_runtime::{Breaker, Config, ConfigBuilder, ManualClock, State, Window, registry};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

const TOKEN: &str = "dashboard-test-token";

/// How long any one wait may take before the test fails: generous, for a loaded machine. Each
/// wait ends as soon as its condition holds.
const DEADLINE: Duration = Duration::from_secs(20);

/// The first of `names` found on `PATH`.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|p| p.is_file())
}

/// chromedriver, killed when dropped (the test's own child, by its handle).
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts chromedriver on a free loopback port (it picks one for `--port=0`) and waits until
/// it says which.
fn start_driver(chromedriver: &PathBuf) -> (Driver, u16) {
    let mut child = Command::new(chromedriver)
        .arg("--port=0")
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {}: {e}", chromedriver.display()));
    let stdout = child.stdout.take().unwrap();
    let driver = Driver(child);
    // Its output is read on a thread, so that waiting for the line has a deadline.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        match rx.recv_timeout(DEADLINE) {
            // "ChromeDriver was started successfully on port 37599."
            Ok(line) if line.contains("started successfully") => {
                let port = line
                    .trim_end_matches('.')
                    .rsplit(' ')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("no port in chromedriver's {line:?}"));
                return (driver, port);
            }
            Ok(_) => continue,
            Err(e) => panic!("chromedriver did not say it started ({e})"),
        }
    }
}

/// The breaker `name` on a manual clock, with `config`.
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

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The tile of `name` in `state`, once it is.
async fn tile_in(browser: &Client, name: &str, state: &str) {
    let css = format!(r#"section.tile[data-name="{name}"][data-state="{state}"]"#);
    match browser
        .wait()
        .at_most(DEADLINE)
        .every(Duration::from_millis(50))
        .for_element(Locator::Css(&css))
        .await
    {
        Ok(_) => {}
        Err(e) => {
            failed(
                browser,
                &format!("the tile of {name} did not turn {state}: {e}"),
            )
            .await
        }
    }
}

/// Fails the test with `what`, after saving what the browser shows for whoever reads the log:
/// `target/dashboard-failure.png` and the page's HTML as it is now.
async fn failed(browser: &Client, what: &str) -> ! {
    let dir = target_dir();
    if let Ok(shot) = browser.screenshot().await {
        let _ = std::fs::write(dir.join("dashboard-failure.png"), shot);
    }
    let text = browser
        .execute("return document.body.innerText", vec![])
        .await
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    panic!("{what}\nthe page's text now (screenshot in target/dashboard-failure.png):\n{text}");
}

#[tokio::test]
async fn the_dashboard_shows_a_trip_live_and_resets_with_the_token() {
    let (Some(chromium), Some(chromedriver)) = (
        on_path(&["chromium", "chromium-browser"]),
        on_path(&["chromedriver"]),
    ) else {
        let message = "the dashboard's browser test needs Debian's `chromium` and \
                       `chromium-driver` (scripts/test installs them: apt-get install -y \
                       chromium chromium-driver)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}");
        }
        eprintln!("skipped: {message}");
        return;
    };

    // Breakers in each state, so the page (and its screenshot) shows every colour.
    let checkout = breaker("checkout");
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
    let tenants = registry()
        .family::<String>("tenants", || Config::builder().failures(1).build().unwrap())
        .unwrap();
    for tenant in ["acme", "globex", "initech"] {
        let _ = tenants.call(tenant, || {
            if tenant == "globex" {
                Err("quota exceeded")
            } else {
                Ok(())
            }
        });
    }

    // The application: the admin router under /admin, on a free loopback port.
    let app = axum::Router::new().nest("/admin", Admin::new().token(TOKEN).router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // axum's `nest` serves the page at `/admin` (not `/admin/`); the page finds `/admin/events`.
    let page = format!("http://{}/admin", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (_driver, port) = start_driver(&chromedriver);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,880", "--no-proxy-server",
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let browser = ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a chromium session through chromedriver");

    browser.goto(&page).await.unwrap();
    tile_in(&browser, "checkout", "closed").await;
    // Connected to the event stream before the trip, so the change arrives as an event.
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::Css("#live.on"))
        .await
        .expect("the page connects to the event stream");

    for _ in 0..2 {
        let _ = checkout.call(|| Err::<(), _>("payment gateway answered 502"));
    }
    assert_eq!(checkout.state(), State::Open);
    tile_in(&browser, "checkout", "open").await;
    // The state event's refresh brings the last failure and the time left open.
    let tile = r#"section.tile[data-name="checkout"]"#;
    let last = browser
        .find(Locator::Css(tile))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(last.contains("open"), "{last}");
    // Breaker::explain's sentence on the tile, once the refresh brought it.
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::XPath(
            r#"//section[@data-name="checkout"]/div[@class="why" and contains(., "because 2 calls failed in a row (threshold 2); last failure: 'payment gateway answered 502'")]"#,
        ))
        .await
        .expect("the explanation on the tile");

    let shot = browser.screenshot().await.unwrap();
    let path = target_dir().join("dashboard.png");
    std::fs::write(&path, &shot).unwrap();
    assert!(shot.starts_with(b"\x89PNG"), "a PNG at {}", path.display());

    // Without the token the click is refused, and the tile says why.
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
    std::fs::write(
        target_dir().join("dashboard-reset.png"),
        browser.screenshot().await.unwrap(),
    )
    .unwrap();

    // The tile's Config disclosure reads where each value came from, when opened.
    browser
        .find(Locator::Css(&format!("{tile} details.config summary")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::XPath(
            r#"//section[@data-name="checkout"]//tr[@data-key="failures" and td[2]="2" and contains(td[3], "dashboard.rs")]"#,
        ))
        .await
        .expect("the config's failures = 2, from the code that made the breaker");
    browser
        .wait()
        .at_most(DEADLINE)
        .for_element(Locator::XPath(
            r#"//section[@data-name="checkout"]//tr[@data-key="half_open_calls" and td[3]="the built-in default"]"#,
        ))
        .await
        .expect("a key no layer names, from the built-in default");

    browser.close().await.unwrap();
}
