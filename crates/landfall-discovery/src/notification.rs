//! Storage event notifications parsed into file candidates: a pure module, no queue clients.
//!
//! [`parse_notification`] (and its shorthand [`parse_message`]) take one queue message body and
//! return the [`StorageEvent`]s it carries, or say why it carries none. Accepted shapes:
//!
//! - **S3 event notifications** `{"Records":[{"eventName":"ObjectCreated:Put","eventTime":…,
//!   "s3":{"bucket":{"name":…},"object":{"key":…,"size":…,"eTag":…,"versionId":…,
//!   "sequencer":…}}}]}`, with any number of records. `ObjectCreated:*` (Put, Post, Copy,
//!   CompleteMultipartUpload) is [`EventKind::Created`], `ObjectRemoved:*` (Delete,
//!   DeleteMarkerCreated) is [`EventKind::Removed`], any other name is [`EventKind::Other`].
//! - **The S3 test event** `{"Event":"s3:TestEvent","Bucket":…}`, sent once when a bucket
//!   notification is configured: [`Ignored::S3TestEvent`].
//! - **SNS envelopes**: without raw delivery `{"Type":"Notification","Message":"<S3 JSON as a
//!   string>",…}`, whose `Message` is parsed as above; with raw delivery the S3 JSON arrives
//!   as is. `SubscriptionConfirmation` / `UnsubscribeConfirmation` are [`Ignored`].
//! - **Azure Event Grid schema** (one event or an array of them) and **CloudEvents 1.0**
//!   (`specversion`, `type`, `source`, `subject`, `data` or `data_base64`), raw or as base64
//!   text (Azure Storage Queue messages usually are). Blob Storage, ADLS Gen2 and SFTP events:
//!   - `Microsoft.Storage.BlobCreated` with `data.api` PutBlob, PutBlockList, CopyBlob,
//!     FlushWithClose or SftpCommit is `Created`; other APIs, such as the ADLS `CreateFile`
//!     and the SFTP `SftpCreate` of the empty blob a write starts with, are
//!     `Other("BlobCreated:<api>")`. An SftpCommit that reports 0 bytes is given no size, so
//!     a HEAD reads it (Azure's documented SftpCommit sample reports 0 for a committed
//!     upload).
//!   - `Microsoft.Storage.BlobDeleted` (DeleteBlob, DeleteFile, SftpRemove) is `Removed`.
//!   - `Microsoft.Storage.BlobRenamed` (RenameFile, SftpRename; how Spark, Hadoop and Data
//!     Factory publish a file on ADLS) is two events: `Created` at `data.destinationUrl`,
//!     then `Removed` at `data.sourceUrl`. The removal carries no sequencer (a sequencer
//!     orders the events of one blob name, and the event's is the destination's), so the
//!     consumers ask the store about the source. The keys differ, so the removal never
//!     cancels the creation. Neither has a size or etag: a HEAD reads them.
//!   - `Microsoft.Storage.DirectoryRenamed` (RenameDirectory, SftpRename) is
//!     [`EventKind::NeedsListing`] at the destination directory (files appeared under it that
//!     no event names) and [`EventKind::DirectoryRemoved`] at the source.
//!     `Microsoft.Storage.DirectoryDeleted` is `DirectoryRemoved`.
//!     `Microsoft.Storage.DirectoryCreated` (CreateDirectory, SftpMakeDir: an empty
//!     directory) and any other type are `Other`.
//!
//!   Size comes from `data.contentLength` and may be absent.
//! - **GCS Pub/Sub notifications**, as pushed `{"message":{"attributes":{…},"data":…},
//!   "subscription":…}` or bare `{"attributes":{"eventType","bucketId","objectId",…},
//!   "data":"<base64 object resource>"}`. `OBJECT_FINALIZE` is `Created`, `OBJECT_DELETE` is
//!   `Removed`, the rest (`OBJECT_ARCHIVE`, `OBJECT_METADATA_UPDATE`) `Other`. Size and etag
//!   come from the object resource in `data` (absent with payload format `NONE`).
//!
//! A body that is not JSON but consists only of base64 characters is decoded once and the
//! result parsed as above; an SNS `Message` is unwrapped once.
//!
//! Key decoding:
//! - S3 keys are form-encoded: every `+` is a space, then `%XX` escapes are decoded (a literal
//!   `+` arrives as `%2B`; moto also encodes `/` as `%2F`).
//! - Azure keys come from the blob URL path: `https://<account>.blob.core.windows.net/<container>/<blob>`
//!   (also `.dfs.`), or path-style `http://127.0.0.1:10000/<account>/<container>/<blob>` when
//!   the host is an IP address or has no dot (Azurite). The blob part is percent-decoded; `+`
//!   is literal. Renames name `data.sourceUrl` and `data.destinationUrl` instead of `data.url`.
//! - GCS object names are taken verbatim from `objectId` (or the resource's `name`).
//!
//! Decoding is strict: a `%` not followed by two hex digits, or escapes that do not form UTF-8,
//! give [`MessageError::BadKeyEncoding`]. Required fields (bucket, key, event type) that are
//! absent or of the wrong type give [`MessageError::MissingField`]; optional metadata (size,
//! etag, version, sequencer, time) that is absent or unreadable is `None` and never fails a
//! message, since a HEAD or the listing supplies it. Etags are kept as sent (S3 and GCS without
//! quotes, Azure `0x…`). Errors carry short context for a log line, never the whole body.

