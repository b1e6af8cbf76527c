//! What the bench binaries share: the protected function, its inputs, the contenders' configs,
//! and the harnesses (a no-op-waker poll, a pair of long-lived threads behind a barrier, and
//! in `harness` the measuring loops of `compare`).
//!
//! Every contender protects the same `#[inline(never)] fn(u64) -> Result<u64, CallError>` and is
//! configured to the same policy where the peer has it, so the numbers differ only by what
//! each breaker does around the call.
#![allow(dead_code)] // each bench binary uses its own part of this module

pub mod harness;

use core::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use breakerbox::{Breaker, Config, Window};

/// The bit of an input that makes the protected function fail.
pub const FAIL: u64 = 1 << 63;

/// A breaker never opened by a bench stays open this long once tripped: for ever, here.
pub const LONG: Duration = Duration::from_secs(3600);

/// The protected function's error. `From<Rejected>` lets `#[circuit_breaker]` return rejections
/// through it.
///
/// Fieldless on purpose: `Result<u64, CallError>` is then a pair of scalars, returned in two
/// registers. With a two-variant enum it is returned through memory, and the caller's 16-byte
/// reload of the callee's 1- and 8-byte stores fails store-to-load forwarding: a ~12-cycle stall
/// that made the direct call cost 8 ns instead of 1.5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallError;

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the call failed or was rejected")
    }
}

impl std::error::Error for CallError {}

impl From<breakerbox::Rejected> for CallError {
    fn from(_: breakerbox::Rejected) -> Self {
        CallError
    }
}

/// The protected call: fails when the input has the [`FAIL`] bit.
#[inline(never)]
pub fn protected(x: u64) -> Result<u64, CallError> {
    if x & FAIL != 0 {
        Err(CallError)
    } else {
        Ok(x.wrapping_mul(3))
    }
}

/// What a rejected call answers with.
#[inline(never)]
pub fn fallback(x: u64) -> Result<u64, CallError> {
    Ok(x ^ 0xff)
}

/// The bare async function: the protected call in an `async fn`.
pub async fn protected_async(x: u64) -> Result<u64, CallError> {
    protected(x)
}

/// Inputs for a run: every `period`-th fails (never with period 0). Failures are spaced, so a
/// consecutive-failures policy of 5 never trips and no rate policy of 50% does either.
#[derive(Clone)]
pub struct Inputs {
    i: u64,
    period: u32,
    left: u32,
}

impl Inputs {
    pub fn all_ok() -> Self {
        Inputs::every(0)
    }

    pub fn every(period: u32) -> Self {
        Inputs {
            i: 0,
            period,
            left: period,
        }
    }

    #[inline(always)]
    pub fn next(&mut self) -> u64 {
        self.i = self.i.wrapping_add(1) & !FAIL;
        if self.period != 0 {
            self.left -= 1;
            if self.left == 0 {
                self.left = self.period;
                return self.i | FAIL;
            }
        }
        self.i
    }
}

/// Polls a future with a no-op waker until it is ready (the futures benched are always ready
/// at once; the loop only guards against a peer that yields).
#[inline(always)]
pub fn poll_now<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// A tokio runtime for the tower cases: tower-resilience creates timers when its lock is
/// contended, which need a runtime.
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

// ---- breakerbox configs ----

/// Consecutive failures 5 (the default), open for an hour once tripped.
pub fn bb_consecutive(name: &str) -> Breaker {
    Breaker::new(name, bb_consecutive_config())
}

pub fn bb_consecutive_config() -> Config {
    Config::builder()
        .failures(5)
        .open_for(LONG)
        .build()
        .expect("valid config")
}

/// Opens on the first failure, for an hour.
pub fn bb_trip_once_config() -> Config {
    Config::builder()
        .failures(1)
        .open_for(LONG)
        .build()
        .expect("valid config")
}

/// Failure rate 50% over the last 10 s in 10 buckets.
pub fn bb_time_window_config() -> Config {
    Config::builder()
        .failure_rate(50)
        .window(Window::Time(Duration::from_secs(10)))
        .open_for(LONG)
        .build()
        .expect("valid config")
}

/// Failure rate 50% over the last 100 calls.
pub fn bb_count_window_config() -> Config {
    Config::builder()
        .failure_rate(50)
        .window(Window::Calls(100))
        .open_for(LONG)
        .build()
        .expect("valid config")
}

/// Slow-call rate 50% over the last 100 calls, a call slow from 1 s (the benches' calls never are).
pub fn bb_slow_count_window_config() -> Config {
    Config::builder()
        .slow(Duration::from_secs(1))
        .slow_rate(50)
        .window(Window::Calls(100))
        .open_for(LONG)
        .build()
        .expect("valid config")
}

// ---- peers' configs ----

pub type FailsafeConsecutive = failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>,
    (),
>;

/// failsafe, consecutive failures `n`, open for an hour.
pub fn failsafe_consecutive(n: u32) -> FailsafeConsecutive {
    use failsafe::{Config, backoff, failure_policy};
    Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            n,
            backoff::constant(LONG),
        ))
        .build()
}

/// failsafe's default: success rate over 30 s (EMA) or else 5 consecutive failures.
pub fn failsafe_default() -> impl failsafe::CircuitBreaker + Clone + Send + Sync + 'static {
    failsafe::Config::new().build()
}

