//! `TokioClock`'s timers across runtimes whose paused clocks disagree: alone in a process
//! of its own (`crate::alone`), so that this test is the first to read `TokioClock` (its
//! origin is process-wide).
#![cfg(feature = "tokio")]

use breakerbox_runtime::{Breaker, Clock, Config, State, TokioClock};
use std::time::Duration;

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A runtime whose paused time is an hour ahead reads `TokioClock` first; a breaker on an
/// older runtime still half-opens at its own open time (its readings do not saturate at the
/// origin, which would delay its timer by that hour).
#[test]
fn a_runtime_behind_another_keeps_its_timers() {
    crate::alone::alone(
        concat!(
            module_path!(),
            "::a_runtime_behind_another_keeps_its_timers"
        ),
        a_runtime_behind_another_keeps_its_timers_alone,
    );
}

fn a_runtime_behind_another_keeps_its_timers_alone() {
    let behind = paused();
    paused().block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        let _ = TokioClock.now();
    });
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(30))
        .clock(TokioClock)
        .build()
        .unwrap();
    let breaker = Breaker::new("tokio-clock-behind", config);
    behind.block_on(async {
        let start = TokioClock.now();
        breaker.call(|| Err::<(), _>("down")).unwrap_err();
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(TokioClock.now() - start, Duration::from_secs(31));
        assert_eq!(breaker.state(), State::HalfOpen);
    });
}
