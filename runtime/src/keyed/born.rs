//! Hooks run when a registry family makes a breaker for a new key: how fleet mode gives a key
//! the state the fleet holds for it before the key's first call.
//!
//! A hook runs on the thread that makes the key, after the breaker is made and before it is put
//! in the family, so no call reaches the breaker before the hook is done. It runs under no lock
//! of ours (it may change the breaker's state, whose listeners are user code), and a panic in it
//! is caught and dropped. Making a key is the cold path: a family without hooks pays one atomic
//! load per new key.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::breaker::Breaker;

/// A hook: the family's name and the new key's breaker; `false` once it wants no more calls.
pub(crate) type Hook = Arc<dyn Fn(&str, &Breaker) -> bool + Send + Sync>;

static HOOKS: Mutex<Vec<Hook>> = Mutex::new(Vec::new());
static ANY: AtomicBool = AtomicBool::new(false);

/// Adds `hook`, run for every key a registry family makes from now on.
pub(crate) fn add(hook: Hook) {
    let mut hooks = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
    hooks.push(hook);
    ANY.store(true, Ordering::Release);
}

/// Runs the hooks for `breaker`, the new key's, of the registry family `family`; a hook that
/// answers `false` is dropped.
pub(crate) fn born(family: &str, breaker: &Breaker) {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    // Cloned out of the lock: a hook may make keys itself.
    let hooks: Vec<Hook> = HOOKS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut done = Vec::new();
    for hook in hooks {
        match catch_unwind(AssertUnwindSafe(|| hook(family, breaker))) {
            Ok(true) => {}
            Ok(false) => done.push(hook),
            Err(payload) => crate::event::discard(payload),
        }
    }
    if !done.is_empty() {
        let mut hooks = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
        hooks.retain(|h| !done.iter().any(|d| Arc::ptr_eq(h, d)));
        ANY.store(!hooks.is_empty(), Ordering::Release);
        drop(hooks);
        // A hook's last reference is dropped outside the lock.
        drop(done);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::{Config, State, registry};

    #[test]
    fn a_hook_changes_a_new_keys_breaker_before_its_first_call_and_a_done_hook_is_dropped() {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        crate::__integrations::on_new_key(|family, breaker| {
            if family != "born-test-hosts" {
                return true;
            }
            RUNS.fetch_add(1, Ordering::SeqCst);
            if breaker.key() == Some("down.example") {
                breaker.force_open();
            }
            // Done after the second key of this family.
            RUNS.load(Ordering::SeqCst) < 2
        });
        let hosts = registry()
            .family::<String>("born-test-hosts", Config::default)
            .unwrap();
        let first = hosts.call("down.example", || Ok::<_, &str>(()));
        assert!(
            matches!(first, Err(crate::Error::Rejected(_))),
            "the first call reached a key the hook forced open: {first:?}"
        );
        assert_eq!(
            hosts.get("down.example").unwrap().state(),
            State::ForcedOpen
        );
        hosts.call("up.example", || Ok::<_, &str>(())).unwrap();
        hosts.call("third.example", || Ok::<_, &str>(())).unwrap();
        assert_eq!(
            RUNS.load(Ordering::SeqCst),
            2,
            "dropped after answering false"
        );
        // A family of no registry makes its keys without the hooks.
        let alone: crate::BreakerMap<String> =
            crate::BreakerMap::new("born-test-hosts", Config::default());
        alone.call("down.example", || Ok::<_, &str>(())).unwrap();
        assert_eq!(RUNS.load(Ordering::SeqCst), 2);
    }
}