/// failsafe's success rate over a 10 s window (it splits windows in 5 slices, not 10): trips
/// under 50% success once 10 calls are in.
pub fn failsafe_time_window() -> impl failsafe::CircuitBreaker + Clone + Send + Sync + 'static {
    use failsafe::{Config, backoff, failure_policy};
    Config::new()
        .failure_policy(failure_policy::success_rate_over_time_window(
            0.5,
            10,
            Duration::from_secs(10),
            backoff::constant(LONG),
        ))
        .build()
}

/// recloser: failure rate 50% over the last `len` calls (its only policy), open for an hour.
pub fn recloser(len: usize) -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(len)
        .open_wait(LONG)
        .build()
}

pub type TowerBase = tower::util::ServiceFn<fn(u64) -> std::future::Ready<Result<u64, CallError>>>;

/// The plain tower service every tower-resilience case wraps.
pub fn tower_base() -> TowerBase {
    fn call(x: u64) -> std::future::Ready<Result<u64, CallError>> {
        std::future::ready(protected(x))
    }
    tower::service_fn(call as fn(u64) -> _)
}

pub type TowerBreaker = tower_resilience::circuitbreaker::CircuitBreaker<
    TowerBase,
    tower_resilience::circuitbreaker::DefaultClassifier,
>;

/// tower-resilience, consecutive failures `k`, open for an hour.
pub fn tower_consecutive(k: usize) -> TowerBreaker {
    use tower::Layer;
    tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .consecutive_failures(k)
        .wait_duration_in_open(LONG)
        .build()
        .expect("valid config")
        .layer(tower_base())
}

/// tower-resilience, failure rate 50% over a 10 s time window.
pub fn tower_time_window() -> TowerBreaker {
    use tower::Layer;
    use tower_resilience::circuitbreaker::{CircuitBreakerLayer, SlidingWindowType};
    CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_type(SlidingWindowType::TimeBased)
        .sliding_window_duration(Duration::from_secs(10))
        .minimum_number_of_calls(10)
        .wait_duration_in_open(LONG)
        .build()
        .expect("valid config")
        .layer(tower_base())
}

/// tower-resilience, failure rate 50% over the last 100 calls.
pub fn tower_count_window() -> TowerBreaker {
    tower_over_last_100(|b| b.failure_rate_threshold(0.5))
}

/// tower-resilience, slow-call rate 50% over the last 100 calls, a call slow from 1 s: the
/// peer with a slow-call rate, matched to [`bb_slow_count_window_config`].
pub fn tower_slow_count_window() -> TowerBreaker {
    tower_over_last_100(|b| {
        b.slow_call_duration_threshold(Duration::from_secs(1))
            .slow_call_rate_threshold(0.5)
    })
}

/// tower-resilience over a count window of 100 calls, judged from the 100th, with the
/// thresholds `rate` sets.
fn tower_over_last_100(
    rate: impl FnOnce(
        tower_resilience::circuitbreaker::CircuitBreakerConfigBuilder,
    ) -> tower_resilience::circuitbreaker::CircuitBreakerConfigBuilder,
) -> TowerBreaker {
    use tower::Layer;
    use tower_resilience::circuitbreaker::{CircuitBreakerLayer, SlidingWindowType};
    rate(CircuitBreakerLayer::builder())
        .sliding_window_type(SlidingWindowType::CountBased)
        .sliding_window_size(100)
        .minimum_number_of_calls(100)
        .wait_duration_in_open(LONG)
        .build()
        .expect("valid config")
        .layer(tower_base())
}

// ---- two threads ----

/// Two long-lived threads that run a batch of calls each, started together behind a barrier.
/// Long-lived like a server's workers: each thread keeps whatever per-thread state a breaker
/// gives it (breakerbox's counter stripe) from one sample to the next.
pub struct Pair {
    jobs: Vec<Sender<u64>>,
    done: Receiver<Duration>,
    threads: Vec<JoinHandle<()>>,
}

impl Pair {
    /// `make(i)` runs on worker `i` and returns what runs one batch of `n` calls there.
    pub fn new<M, R>(make: M) -> Pair
    where
        M: Fn(usize) -> R + Send + Sync + 'static,
        R: FnMut(u64),
    {
        let make = Arc::new(make);
        let barrier = Arc::new(Barrier::new(2));
        let (done_tx, done) = channel();
        let mut jobs = Vec::new();
        let mut threads = Vec::new();
        for i in 0..2 {
            let (tx, rx) = channel::<u64>();
            let (make, barrier, done_tx) = (make.clone(), barrier.clone(), done_tx.clone());
            threads.push(std::thread::spawn(move || {
                let mut run = make(i);
                while let Ok(n) = rx.recv() {
                    barrier.wait();
                    let start = Instant::now();
                    run(n);
                    let _ = done_tx.send(start.elapsed());
                }
            }));
            jobs.push(tx);
        }
        Pair {
            jobs,
            done,
            threads,
        }
    }

    /// Runs `n` calls on each thread; the mean of the two threads' times (so criterion's
    /// per-iteration time is the time per call per thread).
    pub fn run(&self, n: u64) -> Duration {
        for tx in &self.jobs {
            tx.send(n).expect("worker alive");
        }
        let a = self.done.recv().expect("worker alive");
        let b = self.done.recv().expect("worker alive");
        (a + b) / 2
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.jobs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