use crate::message_fields::{
    base64_decode, looks_like_base64, lookup, opt_str, opt_time, opt_u64, percent_decode_strict,
};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// What happened to the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A new object or a new version of one, complete and readable.
    Created,
    /// The object was deleted (or hidden by a delete marker), or renamed away.
    Removed,
    /// Files appeared under the directory `key` that no event names (an ADLS Gen2 or SFTP
    /// directory renamed into place): the consumer lists the directory.
    NeedsListing,
    /// The directory `key` and everything under it are gone (deleted, or renamed away).
    DirectoryRemoved,
    /// Any other event, with its name as sent (`ObjectRestore:Completed`, `OBJECT_ARCHIVE`,
    /// `BlobCreated:CreateFile`, `Microsoft.Storage.BlobTierChanged`, …).
    Other(String),
}

/// The bucket or container an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRef {
    S3 { bucket: String },
    Azure { account: String, container: String },
    Gcs { bucket: String },
}

/// One object event from a notification message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageEvent {
    pub kind: EventKind,
    pub store: StoreRef,
    /// The decoded object key (blob name), relative to the bucket or container.
    pub key: String,
    pub size: Option<u64>,
    pub etag: Option<String>,
    /// S3 `versionId`, GCS generation.
    pub version: Option<String>,
    /// S3 or Azure `sequencer`: orders events on one key by string comparison.
    pub sequencer: Option<String>,
    pub event_time: Option<DateTime<Utc>>,
}

/// A message that is well formed but carries no object events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    /// `s3:TestEvent`, sent when a bucket notification configuration is created.
    S3TestEvent { bucket: Option<String> },
    /// SNS `SubscriptionConfirmation` delivered to the queue.
    SnsSubscriptionConfirmation,
    /// SNS `UnsubscribeConfirmation` delivered to the queue.
    SnsUnsubscribeConfirmation,
    /// Event Grid `Microsoft.EventGrid.SubscriptionValidationEvent`.
    EventGridValidation,
}

/// A parsed message: object events (possibly several), or a known message to ignore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    Events(Vec<StorageEvent>),
    Ignored(Ignored),
}

impl Notification {
    /// The events, none for an ignored message.
    pub fn into_events(self) -> Vec<StorageEvent> {
        match self {
            Notification::Events(events) => events,
            Notification::Ignored(_) => Vec::new(),
        }
    }
}

/// Why a message could not be parsed. Each variant carries enough to log, never the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The body (or a nested payload: an SNS `Message`, base64-decoded data) is not JSON.
    #[error("{context} is not JSON: {detail}")]
    NotJson {
        context: &'static str,
        detail: String,
    },
    /// JSON, but of no accepted shape.
    #[error("unknown message schema: {shape}")]
    UnknownSchema { shape: String },
    /// A required field is absent or of the wrong type.
    #[error("{schema} message lacks `{field}`")]
    MissingField {
        schema: &'static str,
        field: &'static str,
    },
    /// A payload that should be base64 is not.
    #[error("{context} is not valid base64: {detail}")]
    BadBase64 {
        context: &'static str,
        detail: String,
    },
    /// An object key or blob URL that does not decode (shown clipped to 200 characters).
    #[error("cannot decode object key {key:?}: {reason}")]
    BadKeyEncoding { key: String, reason: &'static str },
}

/// Parse one queue message body into its object events (none for a test event or an SNS
/// confirmation; use [`parse_notification`] to tell those apart).
pub fn parse_message(body: &str) -> Result<Vec<StorageEvent>, MessageError> {
    parse_notification(body).map(Notification::into_events)
}

