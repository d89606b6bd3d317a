//! Targets over the parsers of bytes that come from outside: queue messages, list pages, the
//! Delta log (feature `services`: their crates build RocksDB, the AWS SDKs and deltalake).

use landfall_sink::fuzzing::{TxnInCommit, adds_in_commit, txn_in_commit};

/// A queue message body (S3 event, SNS envelope, Event Grid, CloudEvents, Pub/Sub, Azure
/// queue base64), as the queue readers parse it.
pub fn messages(data: &[u8]) {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    let _ = landfall_discovery::parse_notification(body);
}

/// A list response body: byte 0 picks S3 ListObjectsV2 (even) or Azure List Blobs (odd).
pub fn listing_page(data: &[u8]) {
    let ([which], rest) = crate::knobs::<1>(data);
    let Ok(body) = std::str::from_utf8(rest) else {
        return;
    };
    let _ = if which % 2 == 0 {
        landfall_discovery::fuzzing::s3_page_keys(body)
    } else {
        landfall_discovery::fuzzing::azure_page_keys(body)
    };
}

/// A Delta commit file's bytes, as recovery reads them (the stream's txn; the added paths and
/// the owner stamp). A commit with a line that is not a JSON object (an action) is an error
/// for both, never an answer: a damaged entry must not read as "this batch is not here".
pub fn delta_log(data: &[u8]) {
    let txn = txn_in_commit(data, "stream");
    let adds = adds_in_commit(data);
    let damaged = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .any(|l| !serde_json::from_slice::<serde_json::Value>(l).is_ok_and(|v| v.is_object()));
    if damaged {
        assert!(txn.is_err(), "a damaged commit read as {txn:?}");
        assert!(adds.is_err(), "a damaged commit read as {adds:?}");
    } else {
        // (A txn whose version is not an integer is refused by the txn reader alone.)
        assert!(adds.is_ok(), "a commit of actions refused: {adds:?}");
    }
    if let Ok(TxnInCommit::Version(_)) = txn {
        assert!(
            adds.is_ok(),
            "a commit with a txn whose adds are unreadable"
        );
    }
}
