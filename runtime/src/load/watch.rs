//! [`Registry::watch_toml`]: a config file reloaded into the live breakers when it changes.

use std::ffi::OsString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};

use super::file::read;
use super::load_error::LoadError;
use crate::registry::Registry;

/// How long the file must stay unchanged before it is read: an editor's save is several
/// events (write, rename, attributes), read once after the last.
const QUIET: Duration = Duration::from_millis(100);

/// The longest a stream of changes delays a reload.
const AT_MOST: Duration = Duration::from_secs(1);

/// What the watcher's thread hears.
enum Heard {
    /// The file (or the directory, when events were lost) changed.
    Changed,
    /// The watch reported an error.
    Failed(notify::Error),
    /// The [`TomlWatcher`] was dropped.
    Stop,
}

/// A watch on a config file, from [`Registry::watch_toml`]: while it lives, every change of
/// the file is reloaded into the breakers. Dropping it stops the watch and waits for its
/// thread to end (for a reload or a callback under way to return), unless it is dropped by
/// the callback itself, on that thread: then the thread ends when the callback returns.
#[must_use = "dropping the watcher stops the watch"]
pub struct TomlWatcher {
    /// Dropped first: no more events.
    events: Option<notify::RecommendedWatcher>,
    stop: mpsc::Sender<Heard>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl TomlWatcher {
    /// The file watched: its directory made absolute, then its name.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl core::fmt::Debug for TomlWatcher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TomlWatcher")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Drop for TomlWatcher {
    fn drop(&mut self) {
        drop(self.events.take());
        let _ = self.stop.send(Heard::Stop);
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            // The thread catches the callback's panics: an `Err` here is one of ours, and the
            // thread is over either way.
            let _ = thread.join();
        }
    }
}

fn watch_error(path: &Path, source: std::io::Error) -> LoadError {
    LoadError::Watch {
        path: path.to_owned(),
        source,
    }
}

