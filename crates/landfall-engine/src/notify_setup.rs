//! The notification resources landfall created for a stream (queue, topic, bucket
//! notification), as recorded in the stream's state by `landfall notifications setup`.

use landfall_core::seams::SeamResult;
use landfall_core::{SeamError, StateStore};
use landfall_discovery::CreatedResources;

/// The ledger's `m/user/` entry holding the resources setup created (JSON).
pub const RESOURCES_META: &str = "notification_resources";

/// What setup recorded, if anything.
pub fn created(state: &dyn StateStore) -> SeamResult<Option<CreatedResources>> {
    match state.meta(RESOURCES_META)? {
        None => Ok(None),
        Some(json) if json.is_empty() => Ok(None),
        Some(json) => serde_json::from_str(&json).map(Some).map_err(|e| {
            SeamError::fatal(format!(
                "the recorded notification resources are unreadable ({e}): {json}"
            ))
        }),
    }
}

/// The URL of the queue setup created, if any.
pub fn created_queue_url(state: &dyn StateStore) -> SeamResult<Option<String>> {
    Ok(created(state)?.and_then(|r| r.queue_url))
}

/// Record (or, with `None`, forget) what setup created.
pub fn record(state: &dyn StateStore, resources: Option<&CreatedResources>) -> SeamResult<()> {
    let json = match resources {
        Some(r) => serde_json::to_string(r).expect("resources serialise"),
        None => String::new(),
    };
    state.set_meta(RESOURCES_META, &json)
}
