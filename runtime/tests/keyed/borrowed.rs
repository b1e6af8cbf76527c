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
