//! How long a breaker stays open: backoff per reopening, its cap, and jitter.

use crate::support::{NS, breaker, fail, ms, secs, succeed};
use breakerbox_runtime::{Config, State};

#[test]
fn backoff_grows_per_reopen_up_to_max_open_for_and_resets_on_close() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .backoff(2.0)
            .max_open_for(secs(5)),
    );
    fail(&b);
    let mut seen = vec![];
    for _ in 0..5 {
        let wait = b.metrics().retry_after.unwrap();
        seen.push(wait);
        clock.advance(wait);
        fail(&b); // the probe fails
    }
    assert_eq!(seen, [secs(1), secs(2), secs(4), secs(5), secs(5)]);
    clock.advance(secs(5));
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(1)), "back to the base");
}

#[test]
fn backoff_default_cap_is_five_minutes() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(100))
            .backoff(10.0),
    );
    assert_eq!(b.config().max_open_for(), secs(300));
    fail(&b);
    clock.advance(secs(100));
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(300)));
}

#[test]
fn reset_restores_the_base_open_time() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)).backoff(3.0));
    fail(&b);
    clock.advance(secs(1));
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(3)));
    b.reset();
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(1)));
}

#[test]
fn jitter_stays_within_its_bounds() {
    let mut waits = vec![];
    for _ in 0..50 {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(secs(10))
                .max_open_for(secs(100))
                .jitter(0.25),
        );
        for _ in 0..4 {
            fail(&b);
            let wait = b.metrics().retry_after.unwrap();
            assert!(
                (ms(7500)..=ms(12500)).contains(&wait),
                "{wait:?} outside 10 s ± 25%"
            );
            waits.push(wait);
            clock.advance(wait);
            succeed(&b);
        }
    }
    waits.sort();
    waits.dedup();
    assert!(waits.len() > 20, "jitter varies: {waits:?}");
    assert!(waits.iter().any(|w| *w < secs(10)) && waits.iter().any(|w| *w > secs(10)));
}

#[test]
fn repro_jitter_never_lengthens_at_the_cap() {
    // The jittered time was capped at max_open_for again, which by default is open_for: every
    // draw that should lengthen gave exactly open_for, so half the breakers of a fleet probed
    // in step, and "lengthen or shorten" only ever shortened.
    let mut longer = 0;
    let mut alive = vec![]; // distinct breakers: the draw mixes in the breaker's address
    for _ in 0..40 {
        let (b, _) = breaker(Config::builder().failures(1).open_for(secs(10)).jitter(0.2));
        fail(&b);
        alive.push(b.clone());
        let wait = b.metrics().retry_after.unwrap();
        assert!((secs(8)..=secs(12)).contains(&wait), "{wait:?}");
        longer += usize::from(wait > secs(10));
    }
    assert!(longer > 5, "only {longer} of 40 open times were lengthened");
}

#[test]
fn full_jitter_never_gives_a_zero_open_time() {
    for _ in 0..50 {
        let (b, _) = breaker(
            Config::builder()
                .failures(1)
                .open_for(NS)
                .max_open_for(ms(1))
                .jitter(1.0),
        );
        fail(&b);
        assert_eq!(b.state(), State::Open);
    }
}
