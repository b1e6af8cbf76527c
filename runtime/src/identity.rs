//! A breaker's name, and the count of live breakers the memory tests read.

use std::sync::Arc;

/// A breaker's name. One word (the first cache line has no room for two), shared by the
/// breakers of a keyed family, and freed with the last breaker that holds it, so a process
/// that makes and drops breakers of ever new names keeps a flat heap. The last failure's
/// message lives in the breaker's extras, per breaker. A [`Rejected`](crate::Rejected) keeps
/// the name with what else it reports, not a handle to the breaker.
pub(crate) struct Identity {
    pub(crate) name: Arc<Box<str>>,
}

/// Breakers alive now (each holds one `Identity`): what the memory tests count.
static LIVE_IDENTITIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Identity {
    pub(crate) fn new(name: String) -> Identity {
        Identity::shared(Arc::new(name.into_boxed_str()))
    }

    pub(crate) fn shared(name: Arc<Box<str>>) -> Identity {
        LIVE_IDENTITIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Identity { name }
    }

    /// The name: a keyed family's, for its breakers.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        LIVE_IDENTITIES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How many breakers (registry, `Breaker::new` and keyed ones) are alive in the process. For
/// tests of memory: it falls when a breaker's last handle is dropped.
#[doc(hidden)]
pub fn live_breakers() -> usize {
    LIVE_IDENTITIES.load(std::sync::atomic::Ordering::Relaxed)
}