/// Parse one queue message body: object events, or which known non-event message it is.
pub fn parse_notification(body: &str) -> Result<Notification, MessageError> {
    let value = match serde_json::from_str::<Value>(body) {
        Ok(value) => value,
        Err(_) if looks_like_base64(body) => {
            let bytes = decode_base64(body, "message body")?;
            json_from_bytes(&bytes, "base64-decoded message body")?
        }
        Err(err) => {
            return Err(MessageError::NotJson {
                context: "message body",
                detail: err.to_string(),
            });
        }
    };
    dispatch(&value, true)
}

fn dispatch(value: &Value, outer: bool) -> Result<Notification, MessageError> {
    let obj = match value {
        Value::Array(items) if !items.is_empty() => {
            let mut events = Vec::with_capacity(items.len());
            for item in items {
                match item.as_object() {
                    Some(o) if o.contains_key("specversion") => events.extend(cloud_event(o)?),
                    Some(o) if o.contains_key("eventType") => match event_grid(o)? {
                        Some(some) => events.extend(some),
                        None => return Ok(Notification::Ignored(Ignored::EventGridValidation)),
                    },
                    _ => return Err(unknown(&format!("array element: {}", shape(item)))),
                }
            }
            return Ok(Notification::Events(events));
        }
        Value::Object(obj) => obj,
        other => return Err(unknown(&shape(other))),
    };
    if obj.contains_key("Records") {
        return s3_records(obj).map(Notification::Events);
    }
    if obj.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        let bucket = obj
            .get("Bucket")
            .and_then(Value::as_str)
            .map(str::to_string);
        return Ok(Notification::Ignored(Ignored::S3TestEvent { bucket }));
    }
    if outer
        && let Some(kind) = obj.get("Type").and_then(Value::as_str)
        && (obj.contains_key("TopicArn") || obj.contains_key("Message"))
    {
        return sns(obj, kind);
    }
    if obj.contains_key("specversion") {
        return Ok(Notification::Events(cloud_event(obj)?));
    }
    if obj.contains_key("eventType") && obj.contains_key("data") {
        return Ok(match event_grid(obj)? {
            Some(events) => Notification::Events(events),
            None => Notification::Ignored(Ignored::EventGridValidation),
        });
    }
    if let Some(message) = obj.get("message").and_then(Value::as_object)
        && message.contains_key("attributes")
    {
        return Ok(Notification::Events(vec![pubsub(message)?]));
    }
    if obj
        .get("attributes")
        .is_some_and(|a| a.get("eventType").is_some())
    {
        return Ok(Notification::Events(vec![pubsub(obj)?]));
    }
    Err(unknown(&shape(value)))
}

fn sns(obj: &Map<String, Value>, kind: &str) -> Result<Notification, MessageError> {
    match kind {
        "Notification" => {
            let message = str_at(obj, "SNS", "Message")?;
            let inner: Value =
                serde_json::from_str(message).map_err(|err| MessageError::NotJson {
                    context: "SNS Message",
                    detail: err.to_string(),
                })?;
            dispatch(&inner, false)
        }
        "SubscriptionConfirmation" => {
            Ok(Notification::Ignored(Ignored::SnsSubscriptionConfirmation))
        }
        "UnsubscribeConfirmation" => Ok(Notification::Ignored(Ignored::SnsUnsubscribeConfirmation)),
        other => Err(unknown(&format!("SNS Type {:?}", clip(other, 40)))),
    }
}

fn s3_records(obj: &Map<String, Value>) -> Result<Vec<StorageEvent>, MessageError> {
    const S: &str = "S3";
    let records = obj
        .get("Records")
        .and_then(Value::as_array)
        .ok_or(missing(S, "Records"))?;
    let mut events = Vec::with_capacity(records.len());
    for record in records {
        let record = record.as_object().ok_or(missing(S, "Records[]"))?;
        let name = str_at(record, S, "eventName")?;
        let bare = name.strip_prefix("s3:").unwrap_or(name);
        let kind = if bare.starts_with("ObjectCreated:") {
            EventKind::Created
        } else if bare.starts_with("ObjectRemoved:") {
            EventKind::Removed
        } else {
            EventKind::Other(name.to_string())
        };
        let bucket = str_at(record, S, "s3.bucket.name")?.to_string();
        let key = form_decode(str_at(record, S, "s3.object.key")?)?;
        events.push(StorageEvent {
            kind,
            store: StoreRef::S3 { bucket },
            key,
            size: opt_u64(record, "s3.object.size"),
            etag: opt_str(record, "s3.object.eTag").or_else(|| opt_str(record, "s3.object.etag")),
            version: opt_str(record, "s3.object.versionId"),
            sequencer: opt_str(record, "s3.object.sequencer"),
            event_time: opt_time(record, "eventTime"),
        });
    }
    Ok(events)
}

