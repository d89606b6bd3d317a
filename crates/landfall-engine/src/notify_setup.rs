//! The notification resources landfall created for a queue's owner (queue, topic, bucket
//! notification): a notification stream (recorded in its ledger by `landfall notifications
//! setup` or its first start) or a file-events location (recorded in its event cache).

use landfall_config::{
    DiscoverySpec, LocationSpec, NotificationsSpec, QueueSpec, StoreOptions, StreamSpec,
};
use landfall_core::seams::SeamResult;
use landfall_core::{SeamError, StateStore};
use landfall_discovery::{
    AwsNotifications, AwsSettings, AzureQueue, AzureQueueSettings, CreatedResources, Entry,
    EntryGuard, EntryHooks, OwedListing, ResourceStatus, SetupError, SetupRequest,
};

/// The ledger's `m/user/` entry holding the resources setup created (JSON).
pub const RESOURCES_META: &str = "notification_resources";

/// Who reads a queue landfall may set up.
pub struct QueueOwner<'a> {
    /// `stream \`x\`` or `location \`raw\``, for messages.
    pub what: String,
    /// The `landfall-stream` tag value of its resources: the stream name, or
    /// `location:<name>`.
    pub tag: String,
    pub url: &'a url::Url,
    pub options: &'a StoreOptions,
    pub queue: &'a NotificationsSpec,
}

impl<'a> QueueOwner<'a> {
    /// A notification stream's queue.
    pub fn of_stream(spec: &'a StreamSpec) -> Option<Self> {
        let DiscoverySpec::Notifications(n) = &spec.discovery else {
            return None;
        };
        Some(QueueOwner {
            what: format!("stream `{}`", spec.name),
            tag: spec.name.clone(),
            url: &spec.source.url,
            options: &spec.source_options,
            queue: n,
        })
    }

    /// A file-events location's queue.
    pub fn of_location(spec: &'a LocationSpec) -> Option<Self> {
        Some(QueueOwner {
            what: format!("location `{}`", spec.name),
            tag: format!("location:{}", spec.name),
            url: &spec.url.url,
            options: &spec.options,
            queue: spec.queue.as_ref()?,
        })
    }
}

/// Where an owner keeps its notes (the stream's ledger, the location's cache).
pub trait Notes: Send + Sync {
    fn note(&self, name: &str) -> SeamResult<Option<String>>;
    fn set_note(&self, name: &str, value: &str) -> SeamResult<()>;
}

impl Notes for dyn StateStore + '_ {
    fn note(&self, name: &str) -> SeamResult<Option<String>> {
        self.meta(name)
    }
    fn set_note(&self, name: &str, value: &str) -> SeamResult<()> {
        self.set_meta(name, value)
    }
}

impl<K: landfall_state::Kv> Notes for landfall_state::Ledger<K> {
    fn note(&self, name: &str) -> SeamResult<Option<String>> {
        self.meta(name)
    }
    fn set_note(&self, name: &str, value: &str) -> SeamResult<()> {
        self.set_meta(name, value)
    }
}

impl<K: landfall_state::Kv> Notes for landfall_state::EventCache<K> {
    fn note(&self, name: &str) -> SeamResult<Option<String>> {
        Ok(self.meta(name)?)
    }
    fn set_note(&self, name: &str, value: &str) -> SeamResult<()> {
        Ok(self.set_meta(name, value)?)
    }
}

