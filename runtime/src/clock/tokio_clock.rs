//! [`TokioClock`]: tokio's clock, with timers driven by tokio's time.

use core::time::Duration;
use std::sync::Arc;

use super::source::Clock;
use crate::timer::Timers;

/// tokio's clock, which follows `tokio::time::pause` and `advance` in tests.
///
/// Must be read inside a tokio runtime. It has [timers](Clock::timers), driven by tokio's
/// time: a breaker that opens inside a runtime arms its open timer (and its health probes'
/// ticks) on that runtime's timers, which one task per runtime fires as tokio's time reaches
/// them — paused time included, so a `#[tokio::test(start_paused = true)]` sees an open
/// breaker turn half-open at its open time without a call. The task tells the breakers'
/// listeners as it fires them (a listener that blocks holds up that runtime's other
/// timers).
///
/// On a current-thread runtime that task runs only while the runtime is driven: one used
/// only through `block_on`, whose futures are ready at their first poll (a rejected call's
/// is), may never run it. So there the timers are [best-effort](Timers::best_effort): the
/// breaker's rejections read the clock, and the first call after its open time half-opens
/// it, on that runtime, another one or none, if the task has not by then. A breaker that
/// opens outside a runtime has no timer, and half-opens at the first call after its open
/// time; when the runtime shuts down, its breakers go back to that too.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

/// `TokioClock`'s origin: a day before the first reading of the real clock. Not tokio's own
/// time: a paused runtime's clock starts at the real time it was built and may be far ahead of
/// another's, and every runtime's time must fall after the origin (a reading before it would
/// saturate to zero, and a deadline armed then would come late on that runtime).
fn tokio_origin() -> tokio::time::Instant {
    static ORIGIN: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let now = std::time::Instant::now();
        let origin = now
            .checked_sub(Duration::from_secs(24 * 3600))
            .unwrap_or(now);
        tokio::time::Instant::from_std(origin)
    })
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        let origin = tokio_origin();
        tokio::time::Instant::now().saturating_duration_since(origin)
    }

    fn timers(&self) -> Option<Arc<Timers>> {
        #[cfg(not(loom))]
        return tokio_timers::current();
        #[cfg(loom)]
        return None;
    }
}

/// `TokioClock`'s timers: one `Timers` per runtime, fired by a task on it.
#[cfg(not(loom))]
mod tokio_timers {
    use super::{TokioClock, tokio_origin};
    use crate::Clock;
    use crate::timer::Timers;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use core::time::Duration;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    type Drivers = Mutex<HashMap<tokio::runtime::Id, Arc<Timers>>>;

    fn drivers() -> &'static Drivers {
        static DRIVERS: std::sync::OnceLock<Drivers> = std::sync::OnceLock::new();
        DRIVERS.get_or_init(Drivers::default)
    }

    /// The current runtime's timers, their task started on first use; `None` outside a
    /// runtime. A multi-thread runtime's workers run the task whatever its `block_on` does;
    /// a current-thread runtime runs it only while driven, which may be never, so its timers
    /// are best-effort (the breakers' rejections read the clock).
    pub(super) fn current() -> Option<Arc<Timers>> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let id = handle.id();
        let mut map = drivers().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(timers) = map.get(&id) {
            return Some(timers.clone());
        }
        let timers = Arc::new(match handle.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => Timers::new(),
            _ => Timers::best_effort(),
        });
        map.insert(id, timers.clone());
        drop(map);
        // A runtime shutting down drops the task at once: its `Drop` shuts the timers down.
        drop(handle.spawn(Driver {
            timers: timers.clone(),
            id,
            sleep: Box::pin(tokio::time::sleep_until(tokio_origin())),
        }));
        Some(timers)
    }

    /// Fires its runtime's timers as tokio's time reaches them.
    struct Driver {
        timers: Arc<Timers>,
        id: tokio::runtime::Id,
        sleep: Pin<Box<tokio::time::Sleep>>,
    }

    impl Future for Driver {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            loop {
                self.timers.fire_due(TokioClock.now());
                // Registered with the deadline read: an earlier one armed after this wakes us.
                let Some(at) = self.timers.register(cx.waker()) else {
                    return Poll::Pending;
                };
                let deadline = tokio_origin() + Duration::from_nanos(at);
                self.sleep.as_mut().reset(deadline);
                if self.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        }
    }

    impl Drop for Driver {
        fn drop(&mut self) {
            // The runtime is going: no breaker may wait on its timers.
            let mut map = drivers().lock().unwrap_or_else(|e| e.into_inner());
            if map
                .get(&self.id)
                .is_some_and(|t| Arc::ptr_eq(t, &self.timers))
            {
                map.remove(&self.id);
            }
            drop(map);
            self.timers.shutdown();
        }
    }
}
