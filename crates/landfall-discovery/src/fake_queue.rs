//! An in-memory [`MessageQueue`] for unit tests of the queue consumers.

use crate::queue::{Extension, MessageQueue, QueueError, QueueMessage};
use async_trait::async_trait;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// An in-memory queue: `receive` hands out what is queued (once), `delete` records what
/// was deleted, `extend` fails when told to.
#[derive(Default)]
pub(crate) struct FakeQueue {
    pub queued: Mutex<Vec<QueueMessage>>,
    pub deleted: Mutex<Vec<String>>,
    pub fail_extend: AtomicBool,
    /// Extension calls made.
    pub extends: AtomicU64,
    /// The next this many `receive` calls fail (retryably).
    pub fail_receives: AtomicU64,
    /// The next this many `receive` calls never answer (a silent connection).
    pub hang_receives: AtomicU64,
    pub retention: Option<Duration>,
}

impl FakeQueue {
    /// Queue one message per body: ids `m0, m1, ...`, receipts `r0, r1, ...`.
    pub fn hold(&self, bodies: &[String]) {
        *self.queued.lock().unwrap() = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| QueueMessage {
                id: format!("m{i}"),
                body: b.clone(),
                receipt: format!("r{i}"),
                receive_count: 1,
            })
            .collect();
    }
}

#[async_trait]
impl MessageQueue for FakeQueue {
    fn describe(&self) -> String {
        "fake".into()
    }
    async fn receive(
        &self,
        max: usize,
        _wait: Duration,
        _visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        if self
            .fail_receives
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(QueueError {
                op: "ReceiveMessage",
                queue: "fake".into(),
                detail: "injected failure".into(),
                retryable: true,
            });
        }
        if self
            .hang_receives
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return std::future::pending().await;
        }
        let mut q = self.queued.lock().unwrap();
        let n = max.min(q.len());
        Ok(q.drain(..n).collect())
    }
    async fn delete(&self, receipts: &[String]) -> Result<Vec<String>, QueueError> {
        self.deleted
            .lock()
            .unwrap()
            .extend(receipts.iter().cloned());
        Ok(Vec::new())
    }
    async fn extend(
        &self,
        receipts: &[String],
        _visibility: Duration,
        _deadline: tokio::time::Instant,
    ) -> Result<Vec<Extension>, QueueError> {
        self.extends.fetch_add(1, Ordering::SeqCst);
        let fail = self.fail_extend.load(Ordering::SeqCst);
        Ok(receipts
            .iter()
            .map(|r| match fail {
                true => Extension::Refused,
                false => Extension::Renewed(r.clone()),
            })
            .collect())
    }
    async fn approximate_depth(&self) -> Result<Option<u64>, QueueError> {
        Ok(None)
    }
    async fn retention(&self) -> Result<Option<Duration>, QueueError> {
        Ok(self.retention)
    }
}
