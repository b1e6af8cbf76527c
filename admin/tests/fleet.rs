//! `GET /fleet` (feature `fleet`): the fleet view of the admin JSON, with instances that are
//! real processes. This test binary starts copies of itself as the other instances (the test
//! `an_instance_process` acts only when started so), all sharing `payments` through a real
//! `redis-server` on 127.0.0.1, and reads the view from its own router.
//!
//!   cargo test -p breakerbox-admin --features fleet --test fleet

#[cfg(feature = "fleet")]
use std::io::{BufRead, BufReader};
#[cfg(feature = "fleet")]
use std::process::{Child, Command, Stdio};
#[cfg(feature = "fleet")]
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

#[cfg(feature = "fleet")]
mod redis;

#[cfg(feature = "fleet")]
const CHILD: &str = "BREAKERBOX_ADMIN_FLEET_CHILD";

#[cfg(feature = "fleet")]
fn config(url: &str, prefix: &str, instance: &str) -> breakerbox_fleet::FleetConfig {
    use breakerbox_fleet::{FleetConfig, FleetTrip, Quorum};
    FleetConfig::new(url)
        .prefix(prefix)
        .share("payments")
        .instance(instance)
        .resync_every(Duration::from_millis(200))
        .fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)))
}

#[cfg(feature = "fleet")]
fn payments() -> breakerbox_runtime::Breaker {
    breakerbox_runtime::registry().get_or_create("payments", || {
        breakerbox_runtime::Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(60))
            .build()
            .unwrap()
    })
}

/// The keyed family the `key` instances share: a key opens on its first failure, for a minute.
#[cfg(feature = "fleet")]
fn shared_hosts() -> breakerbox_runtime::BreakerMap<String> {
    breakerbox_runtime::registry()
        .family::<String>("shared-hosts", || {
            breakerbox_runtime::Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(60))
                .build()
                .unwrap()
        })
        .unwrap()
}

/// One instance, when started by the tests below (`BREAKERBOX_ADMIN_FLEET_CHILD=<url> <prefix>
/// <instance> <fail|stay|key>`): shares `payments`, fails one call if told, says `ready`, and
/// runs until its stdin closes. With `key` it shares the family `shared-hosts` instead, fails
/// one call of its key `down.example`, and answers each line `state` with that key's state
/// and explanation (`state <state> <explanation>`).
#[cfg(feature = "fleet")]
#[test]
fn an_instance_process() {
    let Ok(args) = std::env::var(CHILD) else {
        return; // not started as an instance: nothing to do
    };
    let args: Vec<&str> = args.split(' ').collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let b = payments();
    if args[3] == "key" {
        return key_instance(&rt, &args);
    }
    let _fleet = {
        let _guard = rt.enter();
        breakerbox_fleet::Fleet::start(config(args[0], args[1], args[2])).unwrap()
    };
    if args[3] == "fail" {
        let _ = b.call(|| Err::<(), _>("refused"));
    }
    // Straight to the process's stdout: the test harness may capture `println!`.
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }
    let (done, closed) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_line(&mut String::new());
        let _ = done.send(());
    });
    rt.block_on(async {
        let _ = closed.await;
    });
}

/// The `key` instance of `an_instance_process`.
#[cfg(feature = "fleet")]
fn key_instance(rt: &tokio::runtime::Runtime, args: &[&str]) {
    use std::io::Write;
    let hosts = shared_hosts();
    let _fleet = {
        let _guard = rt.enter();
        breakerbox_fleet::Fleet::start(keyed_config(args[0], args[1], args[2])).unwrap()
    };
    let _ = hosts.call("down.example", || Err::<(), _>("HTTP 503"));
    let say = |line: String| {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    say("ready".to_owned());
    // Lines are answered on a thread of their own while this one drives the fleet's task.
    let (done, closed) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            match line {
                Ok(line) if line.trim() == "state" => {
                    let key = hosts.get("down.example").expect("the key is held");
                    say(format!("state {:?} {}", key.state(), key.explain()));
                }
                _ => break,
            }
        }
        let _ = done.send(());
    });
    rt.block_on(async {
        let _ = closed.await;
    });
}

