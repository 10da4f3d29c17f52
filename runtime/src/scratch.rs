//! A byte buffer kept by each thread for text that is written once and
//! then copied into an allocation of its exact size (a record key, a
//! recorded result, the canonical text a digest is taken of): one
//! allocation for the text kept, none for the text written, and no buffer
//! grown piece by piece on every call.

use std::cell::RefCell;

/// The most a thread keeps between uses: a buffer grown past it by a large
/// text is dropped rather than held for the thread's life.
const KEEP: usize = 64 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `write`'s answer, given this thread's buffer, empty; a new buffer when
/// the thread's is in use (`write` itself asked for one) or gone (the
/// thread is ending).
pub(crate) fn with<R>(write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut write = Some(write);
    let answer = SCRATCH.try_with(|cell| {
        let mut buffer = cell.try_borrow_mut().ok()?;
        let write = write.take()?;
        buffer.clear();
        let answer = write(&mut buffer);
        if buffer.capacity() > KEEP {
            *buffer = Vec::new();
        }
        Some(answer)
    });
    match (answer, write) {
        (Ok(Some(answer)), _) => answer,
        (_, Some(write)) => write(&mut Vec::new()),
        (_, None) => unreachable!("`write` is taken only to give the answer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_use_gets_a_buffer_of_its_own() {
        let texts = with(|outer| {
            outer.extend_from_slice(b"outer");
            let inner = with(|inner| {
                inner.extend_from_slice(b"inner");
                inner.clone()
            });
            (outer.clone(), inner)
        });
        assert_eq!(texts, (b"outer".to_vec(), b"inner".to_vec()));
        // The thread's buffer comes back empty.
        assert_eq!(with(|buffer| buffer.len()), 0);
    }

    #[test]
    fn a_large_buffer_is_not_kept() {
        with(|buffer| buffer.resize(KEEP + 1, 0));
        assert_eq!(with(|buffer| buffer.capacity()), 0);
    }
}