/// The events of an Event Grid schema event; `None` for a subscription validation event.
fn event_grid(obj: &Map<String, Value>) -> Result<Option<Vec<StorageEvent>>, MessageError> {
    const S: &str = "Event Grid";
    let kind = str_at(obj, S, "eventType")?;
    if kind == "Microsoft.EventGrid.SubscriptionValidationEvent" {
        return Ok(None);
    }
    let data = obj
        .get("data")
        .and_then(Value::as_object)
        .ok_or(missing(S, "data"))?;
    azure_events(S, kind, data, opt_time(obj, "eventTime")).map(Some)
}

fn cloud_event(obj: &Map<String, Value>) -> Result<Vec<StorageEvent>, MessageError> {
    const S: &str = "CloudEvents";
    let kind = str_at(obj, S, "type")?;
    let decoded;
    let data = match obj.get("data") {
        Some(Value::Object(data)) => data,
        Some(_) => return Err(missing(S, "data")),
        None => {
            let b64 = str_at(obj, S, "data_base64")?;
            let bytes = decode_base64(b64, "CloudEvents data_base64")?;
            decoded = json_from_bytes(&bytes, "CloudEvents data_base64")?;
            decoded.as_object().ok_or(missing(S, "data"))?
        }
    };
    azure_events(S, kind, data, opt_time(obj, "time"))
}

/// The events one Azure storage event amounts to: one, or two for a rename (destination
/// first, then source).
fn azure_events(
    schema: &'static str,
    kind: &str,
    data: &Map<String, Value>,
    event_time: Option<DateTime<Utc>>,
) -> Result<Vec<StorageEvent>, MessageError> {
    let at = |kind: EventKind, field: &'static str| -> Result<StorageEvent, MessageError> {
        let url = str_at(data, schema, field)?;
        let (account, container, key) = azure_url(url)?;
        Ok(StorageEvent {
            kind,
            store: StoreRef::Azure { account, container },
            key,
            size: opt_u64(data, "contentLength"),
            etag: opt_str(data, "eTag"),
            version: None,
            sequencer: opt_str(data, "sequencer"),
            event_time,
        })
    };
    // The source of a rename: gone. The sequencer orders the destination name's events.
    let source = |kind: EventKind| -> Result<StorageEvent, MessageError> {
        Ok(StorageEvent {
            sequencer: None,
            ..at(kind, "data.sourceUrl")?
        })
    };
    Ok(match kind {
        "Microsoft.Storage.BlobCreated" => {
            let api = str_at(data, schema, "data.api")?;
            let kind = match api {
                "PutBlob" | "PutBlockList" | "CopyBlob" | "FlushWithClose" | "SftpCommit" => {
                    EventKind::Created
                }
                api => EventKind::Other(format!("BlobCreated:{api}")),
            };
            let mut event = at(kind, "data.url")?;
            if api == "SftpCommit" && event.size == Some(0) {
                event.size = None;
            }
            vec![event]
        }
        "Microsoft.Storage.BlobDeleted" => vec![at(EventKind::Removed, "data.url")?],
        "Microsoft.Storage.BlobRenamed" => vec![
            at(EventKind::Created, "data.destinationUrl")?,
            source(EventKind::Removed)?,
        ],
        "Microsoft.Storage.DirectoryRenamed" => vec![
            at(EventKind::NeedsListing, "data.destinationUrl")?,
            source(EventKind::DirectoryRemoved)?,
        ],
        "Microsoft.Storage.DirectoryDeleted" => vec![at(EventKind::DirectoryRemoved, "data.url")?],
        other => {
            let field = if data.contains_key("url") || !data.contains_key("destinationUrl") {
                "data.url"
            } else {
                "data.destinationUrl"
            };
            vec![at(EventKind::Other(other.to_string()), field)?]
        }
    })
}

/// Account, container and decoded blob name from a blob (or dfs) URL.
fn azure_url(url: &str) -> Result<(String, String, String), MessageError> {
    let bad = |reason| MessageError::BadKeyEncoding {
        key: clip(url, 200).to_string(),
        reason,
    };
    let rest = url
        .split_once("://")
        .ok_or(bad("blob URL has no scheme"))?
        .1;
    let (authority, path) = rest.split_once('/').ok_or(bad("blob URL has no path"))?;
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    let path_style = !host.contains('.') || host.parse::<std::net::IpAddr>().is_ok();
    let (account, path) = if path_style {
        path.split_once('/')
            .ok_or(bad("blob URL has no account/container/blob path"))?
    } else {
        (host.split('.').next().unwrap_or_default(), path)
    };
    let (container, blob) = path
        .split_once('/')
        .ok_or(bad("blob URL has no container/blob"))?;
    if account.is_empty() || container.is_empty() || blob.is_empty() {
        return Err(bad("blob URL has an empty account, container or blob name"));
    }
    let container = percent_decode_strict(container).map_err(bad)?;
    let blob = percent_decode_strict(blob).map_err(bad)?;
    Ok((account.to_string(), container, blob))
}

