//! How `compare` measures each contender: the loops around a call on one thread and on two,
//! for plain calls and for tower services. Every contender of a case goes through the same
//! loop.

use std::hint::black_box;
use std::time::Instant;

use criterion::BenchmarkGroup;
use criterion::measurement::WallTime;
use tower::{Service, ServiceExt};

use super::{Inputs, Pair, tokio_rt};

pub(crate) type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// What a loop keeps of a call's output: a word that depends on it, summed, so no call can be
/// optimized away and no output is written to memory per call.
pub(crate) trait Digest {
    fn digest(self) -> u64;
}

impl<E> Digest for Result<u64, E> {
    #[inline(always)]
    fn digest(self) -> u64 {
        self.unwrap_or(1)
    }
}

impl Digest for bool {
    #[inline(always)]
    fn digest(self) -> u64 {
        u64::from(self)
    }
}

/// Benches `f` on one thread with fresh inputs.
///
/// The loop is written out (`iter_custom`) so that the inputs are a local kept in registers,
/// and outputs are folded into one word rather than each passed to `black_box`: with
/// `b.iter(|| f(..))`, LLVM sometimes reloaded a 16-byte value right after writing it as two
/// 8-byte halves, a store-forwarding stall (~4 ns) charged to whichever contender it hit.
pub(crate) fn one<T: Digest>(
    g: &mut Group<'_>,
    id: &str,
    inputs: Inputs,
    mut f: impl FnMut(u64) -> T,
) {
    g.bench_function(id, |b| {
        b.iter_custom(|n| {
            let mut inputs = inputs.clone();
            let mut sum = 0u64;
            let start = Instant::now();
            for _ in 0..n {
                sum = sum.wrapping_add(f(black_box(inputs.next())).digest());
            }
            let took = start.elapsed();
            black_box(sum);
            took
        })
    });
}

/// A batch of `n` calls of `f`, for a [`Pair`] worker.
pub(crate) fn batch<T: Digest>(mut inputs: Inputs, mut f: impl FnMut(u64) -> T) -> impl FnMut(u64) {
    move |n| {
        let mut sum = 0u64;
        for _ in 0..n {
            sum = sum.wrapping_add(f(black_box(inputs.next())).digest());
        }
        black_box(sum);
    }
}

/// Benches two threads, each running `make(i)`'s batches; the time is per call per thread.
pub(crate) fn two<M, R>(g: &mut Group<'_>, id: &str, make: M)
where
    M: Fn(usize) -> R + Send + Sync + 'static,
    R: FnMut(u64),
{
    let pair = Pair::new(make);
    g.bench_function(id, |b| b.iter_custom(|n| pair.run(n)));
}

/// One call through a tower service, as a user's code awaits it.
pub(crate) async fn tower_call<S: Service<u64>>(
    svc: &mut S,
    x: u64,
) -> Result<S::Response, S::Error> {
    svc.ready().await?.call(x).await
}

/// Benches a tower service on one thread, in a current-thread tokio runtime.
pub(crate) fn tower_one<S: Service<u64>>(
    g: &mut Group<'_>,
    id: &str,
    mut inputs: Inputs,
    mut svc: S,
) {
    let rt = tokio_rt();
    g.bench_function(id, |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..n {
                    black_box(tower_call(&mut svc, black_box(inputs.next())).await.is_ok());
                }
                start.elapsed()
            })
        })
    });
}

/// Benches a tower service on two threads, each with its clone and its own runtime.
pub(crate) fn tower_two<S>(g: &mut Group<'_>, id: &str, svc: S)
where
    S: Service<u64> + Clone + Send + Sync + 'static,
{
    two(g, id, move |_| {
        let rt = tokio_rt();
        let mut svc = svc.clone();
        let mut inputs = Inputs::all_ok();
        move |n| {
            rt.block_on(async {
                for _ in 0..n {
                    black_box(tower_call(&mut svc, black_box(inputs.next())).await.is_ok());
                }
            })
        }
    });
}