/// A fleet that shares the family `shared-hosts`, each key's trip reaching every instance.
#[cfg(feature = "fleet")]
fn keyed_config(url: &str, prefix: &str, instance: &str) -> breakerbox_fleet::FleetConfig {
    breakerbox_fleet::FleetConfig::new(url)
        .prefix(prefix)
        .share("shared-hosts")
        .instance(instance)
        .resync_every(Duration::from_millis(200))
}

#[cfg(feature = "fleet")]
fn redis() -> Option<redis::Redis> {
    match redis::Redis::start() {
        Ok(redis) => Some(redis),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("the fleet view's test needs redis-server (scripts/test installs it)")
        }
        Err(_) => {
            eprintln!("SKIPPED: no redis-server on the PATH");
            None
        }
    }
}

#[cfg(feature = "fleet")]
/// A copy of this binary running `an_instance_process` as `instance`, once it is ready.
fn instance(url: &str, prefix: &str, name: &str, fail: bool) -> Child {
    instance_in(url, prefix, name, if fail { "fail" } else { "stay" }).0
}

#[cfg(feature = "fleet")]
/// A copy of this binary running `an_instance_process` as `instance` in `mode`, once it is
/// ready, with the lines it prints after `ready`.
fn instance_in(
    url: &str,
    prefix: &str,
    name: &str,
    mode: &str,
) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_instance_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, format!("{url} {prefix} {name} {}", mode))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in out.by_ref() {
        // After the harness's own `test an_instance_process ... `, on the same line.
        if line.unwrap().ends_with("ready") {
            // The rest is read to its end, so that the harness's last words find a reader.
            let (lines, said) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in out.map_while(Result::ok) {
                    let _ = lines.send(line);
                }
            });
            return (child, said);
        }
    }
    let _ = child.wait();
    panic!("{name} ended before it was ready");
}

/// The first manual action among an events answer's events.
#[cfg(feature = "fleet")]
fn first_action(body: &Value) -> &Value {
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "action")
        .unwrap_or_else(|| panic!("no action in {body}"))
}

