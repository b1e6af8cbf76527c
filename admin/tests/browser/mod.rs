//! What the dashboard's browser tests share: Debian's `chromium`, driven through
//! `chromedriver` with the WebDriver client `fantoccini`, all on 127.0.0.1, and waits with a
//! deadline that save what the page shows when they fail.
//!
//! `scripts/test` installs `chromium` and `chromium-driver` when they are missing. Run alone
//! without them, a browser test says so and passes; with `CI=true` it fails instead.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long any one wait may take before the test fails: generous, for a loaded machine. Each
/// wait ends as soon as its condition holds.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The first of `names` found on `PATH`.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|p| p.is_file())
}

/// chromedriver in a process group of its own, which the chromium it starts joins: dropping it
/// kills that group (the test's own children, by the group's id), so a test that fails before
/// it closed its session leaves no browser running. Killing chromedriver alone would.
pub struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        #[cfg(unix)]
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts chromedriver on a free loopback port (it picks one for `--port=0`) and waits until
/// it says which.
fn start_driver(chromedriver: &PathBuf) -> (Driver, u16) {
    let mut command = Command::new(chromedriver);
    command
        .arg("--port=0")
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
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

/// Whether this machine has the browser: `chromium` and `chromedriver` on the `PATH`. Without
/// them it says so on stderr and answers `None` (the test then passes), or fails under
/// `CI=true`.
pub fn installed() -> Option<(PathBuf, PathBuf)> {
    if let (Some(chromium), Some(chromedriver)) = (
        on_path(&["chromium", "chromium-browser"]),
        on_path(&["chromedriver"]),
    ) {
        return Some((chromium, chromedriver));
    }
    let message = "the dashboard's browser tests need Debian's `chromium` and \
                   `chromium-driver` (scripts/test installs them: apt-get install -y \
                   chromium chromium-driver)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    eprintln!("skipped: {message}");
    None
}

/// A headless chromium session through a chromedriver of its own, 1280×1100 px; the driver
/// goes when its handle is dropped.
pub async fn open((chromium, chromedriver): (PathBuf, PathBuf)) -> (Driver, Client) {
    let (driver, port) = start_driver(&chromedriver);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1100", "--no-proxy-server",
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let browser = ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a chromium session through chromedriver");
    (driver, browser)
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The tile of `name` in `state`, once it is.
pub async fn tile_in(browser: &Client, name: &str, state: &str) {
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
/// `target/<test>-failure.png` (`dashboard-failure.png` for tests/dashboard.rs) and the page's
/// text as it is now.
pub async fn failed(browser: &Client, what: &str) -> ! {
    let shot = target_dir().join(format!("{}-failure.png", env!("CARGO_CRATE_NAME")));
    if let Ok(png) = browser.screenshot().await {
        let _ = std::fs::write(&shot, png);
    }
    let text = browser
        .execute("return document.body.innerText", vec![])
        .await
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    panic!(
        "{what}\nthe page's text now (screenshot in {}):\n{text}",
        shot.display()
    );
}

/// Runs `script` (its body returns a value) until it returns `true`, each 50 ms, for at most
/// [`DEADLINE`]; fails with `what` and the last value otherwise.
pub async fn until(browser: &Client, what: &str, script: &str) {
    let start = std::time::Instant::now();
    let mut last = Value::Null;
    while start.elapsed() < DEADLINE {
        last = browser.execute(script, vec![]).await.unwrap();
        if last == Value::Bool(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    failed(
        browser,
        &format!("{what} (the script's last answer: {last})"),
    )
    .await
}

/// The text of the first element `css` matches, as JavaScript reads it.
pub fn text_of(css: &str) -> String {
    format!("(document.querySelector({css:?}) || {{textContent: ''}}).textContent")
}
