//! A breaker's name (and a keyed family's breaker's key), and the count of live breakers the
//! memory tests read.

use core::ptr::NonNull;
use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::sync::Arc;

/// A breaker's name, and for a keyed family's breaker its key as it displays. One word (the
/// first cache line has no room for two), pointing to one allocation freed with the breaker:
/// names are not interned for the process (D10). The last failure's message lives in
/// [`Cold`](crate::breaker), per breaker. A [`Rejected`](crate::Rejected) names its breaker by
/// holding a handle to it.
///
/// The allocation is a header and text, `[family][len][text]`:
/// - `family` (8 bytes): the family's name, shared by its breakers, or none;
/// - `len` (4 bytes): the text's length, or [`NO_KEY`] for none;
/// - `text`: the name, for a breaker of no family; otherwise the key.
///
/// So a family's breaker pays 12 bytes and its key's text for knowing its key, and a breaker
/// of no family 12 bytes and its name (an `Arc<Box<str>>` was 32 and the name).
pub(crate) struct Identity {
    ptr: NonNull<u8>,
}

// SAFETY: an `Identity` owns its allocation, which holds an `Arc<Box<str>>` (`Send + Sync`)
// and bytes, and is never written after it is made.
unsafe impl Send for Identity {}
// SAFETY: as above; `&Identity` only reads.
unsafe impl Sync for Identity {}

/// `len` for a family's breaker with no key of its own (the overflow breaker, which new keys
/// share when the family is full).
const NO_KEY: u32 = u32::MAX;
/// Where the text starts: after the family's pointer and the length.
const TEXT: usize = 12;

type Family = Option<Arc<Box<str>>>;

const _: () = assert!(core::mem::size_of::<Family>() == 8);

/// Breakers alive now (each holds one `Identity`): what the memory tests count.
static LIVE_IDENTITIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Identity {
    /// The name of a breaker of no family.
    pub(crate) fn new(name: String) -> Identity {
        let name = clamp(&name);
        Identity::write(None, name.len() as u32, name)
    }

    /// A breaker of the family named `name` with no key of its own (the overflow breaker).
    pub(crate) fn shared(name: Arc<Box<str>>) -> Identity {
        Identity::write(Some(name), NO_KEY, "")
    }

    /// The breaker of `key` (its text as it displays) in the family named `family`.
    pub(crate) fn keyed(family: Arc<Box<str>>, key: &str) -> Identity {
        let key = clamp(key);
        Identity::write(Some(family), key.len() as u32, key)
    }

    fn write(family: Family, len: u32, text: &str) -> Identity {
        let layout = layout(text.len());
        // SAFETY: `layout` has a non-zero size (at least the header).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation is `TEXT + text.len()` bytes aligned to 8: the family's
        // pointer at 0 (8 bytes, aligned), the length at 8 (4 bytes, aligned), the text after.
        unsafe {
            ptr.as_ptr().cast::<Family>().write(family);
            ptr.as_ptr().add(8).cast::<u32>().write(len);
            core::ptr::copy_nonoverlapping(text.as_ptr(), ptr.as_ptr().add(TEXT), text.len());
        }
        LIVE_IDENTITIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Identity { ptr }
    }

    fn family(&self) -> &Family {
        // SAFETY: written by `write`, aligned, alive while `self` is.
        unsafe { &*self.ptr.as_ptr().cast::<Family>() }
    }

    fn len(&self) -> u32 {
        // SAFETY: as in `family`.
        unsafe { self.ptr.as_ptr().add(8).cast::<u32>().read() }
    }

    fn text(&self) -> &str {
        let len = match self.len() {
            NO_KEY => 0,
            n => n as usize,
        };
        // SAFETY: `len` bytes copied from a `str` by `write`, alive while `self` is.
        unsafe {
            core::str::from_utf8_unchecked(core::slice::from_raw_parts(
                self.ptr.as_ptr().add(TEXT),
                len,
            ))
        }
    }

    /// The breaker's name: its family's, for a family's breaker.
    pub(crate) fn name(&self) -> &str {
        match self.family() {
            Some(family) => family,
            None => self.text(),
        }
    }

    /// A family's breaker's key, as it displayed when the breaker was made; `None` for other
    /// breakers and the family's overflow breaker.
    pub(crate) fn key(&self) -> Option<&str> {
        (self.family().is_some() && self.len() != NO_KEY).then(|| self.text())
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        let len = match self.len() {
            NO_KEY => 0,
            n => n as usize,
        };
        // SAFETY: made by `write` with this layout; dropped once, here.
        unsafe {
            core::ptr::drop_in_place(self.ptr.as_ptr().cast::<Family>());
            dealloc(self.ptr.as_ptr(), layout(len));
        }
        LIVE_IDENTITIES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn layout(text: usize) -> Layout {
    Layout::from_size_align(TEXT + text, 8).expect("a name shorter than 4 GiB")
}

/// `text`, cut at a character boundary below 4 GiB (the length is 32 bits, less [`NO_KEY`]).
fn clamp(text: &str) -> &str {
    let max = (NO_KEY - 1) as usize;
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How many breakers (registry, `Breaker::new` and keyed ones) are alive in the process. For
/// tests of memory: it falls when a breaker's last handle is dropped.
#[doc(hidden)]
pub fn live_breakers() -> usize {
    LIVE_IDENTITIES.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_read_back() {
        let plain = Identity::new("payments".into());
        assert_eq!((plain.name(), plain.key()), ("payments", None));
        let family: Arc<Box<str>> = Arc::new("hosts".into());
        let keyed = Identity::keyed(family.clone(), "a\u{0}b/é");
        assert_eq!((keyed.name(), keyed.key()), ("hosts", Some("a\u{0}b/é")));
        let empty = Identity::keyed(family.clone(), "");
        assert_eq!(empty.key(), Some(""));
        let overflow = Identity::shared(family.clone());
        assert_eq!((overflow.name(), overflow.key()), ("hosts", None));
        drop((keyed, empty, overflow));
        assert_eq!(Arc::strong_count(&family), 1);
    }
}