async fn get(router: &axum::Router, path: &str) -> (StatusCode, Value) {
    let req = Request::get(path).body(Body::empty()).unwrap();
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[cfg(feature = "fleet")]
/// `(instance, state, this)` of `payments` in the view, by name.
fn hosts(view: &Value) -> Vec<(String, String, bool)> {
    let Some(b) = view["breakers"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "payments"))
    else {
        return Vec::new();
    };
    b["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["instance"].as_str().unwrap().to_owned(),
                i["state"].as_str().unwrap_or("?").to_owned(),
                i["this"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The example of docs/admin.md's section on `GET /fleet`.
#[cfg(feature = "fleet")]
fn documented_example() -> Value {
    let page = include_str!("../../docs/admin.md");
    let section = &page[page
        .find("## The fleet view: `GET /fleet`")
        .expect("the section")..];
    let start = section.find("```json\n").expect("its example") + "```json\n".len();
    let end = start + section[start..].find("```").unwrap();
    serde_json::from_str(&section[start..end]).expect("docs/admin.md's example of GET /fleet")
}

/// Every field's path in `v`: `breakers[].instances[].state`.
#[cfg(feature = "fleet")]
fn paths(v: &Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(fields) => {
            for (k, v) in fields {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(path.clone());
                paths(v, &path, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| paths(v, &format!("{at}[]"), out)),
        _ => {}
    }
}

#[cfg(feature = "fleet")]
fn fields(v: &Value) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    paths(v, "", &mut out);
    out
}

#[cfg(feature = "fleet")]
#[tokio::test]
async fn the_fleet_json_lists_each_live_instance_with_its_local_state() {
    let Some(server) = redis() else {
        return;
    };
    let url = server.url.clone();
    let prefix = format!("adminfleet{}", std::process::id());
    let b = payments();
    let fleet = breakerbox_fleet::Fleet::start(config(&url, &prefix, "here")).unwrap();
    let router = breakerbox_admin::Admin::new().fleet(fleet.view()).router();
    // A closed process first, then one that fails alone once both are live (under a quorum of
    // 2 of three: open there only; with fewer live, its trip would be the fleet's).
    let mut c = instance(&url, &prefix, "proc-c", false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while hosts(&get(&router, "/fleet").await.1).len() != 2 {
        assert!(Instant::now() < deadline, "proc-c never listed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut a = instance(&url, &prefix, "proc-a", true);
    let want = |c_state: &str| {
        vec![
            ("here".to_owned(), "closed".to_owned(), true),
            ("proc-a".to_owned(), "open".to_owned(), false),
            ("proc-c".to_owned(), c_state.to_owned(), false),
        ]
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let view = loop {
        let (status, view) = get(&router, "/fleet").await;
        assert_eq!(status, StatusCode::OK, "{view}");
        if hosts(&view) == want("closed") {
            break view;
        }
        assert!(Instant::now() < deadline, "the view: {view}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(view["instance"], "here");
    let payments = &view["breakers"][0];
    assert_eq!(payments["trip"], "quorum");
    assert_eq!(payments["quorum"], "2");
    assert_eq!(payments["hosts"], 3);
    let expires = payments["instances"][0]["expires_in_ms"].as_u64().unwrap();
    assert!(
        expires <= 600,
        "a heartbeat lives three resyncs: {expires} ms"
    );
    assert_eq!(
        b.state(),
        breakerbox_runtime::State::Closed,
        "one open of three is not a quorum"
    );
    // docs/admin.md's example has this answer's fields, and only those but `last_tally` (an
    // instance that reported a trip has it; this one did not).
    let (served, documented) = (fields(&view), fields(&documented_example()));
    assert!(
        served.is_subset(&documented),
        "GET /fleet answers {:?}, which docs/admin.md's example lacks",
        served.difference(&documented).collect::<Vec<_>>()
    );
    let more: Vec<_> = documented.difference(&served).collect();
    assert!(
        more.iter().all(|p| p.starts_with("breakers[].last_tally")),
        "docs/admin.md's example of GET /fleet has {more:?}, which it does not answer"
    );
    // proc-c goes (its stdin closed: it ends): it leaves the view within its heartbeat's life.
    drop(c.stdin.take());
    let _ = c.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, view) = get(&router, "/fleet").await;
        let live = hosts(&view);
        if live.len() == 2 {
            assert_eq!(live, want("closed")[..2]);
            break;
        }
        assert!(Instant::now() < deadline, "the view: {view}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(a.stdin.take());
    let _ = a.wait();
    drop(server);
}

#[cfg(not(feature = "fleet"))]
#[tokio::test]
async fn without_the_fleet_feature_the_fleet_view_is_a_404_that_says_why() {
    let (status, body) = get(&breakerbox_admin::router(), "/fleet").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"].as_str().unwrap().contains("`fleet` feature"),
        "{body}"
    );
}

#[cfg(feature = "fleet")]
#[tokio::test]
async fn a_router_given_no_fleet_says_how_to_give_it_one() {
    let (status, body) = get(&breakerbox_admin::router(), "/fleet").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("Admin::new().fleet(fleet.view())"),
        "{body}"
    );
}

#[cfg(feature = "fleet")]
#[tokio::test]
async fn a_control_used_on_a_shared_breaker_names_the_instance_it_was_used_on() {
    let Some(server) = redis() else {
        return;
    };
    let prefix = format!("adminaudit{}", std::process::id());
    let config = breakerbox_fleet::FleetConfig::new(server.url.clone())
        .prefix(prefix)
        .share("audited-ledger")
        .instance("web-7")
        .resync_every(Duration::from_millis(200));
    let ledger = breakerbox_runtime::registry()
        .get_or_create("audited-ledger", breakerbox_runtime::Config::default);
    let fleet = breakerbox_fleet::Fleet::start(config).unwrap();
    let router = breakerbox_admin::Admin::new()
        .named_token("alice", "alice's token")
        .fleet(fleet.view())
        .router();
    let req = Request::post("/breakers/audited-ledger/force-open")
        .header("authorization", "Bearer alice's token")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        router.clone().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(ledger.state(), breakerbox_runtime::State::ForcedOpen);
    let (status, body) = get(&router, "/breakers/audited-ledger/events").await;
    assert_eq!(status, StatusCode::OK);
    let action = first_action(&body);
    assert_eq!(action["action"], "force-open");
    assert_eq!(action["by"], "alice");
    assert_eq!(action["instance"], "web-7");
    ledger.reset();
    drop(fleet);
}

/// A keyed family shared by two processes: a key that tripped on the other instance rejects
/// here with the other's failure, and its reset through this instance's admin router closes it
/// on both, the other instance naming this one as who changed it, this one's events naming the
/// token's holder.
#[cfg(feature = "fleet")]
#[tokio::test]
async fn a_keys_reset_through_the_admin_closes_it_on_every_instance_and_names_who() {
    use breakerbox_runtime::{Error, State};
    let Some(server) = redis() else {
        return;
    };
    let prefix = format!("adminkeys{}", std::process::id());
    let hosts = shared_hosts();
    let fleet =
        breakerbox_fleet::Fleet::start(keyed_config(&server.url, &prefix, "web-1")).unwrap();
    let router = breakerbox_admin::Admin::new()
        .named_token("alice", "alice's token")
        .fleet(fleet.view())
        .router();
    let (mut other, said) = instance_in(&server.url, &prefix, "web-2", "key");
    // Its trip reaches this instance: a call of the key here is rejected.
    let deadline = Instant::now() + Duration::from_secs(10);
    let rejected = loop {
        match hosts.call("down.example", || Ok::<_, &str>(())) {
            Err(Error::Rejected(rejected)) => break rejected,
            other => assert!(Instant::now() < deadline, "never rejected: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        rejected.to_string().contains("web-2: HTTP 503"),
        "{rejected}"
    );
    // This instance's events of the key say who tripped it, not only that it was imported.
    let (_, body) = get(&router, "/breakers/shared-hosts/keys/down.example/events").await;
    let opened = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "transition" && e["to"] == "open")
        .unwrap_or_else(|| panic!("no opening among {body}"));
    assert_eq!(opened["reason"], "imported");
    assert!(
        opened["why"]
            .as_str()
            .unwrap()
            .starts_with("web-2 tripped it"),
        "{opened}"
    );
    let req = Request::post("/breakers/shared-hosts/keys/down.example/reset")
        .header("authorization", "Bearer alice's token")
        .body(Body::empty())
        .unwrap();
    let status = router.clone().oneshot(req).await.unwrap().status();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(hosts.get("down.example").unwrap().state(), State::Closed);
    // The reset reaches the other instance, which says who made it.
    let mut ask = other.stdin.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        use std::io::Write;
        writeln!(ask, "state").unwrap();
        let answer = said
            .recv_timeout(Duration::from_secs(5))
            .expect("web-2 answers");
        if answer.starts_with("state Closed") {
            break answer;
        }
        assert!(Instant::now() < deadline, "web-2 still says {answer}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(answer.contains("web-1 changed it (reset)"), "{answer}");
    let (status, body) = get(&router, "/breakers/shared-hosts/keys/down.example/events").await;
    assert_eq!(status, StatusCode::OK);
    let action = first_action(&body);
    assert_eq!(action["action"], "reset");
    assert_eq!(action["by"], "alice");
    assert_eq!(action["instance"], "web-1");
    drop(ask);
    let _ = other.wait();
    drop(fleet);
}
