//! The store conformance suite (`store/conformance.rs`) against the model store: each
//! instance's store is the fleet's Redis protocol over its own connection of the simulated
//! network (no delays, losses or faults), on a paused clock that the suite advances.

use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::model::Val;
use super::net::{Net, NetRef, SimStore};
use crate::keys::record_key;
use crate::store::conformance::{Backend, Checked, Feed, Work, conformance};
use crate::store::{FleetStore, Redis};

/// The model store, behind the simulated network.
struct ModelStore(NetRef);

impl Backend for ModelStore {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        let (id, feed) = self.0.lock().unwrap().connect();
        let wire = SimStore {
            id,
            net: self.0.clone(),
        };
        (
            Box::new(Redis::new(Box::new(wire), prefix)),
            Feed::redis(feed),
        )
    }

    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        let net = self.0.lock().unwrap();
        net.model.space.lock().unwrap().keys.insert(
            record_key(prefix, name).into_bytes(),
            (Val::Str(b"left by another application".to_vec()), None),
        );
        Box::pin(async {})
    }

    fn later(&self, d: Duration) -> Work<'_> {
        Box::pin(tokio::time::advance(d))
    }
}

/// Runs `check` against a fresh model on a paused runtime.
fn against_the_model(name: &str, check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>) {
    super::harness::paused(|| async move {
        let net = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(0), false)));
        let prefix = format!("conformance-{name}");
        check(&ModelStore(net), &prefix).await.unwrap();
    });
}

conformance!(against_the_model);

#[test]
fn a_store_that_ignores_the_epoch_fails_one_write_per_trip_on_the_model() {
    use crate::store::conformance::{Broken, Fault, promises};
    super::harness::paused(|| async {
        let net = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(0), false)));
        let broken = Broken(ModelStore(net), Fault::IgnoresTheEpoch);
        let failed = promises::one_write_per_trip(&broken, "broken")
            .await
            .expect_err("a store that ignores the epoch passes no compare-and-set check");
        assert!(
            failed.starts_with(
                "one write per trip: round 0: 3 of 3 compare-and-sets over epoch 0 wrote"
            ),
            "{failed}"
        );
    });
}

#[test]
fn a_store_that_ignores_fewest_fails_leases_at_least_fewest_on_the_model() {
    use crate::store::conformance::{Broken, Fault, IGNORED_FEWEST, promises};
    super::harness::paused(|| async {
        let net = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(0), false)));
        let broken = Broken(ModelStore(net), Fault::IgnoresFewest);
        let failed =
            promises::a_lease_ask_gets_every_free_lease_at_least_fewest_or_its_own_renewed(
                &broken, "broken",
            )
            .await
            .expect_err("a store that ignores fewest grants fewer leases than an ask is worth");
        assert_eq!(failed, IGNORED_FEWEST);
    });
}