impl Registry {
    /// Watches the TOML file at `path` and, each time it changes, reloads it as
    /// [`reload_toml`](Registry::reload_toml) does (live, keeping every breaker's state; all
    /// or nothing), then calls `on_reload` with the result: the names in the file, or the
    /// error (a bad file leaves every breaker as it was). Each result is also a `tracing`
    /// event of target `breakerbox`: `info` with the names applied, `error` with the error.
    /// Needs the feature `watch`.
    ///
    /// The watch is on the file's directory, filtered by the file's name, so a file that
    /// editors save by writing another and renaming it over this one (or that is deleted and
    /// written again) is followed. The file is read once it has been quiet for 100 ms (an
    /// editor's save is several events), and at the latest 1 s after a stream of changes
    /// began. Watching starts when this returns, and nothing is read before the first change:
    /// load the file at startup with [`load_toml`](Registry::load_toml) first. A deleted file
    /// is reported as a [`LoadError::Read`], and the next file written under its name is
    /// reloaded. Not followed: a file reached through a symbolic link that is replaced (as
    /// in a Kubernetes ConfigMap volume), and a directory that is removed or renamed.
    ///
    /// One thread, `breakerbox-watch`, per watcher, reads the file and calls `on_reload`,
    /// under no lock of ours: the callback may block (delaying the next reload only), call
    /// the registry, and drop the watcher. A panic in it is caught and reported (`error`
    /// event), and the watch goes on; so does a reload that panics in the user code it runs
    /// (a family key's `Display` while the file is checked leaves every breaker as it was).
    /// Dropping the [`TomlWatcher`] stops it (see there).
    ///
    /// Fails, watching nothing, if `path` names no file or a directory, its directory cannot
    /// be watched or the thread cannot start ([`LoadError::Watch`]).
    ///
    /// ```no_run
    /// use breakerbox_runtime::registry;
    ///
    /// registry().load_toml("breakers.toml")?;
    /// let _watcher = registry().watch_toml("breakers.toml", |result| {
    ///     if let Err(e) = result {
    ///         eprintln!("breakers.toml not applied: {e}");
    ///     }
    /// })?;
    /// // ... the application runs; dropping `_watcher` stops the watch.
    /// # Ok::<(), breakerbox_runtime::LoadError>(())
    /// ```
    pub fn watch_toml(
        &'static self,
        path: impl AsRef<Path>,
        on_reload: impl FnMut(&Result<Vec<String>, LoadError>) + Send + 'static,
    ) -> Result<TomlWatcher, LoadError> {
        let path = path.as_ref();
        let Some(name) = path.file_name().map(OsString::from) else {
            return Err(watch_error(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file"),
            ));
        };
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let dir = std::fs::canonicalize(dir).map_err(|e| watch_error(path, e))?;
        let file = dir.join(name);
        if file.is_dir() {
            return Err(watch_error(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::IsADirectory,
                    "a directory; watch the config file in it",
                ),
            ));
        }
        let (tell, heard) = mpsc::channel();
        let events = tell.clone();
        let target = file.clone();
        let failed = |e: notify::Error| watch_error(path, std::io::Error::other(e));
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let heard = match event {
                    // Reads (ours too) are not changes.
                    Ok(e)
                        if e.need_rescan()
                            || (!matches!(e.kind, EventKind::Access(_))
                                && e.paths.contains(&target)) =>
                    {
                        Heard::Changed
                    }
                    Ok(_) => return,
                    Err(e) => Heard::Failed(e),
                };
                let _ = events.send(heard);
            })
            .map_err(failed)?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(failed)?;
        let watched = file.clone();
        let origin = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("breakerbox-watch".to_owned())
            .spawn(move || self.follow(&watched, &origin, &heard, on_reload))
            .map_err(|e| watch_error(path, e))?;
        Ok(TomlWatcher {
            events: Some(watcher),
            stop: tell,
            thread: Some(thread),
            path: file,
        })
    }

    /// The watcher's thread: a reload of `file` (under `origin`, the path the watch was
    /// given) after each quiet spell that follows a change, until told to stop.
    fn follow(
        &self,
        file: &Path,
        origin: &Path,
        heard: &mpsc::Receiver<Heard>,
        mut on_reload: impl FnMut(&Result<Vec<String>, LoadError>),
    ) {
        let mut report = |result: Result<Vec<String>, LoadError>| {
            match &result {
                Ok(names) => tracing::info!(
                    target: "breakerbox",
                    path = %file.display(),
                    applied = ?names,
                    "circuit breaker config reloaded"
                ),
                Err(e) => tracing::error!(
                    target: "breakerbox",
                    path = %file.display(),
                    "circuit breaker config not reloaded, every breaker keeps its config: {e}"
                ),
            }
            if catch_unwind(AssertUnwindSafe(|| on_reload(&result))).is_err() {
                tracing::error!(
                    target: "breakerbox",
                    path = %file.display(),
                    "the watch callback panicked; the watch goes on"
                );
            }
        };
        while let Ok(first) = heard.recv() {
            let began = Instant::now();
            let mut changed = false;
            let mut next = Some(first);
            while let Some(now) = next {
                match now {
                    Heard::Stop => return,
                    Heard::Changed => changed = true,
                    Heard::Failed(e) => report(Err(watch_error(file, std::io::Error::other(e)))),
                }
                let left = AT_MOST.saturating_sub(began.elapsed());
                if left.is_zero() {
                    break;
                }
                next = match heard.recv_timeout(QUIET.min(left)) {
                    Ok(heard) => Some(heard),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                };
            }
            if !changed {
                continue;
            }
            // User code runs in a reload too (a keyed family's key `Display`, a config's clock
            // dropped): its panic must not end the watch.
            // Read from the canonical path, loaded under the path given, as `load_toml` of
            // that path was: the next load of a file rebuilds what its last load reached.
            let reload = || read(file).and_then(|text| self.reload_toml_str(origin, &text));
            match catch_unwind(AssertUnwindSafe(reload)) {
                Ok(result) => report(result),
                Err(_) => tracing::error!(
                    target: "breakerbox",
                    path = %file.display(),
                    "a reload of the circuit breaker config panicked (in user code it runs, such as a key's `Display`); the watch goes on"
                ),
            }
        }
    }
}
