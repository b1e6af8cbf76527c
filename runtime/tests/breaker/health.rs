//! The registry's health (`Registry::health`): UP, DEGRADED and DOWN from breakers and keyed
//! families, `critical` and `health` from code and from a config file. The health is the
//! whole registry's, so the steps run in one test, in order, alone in a process of its own
//! (`crate::alone`): no other test's breakers count.

use breakerbox_runtime::{Config, HealthStatus, State, registry};

fn component(name: &str) -> Option<breakerbox_runtime::ComponentHealth> {
    registry()
        .health()
        .components
        .into_iter()
        .find(|c| c.name == name)
}

fn trip(b: &breakerbox_runtime::Breaker) {
    let _ = b.call(|| Err::<(), _>("down"));
    assert_eq!(b.state(), State::Open);
}

#[test]
fn health_is_the_worst_of_the_counted_breakers_and_families() {
    crate::alone::alone(
        concat!(
            module_path!(),
            "::health_is_the_worst_of_the_counted_breakers_and_families"
        ),
        health_is_the_worst_of_the_counted_breakers_and_families_alone,
    );
}

fn health_is_the_worst_of_the_counted_breakers_and_families_alone() {
    let one = || Config::builder().failures(1);
    let plain = registry().get_or_create("health-plain", || one().build().unwrap());
    let critical =
        registry().get_or_create("health-critical", || one().critical(true).build().unwrap());
    let uncounted = registry().get_or_create("health-uncounted", || {
        one().critical(true).health(false).build().unwrap()
    });
    let hosts = registry()
        .family::<String>("health-hosts", || one().build().unwrap())
        .unwrap();
    let shards = registry()
        .family::<u32>("health-shards", || one().critical(true).build().unwrap())
        .unwrap();
    hosts.call(&"a".to_owned(), || Ok::<_, &str>(())).unwrap();
    assert_eq!(registry().health().status, HealthStatus::Up);
    assert!(component("health-uncounted").is_none());
    assert_eq!(
        component("health-plain").unwrap().state,
        Some(State::Closed)
    );

    // A breaker left out of the health trips: still UP.
    trip(&uncounted);
    assert_eq!(registry().health().status, HealthStatus::Up);

    // A key of a family that is not critical: DEGRADED, with the family's counts.
    let _ = hosts.call(&"b".to_owned(), || Err::<(), _>("down"));
    let h = registry().health();
    assert_eq!(h.status, HealthStatus::Degraded);
    let c = component("health-hosts").unwrap();
    assert_eq!(
        (c.status, c.keys, c.open_keys, c.state),
        (HealthStatus::Degraded, Some(2), Some(1), None)
    );

    // A plain breaker open, or forced open: DEGRADED.
    trip(&plain);
    assert_eq!(registry().health().status, HealthStatus::Degraded);
    plain.reset();
    plain.force_open();
    assert_eq!(
        component("health-plain").unwrap().status,
        HealthStatus::Degraded
    );

    // A critical breaker open: DOWN; closed again, the forced-open plain one is DEGRADED.
    trip(&critical);
    assert_eq!(registry().health().status, HealthStatus::Down);
    let c = component("health-critical").unwrap();
    assert_eq!((c.status, c.critical), (HealthStatus::Down, true));
    critical.reset();
    assert_eq!(registry().health().status, HealthStatus::Degraded);

    // A key of a critical family: DOWN.
    let _ = shards.call(&7, || Err::<(), _>("down"));
    assert_eq!(
        component("health-shards").unwrap().status,
        HealthStatus::Down
    );
    assert_eq!(registry().health().status, HealthStatus::Down);

    // All closed again: UP.
    shards.breaker(&7).reset();
    hosts.breaker(&"b".to_owned()).reset();
    plain.reset();
    assert_eq!(registry().health().status, HealthStatus::Up);
    // A disabled breaker lets every call through: UP.
    critical.disable();
    assert_eq!(
        component("health-critical").unwrap().status,
        HealthStatus::Up
    );
    critical.reset();

    // From a file: `critical` and `health` layer like any key.
    #[cfg(feature = "serde")]
    {
        registry()
            .load_toml_str(
                "health.toml",
                "[breakers.health-file]\ndynamic = true\nfailures = 1\ncritical = true\n\n\
                 [breakers.health-file-out]\ndynamic = true\nfailures = 1\nhealth = false\n",
            )
            .unwrap();
        let file = registry().get_or_create("health-file", Config::default);
        let out = registry().get_or_create("health-file-out", Config::default);
        trip(&out);
        assert_eq!(registry().health().status, HealthStatus::Up);
        trip(&file);
        assert_eq!(registry().health().status, HealthStatus::Down);
        file.reset();
        let e = registry()
            .load_toml_str(
                "h2.toml",
                "[breakers.health-bad]\ndynamic = true\ncritical = \"yes\"\n",
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`critical` must be true or false, got a string"),
            "{e}"
        );
    }
    assert_eq!(registry().health().status, HealthStatus::Up);
}
