//! Catching the panics of readers that panic on damaged files instead of failing: orc-rust
//! (unchecked arithmetic and `unwrap`s on values read from the file) and the Parquet reader's
//! decoding of the Arrow schema a writer embeds in the footer (arrow-ipc's flatbuffer
//! conversion `expect`s and `unimplemented!`s on types it does not know). A panic inside one
//! of these becomes the file's error, so a damaged file is a corrupt file (skipped or stopping
//! the stream, as `ignore_corrupt_files` says), never a crashed worker retried forever.
//!
//! Found by fuzzing (crates/landfall-fuzz): a Parquet file whose embedded Arrow schema names a
//! union with bad type ids panicked the decoder.

use futures::stream::{BoxStream, StreamExt};
use std::future::Future;
use std::panic::AssertUnwindSafe;

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
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| panicked(reader, p))
}

/// Await `fut`; a panic while it is polled becomes `Err(message)`.
pub(crate) async fn guarded_future<T>(
    reader: &str,
    fut: impl Future<Output = T>,
) -> Result<T, String> {
    futures::FutureExt::catch_unwind(AssertUnwindSafe(fut))
        .await
        .map_err(|p| panicked(reader, p))
}

/// `stream`'s items; a panic while it is polled becomes one `Err(message)` item, and the
/// stream ends there (a panicked reader is not polled again).
pub(crate) fn guarded_stream<T: Send + 'static>(
    reader: &'static str,
    stream: impl futures::Stream<Item = T> + Send + 'static,
) -> BoxStream<'static, Result<T, String>> {
    AssertUnwindSafe(stream)
        .catch_unwind()
        .map(move |r| r.map_err(|p| panicked(reader, p)))
        .boxed()
}
