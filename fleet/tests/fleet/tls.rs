//! TLS (`rediss://`, a CA and a certificate made by the test) with an ACL user under the
//! least-privilege rule of docs/fleet.md; a wrong password or certificate is an error at
//! connect, never a panic.

use std::time::Duration;

use breakerbox_fleet::{Fleet, FleetConfig, FleetError};
use breakerbox_runtime::{Breaker, State};

use crate::instances::{Instances, fail, runtime, trip_once};
use crate::servers::{TlsRedis, poll};
use crate::support::{redis_server, shared};

/// The least-privilege rule of docs/fleet.md, for the prefix `tls`.
const FLEET_RULE: &str = "resetkeys resetchannels ~{tls:* &tls:changes -@all +hello +auth +ping \
    +subscribe +evalsha +script|load +time +hmget +hset +hgetall +hdel +del +publish +zadd \
    +zcard +zrange +zremrangebyscore +zscore +pexpire";

fn tls_redis() -> Option<TlsRedis> {
    Some(TlsRedis::start(
        &redis_server()?,
        &[("fleet", "s3cret", FLEET_RULE)],
    ))
}

#[test]
fn a_fleet_over_tls_with_an_acl_user_shares_a_trip_and_a_reset() {
    let _machine = shared();
    let Some(redis) = tls_redis() else { return };
    let rt = runtime();
    let _guard = rt.enter();
    let url = redis.url("fleet", "s3cret");
    let ca = redis.certs.ca.clone();
    let fleet = Instances::connect(&rt, 3, &["pay"], |_| {
        FleetConfig::new(&url)
            .prefix("tls")
            .tls_ca(&ca)
            // No store error is allowed below: a TLS operation on a loaded machine may take
            // more than half a second.
            .timeout(Duration::from_secs(5))
    });
    fail(&fleet.breakers[0][0]);
    fleet.all(0, State::Open, Duration::from_secs(10));
    assert_eq!(redis.server.cli(&["HGET", "{tls:pay}", "origin"]), "i0");
    fleet.breakers[2][0].reset();
    fleet.all(0, State::Closed, Duration::from_secs(10));
    assert_eq!(redis.server.cli(&["HGET", "{tls:pay}", "reason"]), "reset");
    // `connected` says a pass of the fleet's task reached the store, which may come after
    // the changes the feed carried.
    for f in &fleet.fleets {
        poll("every fleet connected", Duration::from_secs(10), || {
            f.status().connected
        });
        let s = f.status();
        assert_eq!(s.store_errors, 0, "{s:?}");
    }
    assert_eq!(redis.server.cli(&["ACL", "LOG"]), "", "nothing refused");
}

#[test]
fn a_wrong_password_is_an_error_at_connect_that_names_it_and_not_the_password() {
    let _machine = shared();
    let Some(redis) = tls_redis() else { return };
    let rt = runtime();
    let url = redis.url("fleet", "wrong-pw");
    let e = rt
        .block_on(Fleet::connect(
            FleetConfig::new(&url).tls_ca(&redis.certs.ca),
        ))
        .unwrap_err();
    assert!(matches!(e, FleetError::Connect { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("WRONGPASS"), "{text}");
    assert!(
        !text.contains("wrong-pw"),
        "the password is not shown: {text}"
    );
    assert!(text.contains("rediss://fleet:***@127.0.0.1:"), "{text}");
}

#[test]
fn a_certificate_from_an_unknown_authority_is_an_error_at_connect() {
    let _machine = shared();
    let Some(redis) = tls_redis() else { return };
    let rt = runtime();
    // No `tls_ca`: the system's roots do not know the test's CA.
    let e = rt
        .block_on(Fleet::connect(FleetConfig::new(
            redis.url("fleet", "s3cret"),
        )))
        .unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
}

#[test]
fn a_lazily_started_fleet_with_a_wrong_password_says_why_in_its_status() {
    let _machine = shared();
    let Some(redis) = tls_redis() else { return };
    let rt = runtime();
    let _guard = rt.enter();
    let fleet =
        Fleet::start(FleetConfig::new(redis.url("fleet", "wrong-pw")).tls_ca(&redis.certs.ca))
            .unwrap();
    let b = Breaker::new("pay", trip_once());
    fleet.share(&b);
    poll("a store error", Duration::from_secs(5), || {
        fleet.status().store_errors > 0
    });
    let why = fleet.status().last_error.expect("the last error");
    assert!(why.contains("WRONGPASS"), "{why}");
    // The breaker decides alone meanwhile.
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_missing_ca_file_is_an_error_at_start() {
    let _machine = shared();
    let rt = runtime();
    let _guard = rt.enter();
    let e = Fleet::start(FleetConfig::new("rediss://127.0.0.1:1/").tls_ca("/nonexistent/ca.pem"))
        .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
}
