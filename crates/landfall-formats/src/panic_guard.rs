//! Catching the panics of readers that panic on damaged files instead of failing: orc-rust
//! (unchecked arithmetic and `unwrap`s on values read from the file) and the Parquet reader's
//! decoding of the Arrow schema a writer embeds in the footer (arrow-ipc's flatbuffer
//! conversion `expect`s and `unimplemented!`s on types it does not know), and arrow-avro (no
//! finding so far; guarded as the others, since it decodes untrusted blocks). A panic inside one
//! of these becomes the file's error, so a damaged file is a corrupt file (skipped or stopping
//! the stream, as `ignore_corrupt_files` says), never a crashed worker retried forever.
//!
//! A panic caught here is not printed by the process's panic hook (which would show a
//! `panicked at` line for a handled case): the hook is wrapped once to stay quiet while the
//! current thread runs a guarded reader; the panic's message becomes the file's error.
//!
//! Found by fuzzing (crates/landfall-fuzz): a Parquet file whose embedded Arrow schema names a
//! union with bad type ids panicked the decoder.

use futures::stream::{BoxStream, StreamExt};
use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// Guarded readers running on this thread.
    static GUARDED: Cell<u32> = const { Cell::new(0) };
}

/// Wrap the panic hook (once): silent while a guarded reader runs on the panicking thread.
fn quiet_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
}

/// Marks this thread as running a guarded reader while alive.
struct Guarded;

impl Guarded {
    fn enter() -> Self {
        quiet_hook();
        GUARDED.with(|g| g.set(g.get() + 1));
        Guarded
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        GUARDED.with(|g| g.set(g.get().saturating_sub(1)));
    }
}

/// A future or stream polled as a guarded reader.
struct Quiet<T>(Pin<Box<T>>);

impl<F: Future> Future for Quiet<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _g = Guarded::enter();
        self.0.as_mut().poll(cx)
    }
}

impl<S: futures::Stream> futures::Stream for Quiet<S> {
    type Item = S::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let _g = Guarded::enter();
        self.0.as_mut().poll_next(cx)
    }
}

/// What a caught panic said: `the <reader> reader failed on this file (<message>)`.
pub(crate) fn panicked(reader: &str, payload: Box<dyn std::any::Any + Send>) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    format!("the {reader} reader failed on this file ({msg})")
}

/// Run `f`; a panic becomes `Err(message)`.
pub(crate) fn guarded<T>(reader: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    let g = Guarded::enter();
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    drop(g);
    r.map_err(|p| panicked(reader, p))
}

/// Await `fut`; a panic while it is polled becomes `Err(message)`.
pub(crate) async fn guarded_future<T>(
    reader: &str,
    fut: impl Future<Output = T>,
) -> Result<T, String> {
    futures::FutureExt::catch_unwind(AssertUnwindSafe(Quiet(Box::pin(fut))))
        .await
        .map_err(|p| panicked(reader, p))
}

/// `stream`'s items; a panic while it is polled becomes one `Err(message)` item, and the
/// stream ends there (a panicked reader is not polled again).
pub(crate) fn guarded_stream<T: Send + 'static>(
    reader: &'static str,
    stream: impl futures::Stream<Item = T> + Send + 'static,
) -> BoxStream<'static, Result<T, String>> {
    AssertUnwindSafe(Quiet(Box::pin(stream)))
        .catch_unwind()
        .map(move |r| r.map_err(|p| panicked(reader, p)))
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_is_an_error_and_the_marker_is_cleared() {
        let r: Result<(), String> = guarded("Test", || panic!("bad file"));
        assert_eq!(
            r.unwrap_err(),
            "the Test reader failed on this file (bad file)"
        );
        assert_eq!(GUARDED.with(Cell::get), 0);
        let r = futures::executor::block_on(guarded_future("Test", async { panic!("later") }));
        assert!(r.unwrap_err().contains("later"));
        assert_eq!(GUARDED.with(Cell::get), 0);
        let items: Vec<_> = futures::executor::block_on(
            guarded_stream(
                "Test",
                futures::stream::iter([1, 2]).map(|i| if i == 2 { panic!("two") } else { i }),
            )
            .collect(),
        );
        assert_eq!(items.len(), 2);
        assert_eq!(items[0], Ok(1));
        assert!(items[1].as_ref().unwrap_err().contains("two"));
    }
}