/// A Pub/Sub message (`attributes` and base64 `data`) from a GCS bucket notification.
fn pubsub(message: &Map<String, Value>) -> Result<StorageEvent, MessageError> {
    const S: &str = "GCS Pub/Sub";
    let attrs = message.get("attributes").and_then(Value::as_object);
    let attrs = attrs.ok_or(missing(S, "attributes"))?;
    let resource = match message.get("data") {
        Some(Value::String(b64)) if !b64.is_empty() => {
            let bytes = decode_base64(b64, "Pub/Sub data")?;
            match json_from_bytes(&bytes, "Pub/Sub data")? {
                Value::Object(resource) => resource,
                other => return Err(unknown(&format!("Pub/Sub data: {}", shape(&other)))),
            }
        }
        _ => Map::new(),
    };
    let kind = match str_at(attrs, S, "attributes.eventType")? {
        "OBJECT_FINALIZE" => EventKind::Created,
        "OBJECT_DELETE" => EventKind::Removed,
        other => EventKind::Other(other.to_string()),
    };
    let bucket = opt_str(attrs, "bucketId").or_else(|| opt_str(&resource, "bucket"));
    let key = opt_str(attrs, "objectId").or_else(|| opt_str(&resource, "name"));
    let version = opt_str(attrs, "objectGeneration").or_else(|| opt_str(&resource, "generation"));
    Ok(StorageEvent {
        kind,
        store: StoreRef::Gcs {
            bucket: bucket.ok_or(missing(S, "attributes.bucketId"))?,
        },
        key: key.ok_or(missing(S, "attributes.objectId"))?,
        size: opt_u64(&resource, "size"),
        etag: opt_str(&resource, "etag"),
        version,
        sequencer: None,
        event_time: opt_time(attrs, "eventTime").or_else(|| opt_time(&resource, "updated")),
    })
}

// ---- field access --------------------------------------------------------------------------

/// A required string at a dotted path. A leading `data.` or `attributes.` names `obj` itself,
/// so that a missing field is reported by its full path.
fn str_at<'a>(
    obj: &'a Map<String, Value>,
    schema: &'static str,
    field: &'static str,
) -> Result<&'a str, MessageError> {
    let path = field
        .strip_prefix("data.")
        .or_else(|| field.strip_prefix("attributes."));
    lookup(obj, path.unwrap_or(field))
        .and_then(Value::as_str)
        .ok_or(missing(schema, field))
}

fn missing(schema: &'static str, field: &'static str) -> MessageError {
    MessageError::MissingField { schema, field }
}

fn unknown(shape: &str) -> MessageError {
    MessageError::UnknownSchema {
        shape: clip(shape, 300).to_string(),
    }
}

/// A short description of a JSON value for logs: its type, and an object's first keys.
fn shape(value: &Value) -> String {
    match value {
        Value::Object(obj) => {
            let keys: Vec<&str> = obj.keys().take(8).map(|k| clip(k, 32)).collect();
            let more = if obj.len() > 8 { ", …" } else { "" };
            format!("object with keys [{}{more}]", keys.join(", "))
        }
        Value::Array(items) => format!("array of {}", items.len()),
        Value::String(s) => format!("string of {} bytes", s.len()),
        Value::Number(_) => "number".to_string(),
        Value::Bool(_) => "boolean".to_string(),
        Value::Null => "null".to_string(),
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn clip(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn json_from_bytes(bytes: &[u8], context: &'static str) -> Result<Value, MessageError> {
    serde_json::from_slice(bytes).map_err(|err| MessageError::NotJson {
        context,
        detail: err.to_string(),
    })
}

// ---- decoding ------------------------------------------------------------------------------

/// An S3 event key: `+` is a space, then strict percent-decoding.
fn form_decode(raw: &str) -> Result<String, MessageError> {
    percent_decode_strict(&raw.replace('+', " ")).map_err(|reason| MessageError::BadKeyEncoding {
        key: clip(raw, 200).to_string(),
        reason,
    })
}

fn decode_base64(text: &str, context: &'static str) -> Result<Vec<u8>, MessageError> {
    base64_decode(text).map_err(|detail| MessageError::BadBase64 { context, detail })
}

#[cfg(test)]
#[path = "notification_tests.rs"]
mod tests;
