//! `Registry::watch_toml`: a file reloaded when it changes. Each test waits on the results the
//! callback sends; the timeouts only bound a failure (nothing waits for time to pass).
#![cfg(feature = "watch")]

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox_runtime::{Breaker, Config, LoadError, State, TomlWatcher, registry};

/// A bound on a failure, never reached when the watch works.
const BOUND: Duration = Duration::from_secs(60);

/// A result as the callback saw it: the names, or the error's message.
type Seen = Result<Vec<String>, String>;

fn seen(r: &Result<Vec<String>, LoadError>) -> Seen {
    match r {
        Ok(names) => Ok(names.clone()),
        Err(e) => Err(e.to_string()),
    }
}

/// An empty directory of this test's own, in cargo's temporary directory for tests.
fn dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("watch-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `path` as editors do: another file, renamed over it.
fn save(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Watches `path`, sending each result down the channel.
fn watch(path: &Path) -> (TomlWatcher, Receiver<Seen>) {
    let (tx, rx) = mpsc::channel();
    let watcher = registry()
        .watch_toml(path, move |r: &Result<Vec<String>, LoadError>| {
            let _ = tx.send(seen(r));
        })
        .unwrap();
    (watcher, rx)
}

/// The first result that `done` accepts; earlier ones (an editor's save may be read twice)
/// are skipped.
fn until(rx: &Receiver<Seen>, done: impl Fn(&Seen) -> bool) -> Seen {
    let end = Instant::now() + BOUND;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let seen = rx.recv_timeout(left).expect("no reload reported in time");
        if done(&seen) {
            return seen;
        }
    }
}

fn fail(b: &Breaker) {
    b.call(|| Err::<(), _>("down")).unwrap_err();
}

#[test]
fn a_saved_change_is_applied_live_and_reported() {
    let dir = dir("applied");
    let path = dir.join("breakers.toml");
    std::fs::write(&path, "[breakers.\"watch.applied\"]\nfailures = 3\n").unwrap();
    let b = registry().get_or_create("watch.applied", || {
        Config::builder().failures(3).build().unwrap()
    });
    fail(&b);
    fail(&b);
    let (watcher, rx) = watch(&path);
    assert_eq!(
        watcher.path(),
        std::fs::canonicalize(&dir).unwrap().join("breakers.toml")
    );
    save(&path, "[breakers.\"watch.applied\"]\nfailures = 2\n");
    let seen = until(&rx, |s| s.is_ok());
    assert_eq!(seen, Ok(vec!["watch.applied".to_owned()]));
    assert_eq!(b.config().failures(), Some(2));
    assert_eq!(
        (b.state(), b.metrics().consecutive_failures),
        (State::Closed, 2),
        "state and counts kept"
    );
    // A write in place is followed too.
    std::fs::write(&path, "[breakers.\"watch.applied\"]\nfailures = 4\n").unwrap();
    assert!(until(&rx, |_| b.config().failures() == Some(4)).is_ok());
    drop(watcher);
}

#[test]
fn a_bad_file_leaves_every_breaker_as_it_was_and_is_reported() {
    let dir = dir("bad");
    let path = dir.join("breakers.toml");
    let b = registry().get_or_create("watch.bad", || {
        Config::builder().failures(3).build().unwrap()
    });
    fail(&b);
    let (_watcher, rx) = watch(&path);
    save(
        &path,
        "[breakers.\"watch.bad\"]\nfailures = 2\nopen_for = \"ten seconds\"\n",
    );
    let Err(message) = until(&rx, |s| s.is_err()) else {
        unreachable!()
    };
    assert!(
        message.contains("breakers.toml:3: [breakers.watch.bad] `open_for`"),
        "{message}"
    );
    assert_eq!(b.config().failures(), Some(3));
    assert_eq!(b.metrics().consecutive_failures, 1);
    // Deleted: reported, nothing changes, and the next file under the name is read.
    std::fs::remove_file(&path).unwrap();
    let Err(message) = until(&rx, |s| {
        s.as_ref().is_err_and(|m| m.contains("cannot read"))
    }) else {
        unreachable!()
    };
    assert!(message.contains("breakers.toml"), "{message}");
    assert_eq!(b.config().failures(), Some(3));
    save(&path, "[breakers.\"watch.bad\"]\nfailures = 2\n");
    assert_eq!(until(&rx, |s| s.is_ok()), Ok(vec!["watch.bad".to_owned()]));
    assert_eq!(b.config().failures(), Some(2));
    assert_eq!(b.metrics().consecutive_failures, 1);
}

#[test]
fn a_panicking_callback_is_caught_and_the_watch_goes_on() {
    let dir = dir("panic");
    let path = dir.join("breakers.toml");
    let events = events();
    let b = registry().get_or_create("watch.panic", || {
        Config::builder().failures(5).build().unwrap()
    });
    let (tx, rx) = mpsc::channel::<Seen>();
    let mut calls = 0;
    let _watcher = registry()
        .watch_toml(&path, move |r| {
            calls += 1;
            let _ = tx.send(seen(r));
            if calls == 1 {
                panic!("the user's callback panics");
            }
        })
        .unwrap();
    save(&path, "[breakers.\"watch.panic\"]\nfailures = 4\n");
    assert_eq!(
        until(&rx, |s| s.is_ok()),
        Ok(vec!["watch.panic".to_owned()])
    );
    // The first call panicked after it sent: the thread goes on to the next change.
    save(&path, "[breakers.\"watch.panic\"]\nfailures = 3\n");
    assert!(until(&rx, |_| b.config().failures() == Some(3)).is_ok());
    // Reported, before the thread went on.
    let file = std::fs::canonicalize(&dir).unwrap().join("breakers.toml");
    let reported = events.0.lock().unwrap().iter().any(|(level, text)| {
        *level == tracing::Level::ERROR
            && text.contains("the watch callback panicked; the watch goes on")
            && text.contains(&file.display().to_string())
    });
    assert!(reported);
}

#[test]
fn the_callback_may_call_the_registry_and_drop_its_own_watcher() {
    let dir = dir("reenter");
    let path = dir.join("breakers.toml");
    let b = registry().get_or_create("watch.reenter", || {
        Config::builder().failures(5).build().unwrap()
    });
    let (tx, rx) = mpsc::channel::<Seen>();
    let slot: Arc<Mutex<Option<TomlWatcher>>> = Arc::default();
    let own = slot.clone();
    let watcher = registry()
        .watch_toml(&path, move |r| {
            // Re-entering the registry: no lock of ours is held.
            let again = registry()
                .reload_toml_str("again.toml", "[breakers.\"watch.reenter\"]\nfailures = 2\n");
            assert!(again.is_ok());
            // Dropping its own watcher, on the watcher's thread.
            let mine = own.lock().unwrap().take();
            drop(mine);
            let _ = tx.send(seen(r));
        })
        .unwrap();
    *slot.lock().unwrap() = Some(watcher);
    save(&path, "[breakers.\"watch.reenter\"]\nfailures = 4\n");
    assert_eq!(
        rx.recv_timeout(BOUND).unwrap(),
        Ok(vec!["watch.reenter".to_owned()])
    );
    assert_eq!(b.config().failures(), Some(2));
    // The thread ended once the callback returned: it dropped the callback, and its sender.
    assert_eq!(rx.recv_timeout(BOUND), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn a_blocking_callback_holds_no_lock_of_the_registry() {
    let dir = dir("block");
    let path = dir.join("breakers.toml");
    let b = registry().get_or_create("watch.block", || {
        Config::builder().failures(5).build().unwrap()
    });
    let (entered, on_entered) = mpsc::channel();
    let (go, on_go) = mpsc::channel::<()>();
    let (tx, rx) = mpsc::channel::<Seen>();
    let watcher = registry()
        .watch_toml(&path, move |r| {
            let _ = entered.send(());
            // Blocks until the test says go (the bound only ends a failed test).
            let _ = on_go.recv_timeout(BOUND);
            let _ = tx.send(seen(r));
        })
        .unwrap();
    save(&path, "[breakers.\"watch.block\"]\nfailures = 4\n");
    on_entered.recv_timeout(BOUND).unwrap();
    // While the callback blocks: the file is applied, and the registry answers.
    assert_eq!(b.config().failures(), Some(4));
    registry()
        .reload_toml_str("other.toml", "[breakers.\"watch.block\"]\nfailures = 3\n")
        .unwrap();
    assert_eq!(b.config().failures(), Some(3));
    assert!(registry().names().contains(&"watch.block".to_owned()));
    let other = registry()
        .watch_toml(dir.join("other.toml"), |_| {})
        .unwrap();
    drop(other);
    go.send(()).unwrap();
    assert_eq!(
        rx.recv_timeout(BOUND).unwrap(),
        Ok(vec!["watch.block".to_owned()])
    );
    // A second read of the same save would block on `go`: gone first, it does not.
    drop(go);
    drop(watcher);
}

/// A key whose `Display` panics while [`PANICS`] holds a sender, after telling it.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Panicky(&'static str);

static PANICS: Mutex<Option<mpsc::Sender<()>>> = Mutex::new(None);

impl std::fmt::Display for Panicky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let armed = PANICS.lock().unwrap().take();
        if let Some(told) = armed {
            let _ = told.send(());
            panic!("the user's key Display panics");
        }
        f.write_str(self.0)
    }
}

#[test]
fn a_reload_that_panics_in_user_code_does_not_end_the_watch() {
    let dir = dir("reload-panics");
    let path = dir.join("breakers.toml");
    let events = events();
    let f = registry()
        .family::<Panicky>("watch.panicky", Config::default)
        .unwrap();
    f.call(&Panicky("h"), || Ok::<_, &str>(())).unwrap();
    let (watcher, rx) = watch(&path);
    let (told, panicked) = mpsc::channel();
    *PANICS.lock().unwrap() = Some(told);
    // A key table makes the reload display the keys held: the key's `Display` panics.
    let table = |n: u32| {
        format!(
            "[breakers.\"watch.panicky\"]\nfailures = {n}\n\n[breakers.\"watch.panicky\".keys.other]\nfailures = 2\n"
        )
    };
    save(&path, &table(4));
    panicked.recv_timeout(BOUND).unwrap();
    // It panicked while the file was checked: nothing applied, nor will be.
    let h = f.get(&Panicky("h")).unwrap();
    assert_eq!(h.config().failures(), Config::default().failures());
    save(&path, &table(3));
    assert!(
        until(&rx, |_| f.get(&Panicky("h")).unwrap().config().failures()
            == Some(3))
        .is_ok()
    );
    let file = watcher.path().display().to_string();
    let reported = events.0.lock().unwrap().iter().any(|(level, text)| {
        *level == tracing::Level::ERROR
            && text.contains("a reload of the circuit breaker config panicked")
            && text.contains(&file)
    });
    assert!(reported);
}

#[test]
fn dropping_the_watcher_ends_its_thread() {
    let dir = dir("drop");
    let (watcher, rx) = watch(&dir.join("breakers.toml"));
    drop(watcher);
    // Joined: the callback (and its sender) is gone by the time `drop` returns.
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

#[test]
fn a_directory_that_cannot_be_watched_is_an_error() {
    let dir = dir("missing").join("not-there");
    let err = registry()
        .watch_toml(dir.join("breakers.toml"), |_| {})
        .unwrap_err();
    assert!(matches!(err, LoadError::Watch { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot watch circuit breaker config "),
        "{err}"
    );
    let err = registry().watch_toml("/", |_| {}).unwrap_err();
    assert!(err.to_string().ends_with("the path names no file"), "{err}");
}

#[test]
fn a_directory_given_as_the_file_is_an_error() {
    let dir = dir("given-a-directory");
    let err = registry().watch_toml(&dir, |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot watch circuit breaker config {}: a directory; watch the config file in it",
            dir.display()
        )
    );
}

/// The `breakerbox` events of every thread: their level and fields, as text.
struct Events(Mutex<Vec<(tracing::Level, String)>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl tracing::Subscriber for Events {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "breakerbox" {
            let mut text = String::new();
            event.record(&mut Fields(&mut text));
            let level = *event.metadata().level();
            self.0.lock().unwrap().push((level, text));
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The events of every thread since the first call.
fn events() -> &'static Events {
    static EVENTS: std::sync::OnceLock<&'static Events> = std::sync::OnceLock::new();
    EVENTS.get_or_init(|| {
        let events: &'static Events = Box::leak(Box::new(Events(Mutex::default())));
        // The watcher's thread is not this one: a global subscriber hears it.
        tracing::subscriber::set_global_default(Forward(events)).unwrap();
        events
    })
}

#[test]
fn each_result_is_a_tracing_event() {
    let events = events();
    let dir = dir("tracing");
    let path = dir.join("breakers.toml");
    let _b = registry().get_or_create("watch.tracing", || {
        Config::builder().failures(3).build().unwrap()
    });
    let (watcher, rx) = watch(&path);
    let file = watcher.path().display().to_string();
    // The event is sent before the callback runs: once the callback reports, it is there.
    let mine = |level: tracing::Level| {
        events
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, text)| *l == level && text.contains(&file))
            .map(|(_, text)| text.clone())
            .collect::<Vec<_>>()
    };
    save(&path, "[breakers.\"watch.tracing\"]\nfailures = 2\n");
    assert_eq!(
        until(&rx, |s| s.is_ok()),
        Ok(vec!["watch.tracing".to_owned()])
    );
    let info = mine(tracing::Level::INFO);
    assert!(
        info[0].contains("applied=[\"watch.tracing\"]")
            && info[0].contains("circuit breaker config reloaded"),
        "{info:?}"
    );
    save(&path, "[breakers.\"watch.tracing\"]\nfailures = 0\n");
    assert!(until(&rx, |s| s.is_err()).is_err());
    let error = mine(tracing::Level::ERROR);
    assert!(
        error[0].contains("not reloaded, every breaker keeps its config")
            && error[0].contains("breakers.toml:2: [breakers.watch.tracing] `failures`"),
        "{error:?}"
    );
}

/// A subscriber by value for `set_global_default`, forwarding to the leaked one.
struct Forward(&'static Events);

impl tracing::Subscriber for Forward {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        self.0.enabled(m)
    }
    fn new_span(&self, a: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.0.new_span(a)
    }
    fn record(&self, i: &tracing::span::Id, r: &tracing::span::Record<'_>) {
        self.0.record(i, r)
    }
    fn record_follows_from(&self, a: &tracing::span::Id, b: &tracing::span::Id) {
        self.0.record_follows_from(a, b)
    }
    fn event(&self, e: &tracing::Event<'_>) {
        self.0.event(e)
    }
    fn enter(&self, i: &tracing::span::Id) {
        self.0.enter(i)
    }
    fn exit(&self, i: &tracing::span::Id) {
        self.0.exit(i)
    }
}

/// The watcher reloads the file under the path `load_toml` was given, written otherwise than
/// the file's canonical path (here through `sub/..`): a table removed from the saved file
/// gives its breaker the layers under it again, as a `reload_toml` of that path does.
#[test]
fn a_table_removed_from_the_watched_file_is_gone() {
    let dir = dir("removed");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let path = dir.join("sub").join("..").join("breakers.toml");
    std::fs::write(&path, "[breakers.\"watch.removed\"]\nfailures = 2\n").unwrap();
    let b = registry().get_or_create("watch.removed", || {
        Config::builder().failures(3).build().unwrap()
    });
    registry().load_toml(&path).unwrap();
    assert_eq!(b.config().failures(), Some(2));
    let (_watcher, rx) = watch(&path);
    save(&path, "# no breakers\n");
    let seen = until(&rx, |s| s.is_ok());
    assert_eq!(seen, Ok(vec!["watch.removed".to_owned()]));
    assert_eq!(b.config().failures(), Some(3), "the code's config again");
}