/// What setup recorded, if anything.
pub fn created<N: Notes + ?Sized>(state: &N) -> SeamResult<Option<CreatedResources>> {
    match state.note(RESOURCES_META)? {
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
pub fn created_queue_url<N: Notes + ?Sized>(state: &N) -> SeamResult<Option<String>> {
    Ok(created(state)?.and_then(|r| r.queue_url))
}

/// Record (or, with `None`, forget) what setup created.
pub fn record<N: Notes + ?Sized>(
    state: &N,
    resources: Option<&CreatedResources>,
) -> SeamResult<()> {
    let json = match resources {
        Some(r) => serde_json::to_string(r).expect("resources serialise"),
        None => String::new(),
    };
    state.set_note(RESOURCES_META, &json)
}

/// What setup would create for `o`, with its AWS settings; `None` when the owner does not
/// own its resources (a given `queue_url`, an Azure queue).
pub fn setup_request(o: &QueueOwner) -> Option<(SetupRequest, AwsSettings)> {
    let QueueSpec::Sqs {
        url: None,
        name,
        sns,
    } = &o.queue.queue
    else {
        return None;
    };
    let bucket = o.url.host_str()?.to_string();
    let prefix = key_prefix(o.url);
    Some((
        SetupRequest {
            stream: o.tag.clone(),
            bucket,
            prefix,
            queue_name: name.clone(),
            sns: *sns,
            tags: o.queue.resource_tags.clone(),
        },
        aws_settings(o),
    ))
}

/// The decoded key prefix of a source URL: `s3://b/landing%20zone/%C3%A9/` is
/// `landing zone/é/` (S3 compares keys, not URL paths).
pub fn key_prefix(url: &url::Url) -> String {
    let path = url.path().trim_start_matches('/');
    match object_store::path::Path::from_url_path(path) {
        // Path drops the trailing `/`; the setup puts one back.
        Ok(p) => p.as_ref().to_string(),
        // Not valid percent-encoding: a URL crate parse never gives one.
        Err(_) => path.to_string(),
    }
}

/// AWS client settings of the owner: its store's options, with its queue endpoint over the
/// store's.
pub fn aws_settings(o: &QueueOwner) -> AwsSettings {
    AwsSettings::from_store_options(o.options.iter(), o.queue.endpoint.as_deref())
}

/// Where the owner's Azure Storage Queue `queue` is and how to reach it.
pub fn azure_settings(o: &QueueOwner, queue: &str) -> SeamResult<AzureQueueSettings> {
    AzureQueueSettings::from_store_options(o.options.iter(), queue, o.queue.endpoint.as_deref())
        .map_err(|e| SeamError::fatal(format!("{}: queue `{queue}`: {e}", o.what)))
}

fn failed(o: &QueueOwner, e: SetupError) -> SeamError {
    let msg = format!("{}: notification setup: {e}", o.what);
    match e {
        SetupError::Overlap { .. } | SetupError::NotOurs { .. } => SeamError::fatal(msg),
        SetupError::Aws { .. } => SeamError::retryable(msg),
    }
}

/// Create the owner's resources (idempotent) and record them. `None`: it does not own
/// resources (see [`setup_request`]).
pub async fn setup<N: Notes + ?Sized>(
    o: &QueueOwner<'_>,
    state: &N,
) -> SeamResult<Option<CreatedResources>> {
    let Some((req, aws)) = setup_request(o) else {
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
        .map_err(|e| failed(o, e))?;
    record(state, Some(&created))?;
    tracing::info!(owner = %o.what, queue = created.queue_url.as_deref().unwrap_or(""), topic = created.topic_arn.as_deref().unwrap_or(""), bucket = %created.bucket, prefix = %created.prefix, "notification resources set up");
    Ok(Some(created))
}

/// The queue of an owner of its resources: the recorded one, or set up now (the first start
/// without `queue_url`); with the guard that checks its bucket entry at the first round and
/// every `entry_check_interval` (bucket_entry.rs in landfall-discovery).
pub async fn ensure_queue<N: Notes + ?Sized>(
    o: &QueueOwner<'_>,
    state: &N,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    owed: OwedListing,
) -> SeamResult<(String, Option<EntryGuard>)> {
    let created = match created(state)? {
        Some(c) if c.queue_url.is_some() => c,
        _ => setup(o, state).await?.ok_or_else(|| {
            SeamError::fatal(format!("{}: no queue to read: give queue_url", o.what))
        })?,
    };
    let url = created
        .queue_url
        .clone()
        .ok_or_else(|| SeamError::fatal(format!("{}: no queue to read: give queue_url", o.what)))?;
    let Some((req, aws)) = setup_request(o) else {
        return Ok((url, None));
    };
    let Some(entry) = Entry::of(&created, &req.prefix) else {
        return Ok((url, None));
    };
    let hooks = EntryHooks {
        owed,
        checked: std::sync::Arc::new(move |owner, bucket, e, result| {
            crate::metrics::notification_entry_checked(&metrics, owner, bucket, e, result)
        }),
    };
    let guard = EntryGuard::new(
        &o.tag,
        AwsNotifications::new(&aws).await,
        &created.bucket,
        entry,
        o.queue.entry_check_interval,
        hooks,
    );
    Ok((url, Some(guard)))
}

/// Remove what setup created for the owner and forget it. Returns what was done.
pub async fn teardown<N: Notes + ?Sized>(o: &QueueOwner<'_>, state: &N) -> SeamResult<Vec<String>> {
    let Some(created) = created(state)? else {
        return Ok(Vec::new());
    };
    let aws = aws_settings(o);
    let done = AwsNotifications::new(&aws)
        .await
        .teardown(&created)
        .await
        .map_err(|e| failed(o, e))?;
    record(state, None)?;
    Ok(done)
}

/// The recorded resources and whether each still exists.
pub async fn status(
    o: &QueueOwner<'_>,
    state: &(impl Notes + ?Sized),
) -> SeamResult<Option<(CreatedResources, ResourceStatus)>> {
    let Some(created) = created(state)? else {
        return Ok(None);
    };
    let aws = aws_settings(o);
    let s = AwsNotifications::new(&aws)
        .await
        .status(&created)
        .await
        .map_err(|e| failed(o, e))?;
    Ok(Some((created, s)))
}

/// Azure: create the owner's Storage Queue if it does not exist (the Event Grid subscription
/// that feeds it is the user's, see deploy/azure/event-grid.md). Returns whether it was
/// created; `None` when the owner does not read an Azure queue.
pub async fn create_azure_queue(o: &QueueOwner<'_>) -> SeamResult<Option<bool>> {
    let QueueSpec::AzureQueue { name } = &o.queue.queue else {
        return Ok(None);
    };
    let queue = AzureQueue::new(azure_settings(o, name)?, std::sync::Arc::new(|_, _| {}));
    queue
        .create_if_missing()
        .await
        .map(Some)
        .map_err(|e| SeamError::fatal(format!("{}: {e}", o.what)))
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
