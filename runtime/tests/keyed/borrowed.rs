//! A key is looked up by any borrowed form a `HashMap` lookup takes, from generic code as
//! well, and a new key is made from it.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

use breakerbox_runtime::{BreakerMap, Error, ManualClock, State};

use crate::support::{config, serial};

/// Calls `key` through `map` from code generic over the borrowed form, with only the bounds
/// a `HashMap` lookup and a key's creation need.
fn fail<K, Q>(map: &BreakerMap<K>, key: &Q) -> Result<(), Error<&'static str>>
where
    K: Hash + Eq + Clone + std::fmt::Display + Send + Sync + 'static + Borrow<Q>,
    Q: Hash + Eq + ToOwned + ?Sized,
    Q::Owned: Into<K>,
{
    map.call(key, || Err("refused"))
}

#[test]
fn a_key_is_found_and_made_by_any_borrowed_form() {
    let _s = serial();
    let clock = ManualClock::new();
    // `Arc<str>` keys, made from and found by a `&str`.
    let map: BreakerMap<Arc<str>> = BreakerMap::new("borrowed", config(&clock, 100, 10));
    let host = String::from("db.example");
    assert!(matches!(fail(&map, host.as_str()), Err(Error::Inner(_))));
    assert_eq!(map.len(), 1);
    let b = map.get("db.example").expect("the key was made");
    assert_eq!(b.state(), State::Open);
    // The same key, by the owned form: the same breaker, which rejects.
    let key: Arc<str> = Arc::from("db.example");
    assert!(matches!(fail(&map, &key), Err(Error::Rejected(_))));
    assert_eq!((map.len(), b.metrics().rejected), (1, 1));
    // Another key is not affected.
    assert_eq!(map.call("cache.example", || Ok::<_, &str>(2)).unwrap(), 2);
    assert_eq!(map.len(), 2);
}

/// A host name that lowercases as it is made, looked up by the text as called.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Host(String);

impl Borrow<str> for Host {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for Host {
    fn from(s: String) -> Host {
        Host(s.to_lowercase())
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[test]
fn a_key_made_from_a_form_it_normalizes_is_one_breaker_that_calls_keep_alive() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<Host> = BreakerMap::new("normalized", config(&clock, 100, 10));
    // `DB.example` is not the key `db.example` by lookup, but it is by what it makes.
    for _ in 0..4 {
        map.call("DB.example", || Ok::<_, &str>(())).unwrap();
        clock.advance(std::time::Duration::from_secs(6));
        map.sweep();
    }
    assert_eq!(map.len(), 1);
    let b = map
        .get("db.example")
        .expect("called every 6 s, it is not idle");
    assert_eq!(b.metrics().successes, 4);
    assert_eq!(map.evicted().keys, 0);
}
