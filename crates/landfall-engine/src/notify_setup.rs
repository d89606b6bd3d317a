//! The notification resources landfall created for a stream (queue, topic, bucket
//! notification), as recorded in the stream's state by `landfall notifications setup`.

use landfall_config::{DiscoverySpec, QueueSpec, StreamSpec};
use landfall_core::seams::SeamResult;
use landfall_core::{SeamError, StateStore};
use landfall_discovery::{
    AwsNotifications, AwsSettings, AzureQueue, AzureQueueSettings, CreatedResources,
    ResourceStatus, SetupError, SetupRequest,
};

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

/// What setup would create for `spec`, with the AWS settings of its source; `None` when the
/// stream does not own its resources (listing mode, a given `queue_url`, an Azure queue).
pub fn setup_request(spec: &StreamSpec) -> Option<(SetupRequest, AwsSettings)> {
    let DiscoverySpec::Notifications(n) = &spec.discovery else {
        return None;
    };
    let QueueSpec::Sqs {
        url: None,
        name,
        sns,
    } = &n.queue
    else {
        return None;
    };
    let url = &spec.source.url;
    let bucket = url.host_str()?.to_string();
    let prefix = url.path().trim_start_matches('/').to_string();
    Some((
        SetupRequest {
            stream: spec.name.clone(),
            bucket,
            prefix,
            queue_name: name.clone(),
            sns: *sns,
            tags: n.resource_tags.clone(),
        },
        aws_settings(spec),
    ))
}

/// AWS client settings of the stream: its source store's options, with the queue endpoint of
/// `[streams.<name>.notifications]` over the store's.
pub fn aws_settings(spec: &StreamSpec) -> AwsSettings {
    let endpoint = match &spec.discovery {
        DiscoverySpec::Notifications(n) => n.endpoint.as_deref(),
        DiscoverySpec::Listing => None,
    };
    AwsSettings::from_store_options(spec.source_options.iter(), endpoint)
}

/// Where the stream's Azure Storage Queue `queue` is and how to reach it, from its source
/// store's options and the queue endpoint of `[streams.<name>.notifications]`.
pub fn azure_settings(spec: &StreamSpec, queue: &str) -> SeamResult<AzureQueueSettings> {
    let endpoint = match &spec.discovery {
        DiscoverySpec::Notifications(n) => n.endpoint.as_deref(),
        DiscoverySpec::Listing => None,
    };
    AzureQueueSettings::from_store_options(spec.source_options.iter(), queue, endpoint)
        .map_err(|e| SeamError::fatal(format!("stream `{}`: queue `{queue}`: {e}", spec.name)))
}

fn failed(spec: &StreamSpec, e: SetupError) -> SeamError {
    let msg = format!("stream `{}`: notification setup: {e}", spec.name);
    match e {
        SetupError::Overlap { .. } | SetupError::NotOurs { .. } => SeamError::fatal(msg),
        SetupError::Aws { .. } => SeamError::retryable(msg),
    }
}

/// Create the stream's resources (idempotent) and record them. `None`: the stream does not
/// own resources (see [`setup_request`]).
pub async fn setup(
    spec: &StreamSpec,
    state: &dyn StateStore,
) -> SeamResult<Option<CreatedResources>> {
    let Some((req, aws)) = setup_request(spec) else {
        return Ok(None);
    };
    // S3 keeps one notification configuration per bucket, read and written whole: streams
    // of this process setting up on one bucket take turns, or one would drop the other's
    // entry.
    let lock = bucket_lock(&req.bucket);
    let _turn = lock.lock().await;
    let created = AwsNotifications::new(&aws)
        .await
        .setup(&req)
        .await
        .map_err(|e| failed(spec, e))?;
    record(state, Some(&created))?;
    tracing::info!(stream = %spec.name, queue = created.queue_url.as_deref().unwrap_or(""), topic = created.topic_arn.as_deref().unwrap_or(""), bucket = %created.bucket, prefix = %created.prefix, "notification resources set up");
    Ok(Some(created))
}

/// The queue of a stream that owns its resources: the recorded one, or set up now (the first
/// start in notification mode without `queue_url`).
pub async fn ensure_queue(spec: &StreamSpec, state: &dyn StateStore) -> SeamResult<String> {
    if let Some(url) = created_queue_url(state)? {
        return Ok(url);
    }
    setup(spec, state)
        .await?
        .and_then(|c| c.queue_url)
        .ok_or_else(|| {
            SeamError::fatal(format!(
                "stream `{}`: no queue to read: give notifications.queue_url",
                spec.name
            ))
        })
}

/// Remove what setup created for the stream and forget it. Returns what was done.
pub async fn teardown(spec: &StreamSpec, state: &dyn StateStore) -> SeamResult<Vec<String>> {
    let Some(created) = created(state)? else {
        return Ok(Vec::new());
    };
    let aws = aws_settings(spec);
    let done = AwsNotifications::new(&aws)
        .await
        .teardown(&created)
        .await
        .map_err(|e| failed(spec, e))?;
    record(state, None)?;
    Ok(done)
}

/// The recorded resources and whether each still exists.
pub async fn status(
    spec: &StreamSpec,
    state: &dyn StateStore,
) -> SeamResult<Option<(CreatedResources, ResourceStatus)>> {
    let Some(created) = created(state)? else {
        return Ok(None);
    };
    let aws = aws_settings(spec);
    let s = AwsNotifications::new(&aws)
        .await
        .status(&created)
        .await
        .map_err(|e| failed(spec, e))?;
    Ok(Some((created, s)))
}

/// Azure: create the stream's Storage Queue if it does not exist (the Event Grid subscription
/// that feeds it is the user's, see deploy/azure/event-grid.md). Returns whether it was
/// created; `None` when the stream does not read an Azure queue.
pub async fn create_azure_queue(spec: &StreamSpec) -> SeamResult<Option<bool>> {
    let DiscoverySpec::Notifications(n) = &spec.discovery else {
        return Ok(None);
    };
    let QueueSpec::AzureQueue { name } = &n.queue else {
        return Ok(None);
    };
    let queue = AzureQueue::new(azure_settings(spec, name)?, std::sync::Arc::new(|_, _| {}));
    queue
        .create_if_missing()
        .await
        .map(Some)
        .map_err(|e| SeamError::fatal(format!("stream `{}`: {e}", spec.name)))
}

/// One lock per bucket for the read-modify-write of its notification configuration.
fn bucket_lock(bucket: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    static LOCKS: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    > = std::sync::LazyLock::new(Default::default);
    LOCKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(bucket.to_string())
        .or_default()
        .clone()
}
