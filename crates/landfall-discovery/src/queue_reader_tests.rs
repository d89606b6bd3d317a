//! The queue reader's rounds over an in-memory queue: a failed or silent receive beside
//! answered ones.

use crate::fake_queue::FakeQueue;
use crate::queue::QueueMessage;
use crate::queue_reader::QueueReader;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn message(i: usize) -> QueueMessage {
    QueueMessage {
        id: format!("m{i}"),
        body: "{}".into(),
        receipt: format!("r{i}"),
        receive_count: 1,
    }
}

/// The first of two receive calls fails, the second returns messages: they are returned
/// and held, not dropped for a visibility timeout.
#[tokio::test]
async fn a_failed_receive_keeps_what_the_calls_beside_it_received() {
    let q = Arc::new(FakeQueue::default());
    q.queued.lock().unwrap().extend((0..3).map(message));
    q.fail_receives.store(1, Ordering::SeqCst);
    let reader = QueueReader::new(
        "test".into(),
        q.clone(),
        2,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    let got = reader.receive().await.expect("the messages, not the error");
    let ids: Vec<_> = got.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m0", "m1", "m2"]);
    let tokens = got
        .iter()
        .map(|m| landfall_core::AckToken(m.receipt.clone()))
        .collect();
    reader.acknowledge(tokens).await.unwrap();
    assert_eq!(q.deleted.lock().unwrap().len(), 3, "held, so deleted");

    // Every call failing, nothing received: the error.
    q.fail_receives.store(2, Ordering::SeqCst);
    assert!(reader.receive().await.is_err());
}

/// One of two receive calls never answers, the other returns messages: the round ends
/// 3/4 of a visibility timeout after its first message with those messages, instead of
/// waiting for the silent call (its messages would expire unrecorded meanwhile).
#[tokio::test]
async fn a_silent_receive_does_not_hold_the_round() {
    let q = Arc::new(FakeQueue::default());
    q.queued.lock().unwrap().extend((0..3).map(message));
    q.hang_receives.store(1, Ordering::SeqCst);
    let reader = QueueReader::new(
        "test".into(),
        q.clone(),
        2,
        Duration::from_secs(2),
        Duration::ZERO,
    );
    let started = std::time::Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(30), reader.receive())
        .await
        .expect("the round ends without the silent call")
        .expect("the messages");
    assert_eq!(got.len(), 3);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(5),
        "ended at the deadline (1.5 s), not before nor long after: {took:?}"
    );
}
