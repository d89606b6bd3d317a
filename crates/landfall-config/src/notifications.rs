//! Discovery settings: directory listing (the default) or queue notifications, and the
//! notification queue's options (`[streams.<name>.notifications]`).
//!
//! Notification mode consumes storage events from a queue instead of listing on every poll:
//! SQS for S3 sources (events sent straight to the queue, or through an SNS topic), an Azure
//! Storage Queue fed by Event Grid for Azure sources. A listing still runs when the stream
//! enters notification mode (first start, or a switch from listing: it covers what happened
//! before the queue existed) and every `backfill_interval`; both only admit files the state
//! does not know, so nothing is ingested twice.

use crate::store::{Location, StoreKind};
// `validate_queue` is shared with `[locations.<name>]` (crate::locations).
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a stream finds new files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryMode {
    /// List the source prefix on every poll.
    #[default]
    Listing,
    /// Consume storage events from a queue (`[streams.<name>.notifications]`).
    Notifications,
    /// Read the event cache of the `[locations.<name>]` (with `file_events = true`) that
    /// holds the source: managed file events.
    FileEvents,
    /// File events where a file-events location holds the source, listing otherwise.
    Auto,
}

impl DiscoveryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DiscoveryMode::Listing => "listing",
            DiscoveryMode::Notifications => "notifications",
            DiscoveryMode::FileEvents => "file_events",
            DiscoveryMode::Auto => "auto",
        }
    }
}

/// `[streams.<name>.notifications]`: the queue a notification-mode stream consumes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// S3 sources: URL of an existing SQS queue. Without it, `landfall notifications setup`
    /// (or the first start) creates one named after the stream.
    pub queue_url: Option<String>,
    /// Azure sources: name of the Storage Queue Event Grid delivers to (in the source's
    /// storage account). S3 sources: name of the SQS queue to create (default
    /// `landfall-<stream>`).
    pub queue_name: Option<String>,
    /// S3: deliver through an SNS topic subscribed by the queue (S3 -> SNS -> SQS), as needed
    /// when several consumers share the bucket's events.
    #[serde(default)]
    pub sns: bool,
    /// Concurrent receive loops (SQS ReceiveMessage calls in flight), default 1.
    #[serde(default = "one")]
    pub receivers: usize,
    /// How long a received message stays invisible to other consumers; a heartbeat extends it
    /// while its files are being recorded (default `2m`).
    #[serde(default = "default_visibility")]
    pub visibility_timeout: String,
    /// Long-poll wait of one receive (default `20s`, the SQS maximum).
    #[serde(default = "default_wait")]
    pub wait_time: String,
    /// How long one queue request may go unanswered (beyond a receive's long-poll wait)
    /// before it is abandoned and tried again: a connection that takes a request and never
    /// answers must not hold a round or the visibility heartbeat (default `20s` or a third of
    /// `visibility_timeout`, whichever is shorter; at least 1s, at most a third of
    /// `visibility_timeout`).
    pub request_timeout: Option<String>,
    /// Queue service endpoint (emulators, VPC endpoints). Default: the source store's endpoint
    /// when it has one, else the cloud's.
    pub endpoint: Option<String>,
    /// S3 with automatic setup: how often the bucket notification entry landfall created is
    /// checked (it is also checked at every start); an entry another writer removed is
    /// written again and the source listed once (default `5m`, between 1s and 24h).
    #[serde(default = "default_entry_check")]
    pub entry_check_interval: String,
    /// Tags applied to every resource landfall creates.
    #[serde(default)]
    pub resource_tags: BTreeMap<String, String>,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            queue_url: None,
            queue_name: None,
            sns: false,
            receivers: 1,
            visibility_timeout: default_visibility(),
            wait_time: default_wait(),
            request_timeout: None,
            endpoint: None,
            entry_check_interval: default_entry_check(),
            resource_tags: BTreeMap::new(),
        }
    }
}

pub(crate) fn default_entry_check() -> String {
    "5m".into()
}

fn one() -> usize {
    1
}
fn default_visibility() -> String {
    "2m".into()
}
fn default_wait() -> String {
    "20s".into()
}
/// The request timeout when none is set: 20 s, or a third of the visibility timeout.
fn default_request_timeout(visibility: Duration) -> Duration {
    Duration::from_secs(20).min(visibility / 3)
}

/// Which queue service a notification stream reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueSpec {
    /// SQS; `url` is `None` until setup created the queue (its URL is then kept in the
    /// stream's state).
    Sqs {
        url: Option<String>,
        name: String,
        sns: bool,
    },
    /// Azure Storage Queue in the source's account.
    AzureQueue { name: String },
}

/// Validated notification settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationsSpec {
    pub queue: QueueSpec,
    pub receivers: usize,
    pub visibility_timeout: Duration,
    pub wait_time: Duration,
    /// How long one request may go unanswered beyond its long-poll wait.
    pub request_timeout: Duration,
    pub endpoint: Option<String>,
    /// How often an owned bucket notification entry is checked.
    pub entry_check_interval: Duration,
    pub resource_tags: BTreeMap<String, String>,
}

/// Check the discovery settings of stream `stream`: the queue of a notification stream, or
/// `None` for the other modes. Errors are `(key below the stream, reason)`. `file_events` and
/// `auto` are resolved against the locations by the caller.
pub(crate) fn validate_discovery(
    stream: &str,
    mode: DiscoveryMode,
    n: Option<&NotificationsConfig>,
    source: &Location,
) -> Result<Option<NotificationsSpec>, Vec<(String, String)>> {
    let n = match (mode, n) {
        (DiscoveryMode::Notifications, None) => &NotificationsConfig::default(),
        (DiscoveryMode::Notifications, Some(n)) => n,
        (_, Some(_)) => {
            return Err(vec![(
                "notifications".into(),
                format!(
                    "is set but discovery is `{}`; set discovery = \"notifications\" to use the queue",
                    mode.as_str()
                ),
            )]);
        }
        (_, None) => return Ok(None),
    };
    if let Some(reason) = no_events(source.kind) {
        return Err(vec![(
            "discovery".into(),
            format!("{reason}; use discovery = \"listing\""),
        )]);
    }
    validate_queue(&format!("landfall-{stream}"), n, source)
        .map(Some)
        .map_err(|errors| {
            errors
                .into_iter()
                .map(|(k, r)| (format!("notifications.{k}"), r))
                .collect()
        })
}

/// Why a store of this kind cannot deliver events, if it cannot.
pub(crate) fn no_events(kind: StoreKind) -> Option<&'static str> {
    match kind {
        StoreKind::S3 | StoreKind::Azure => None,
        StoreKind::Gcs => Some(
            "events are not available for GCS sources yet (Pub/Sub messages are parsed, but no Pub/Sub consumer exists)",
        ),
        StoreKind::Local => Some("a local directory sends no events"),
    }
}

/// Check the queue settings of a notification stream or a file-events location on `source`
/// (S3 or Azure). `default_name`: the SQS queue setup creates when none is named. Errors are
/// `(key, reason)`, keys as in [`NotificationsConfig`].
pub(crate) fn validate_queue(
    default_name: &str,
    n: &NotificationsConfig,
    source: &Location,
) -> Result<NotificationsSpec, Vec<(&'static str, String)>> {
    let mut errors = Vec::new();
    let queue = match source.kind {
        StoreKind::Azure => {
            if n.queue_url.is_some() {
                errors.push((
                    "queue_url",
                    "is for SQS; an Azure source names its Storage Queue with queue_name".into(),
                ));
            }
            if n.sns {
                errors.push(("sns", "is for S3 sources".into()));
            }
            match &n.queue_name {
                Some(name) if valid_azure_queue_name(name) => {
                    QueueSpec::AzureQueue { name: name.clone() }
                }
                Some(name) => {
                    errors.push((
                        "queue_name",
                        format!("`{name}` is not a valid Azure queue name (3-63 lowercase letters, digits and single hyphens, starting with a letter or digit)"),
                    ));
                    QueueSpec::AzureQueue { name: name.clone() }
                }
                None => {
                    errors.push((
                        "queue_name",
                        "is required for an Azure source: the Storage Queue Event Grid delivers to"
                            .into(),
                    ));
                    QueueSpec::AzureQueue {
                        name: String::new(),
                    }
                }
            }
        }
        _ => {
            if let Some(u) = &n.queue_url
                && url::Url::parse(u).is_err()
            {
                errors.push(("queue_url", format!("`{u}` is not a URL")));
            }
            let name = n
                .queue_name
                .clone()
                .unwrap_or_else(|| default_name.to_string());
            if !valid_sqs_name(&name) {
                errors.push((
                    "queue_name",
                    format!(
                        "`{name}` is not a valid SQS queue name (1-80 letters, digits, `-` or `_`)"
                    ),
                ));
            }
            QueueSpec::Sqs {
                url: n.queue_url.clone(),
                name,
                sns: n.sns,
            }
        }
    };
    if n.receivers == 0 || n.receivers > 64 {
        errors.push(("receivers", "must be between 1 and 64".into()));
    }
    let visibility = match humantime::parse_duration(&n.visibility_timeout) {
        Ok(d) if d >= Duration::from_secs(10) && d <= Duration::from_secs(12 * 3600) => Some(d),
        Ok(_) => {
            errors.push((
                "visibility_timeout",
                "must be between 10s and 12h (the SQS limit)".into(),
            ));
            None
        }
        Err(e) => {
            errors.push(("visibility_timeout", e.to_string()));
            None
        }
    };
    let wait = match humantime::parse_duration(&n.wait_time) {
        Ok(d) if d <= Duration::from_secs(20) => Some(d),
        Ok(_) => {
            errors.push((
                "wait_time",
                "must be at most 20s (the SQS long-poll limit)".into(),
            ));
            None
        }
        Err(e) => {
            errors.push(("wait_time", e.to_string()));
            None
        }
    };
    if let (Some(v), Some(w)) = (visibility, wait)
        && v < 2 * w + Duration::from_secs(5)
    {
        errors.push((
            "visibility_timeout",
            format!("must exceed twice wait_time plus 5s ({}s): messages received early in a round must not reappear before it records them", (2 * w + Duration::from_secs(5)).as_secs()),
        ));
    }
    let request_timeout = match (&n.request_timeout, visibility) {
        (None, v) => v.map(default_request_timeout),
        (Some(t), v) => match humantime::parse_duration(t) {
            Ok(d) if d < Duration::from_secs(1) => {
                errors.push(("request_timeout", format!("`{t}` must be at least 1s")));
                None
            }
            Ok(d) if v.is_some_and(|v| d > v / 3) => {
                errors.push((
                    "request_timeout",
                    format!(
                        "`{t}` must be at most a third of visibility_timeout ({} s): the heartbeat must extend held messages before they expire",
                        v.map_or(0.0, |v| (v / 3).as_secs_f64())
                    ),
                ));
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                errors.push(("request_timeout", format!("`{t}`: {e}")));
                None
            }
        },
    };
    if let Some(e) = &n.endpoint
        && url::Url::parse(e).is_err()
    {
        errors.push(("endpoint", format!("`{e}` is not a URL")));
    }
    if n.resource_tags.len() > 50 {
        errors.push(("resource_tags", "at most 50 tags".into()));
    }
    let entry_check = match humantime::parse_duration(&n.entry_check_interval) {
        Ok(d) if d >= Duration::from_secs(1) && d <= Duration::from_secs(24 * 3600) => Some(d),
        Ok(_) => {
            errors.push((
                "entry_check_interval",
                format!("`{}` must be between 1s and 24h", n.entry_check_interval),
            ));
            None
        }
        Err(e) => {
            errors.push((
                "entry_check_interval",
                format!("`{}`: {e}", n.entry_check_interval),
            ));
            None
        }
    };
    match (
        errors.is_empty(),
        visibility,
        wait,
        request_timeout,
        entry_check,
    ) {
        (
            true,
            Some(visibility_timeout),
            Some(wait_time),
            Some(request_timeout),
            Some(entry_check_interval),
        ) => Ok(NotificationsSpec {
            queue,
            receivers: n.receivers,
            visibility_timeout,
            wait_time,
            request_timeout,
            endpoint: n.endpoint.clone(),
            entry_check_interval,
            resource_tags: n.resource_tags.clone(),
        }),
        _ => Err(errors),
    }
}

fn valid_sqs_name(name: &str) -> bool {
    (1..=80).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn valid_azure_queue_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(u: &str) -> Location {
        Location::parse(u).unwrap()
    }

    #[test]
    fn listing_is_the_default_and_rejects_a_stray_queue_section() {
        assert_eq!(
            validate_discovery("s", DiscoveryMode::Listing, None, &loc("s3://b/p")),
            Ok(None)
        );
        let n: NotificationsConfig = serde_json::from_str("{}").unwrap();
        assert!(
            validate_discovery("s", DiscoveryMode::Listing, Some(&n), &loc("s3://b/p")).is_err()
        );
    }

    #[test]
    fn s3_gets_a_default_queue_name_and_azure_needs_one() {
        let Ok(Some(n)) =
            validate_discovery("ev", DiscoveryMode::Notifications, None, &loc("s3://b/p"))
        else {
            panic!()
        };
        assert_eq!(
            n.queue,
            QueueSpec::Sqs {
                url: None,
                name: "landfall-ev".into(),
                sns: false
            }
        );
        assert_eq!(n.wait_time, Duration::from_secs(20));
        let e = validate_discovery("ev", DiscoveryMode::Notifications, None, &loc("az://c/p"))
            .unwrap_err();
        assert_eq!(e[0].0, "notifications.queue_name");
        let e = validate_discovery("ev", DiscoveryMode::Notifications, None, &loc("/tmp/x"))
            .unwrap_err();
        assert_eq!(e[0].0, "discovery");
    }

    #[test]
    fn bad_values_are_named() {
        let n: NotificationsConfig = serde_json::from_str(
            r#"{"receivers":0,"visibility_timeout":"1s","wait_time":"30s","queue_name":"Bad Name"}"#,
        )
        .unwrap();
        let e = validate_discovery(
            "ev",
            DiscoveryMode::Notifications,
            Some(&n),
            &loc("az://c/p"),
        )
        .unwrap_err();
        let keys: Vec<_> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "notifications.queue_name",
                "notifications.receivers",
                "notifications.visibility_timeout",
                "notifications.wait_time"
            ]
        );
    }

    #[test]
    fn the_request_timeout_defaults_to_a_third_of_the_visibility_and_never_exceeds_it() {
        let spec = |json: &str| {
            let n: NotificationsConfig = serde_json::from_str(json).unwrap();
            validate_discovery(
                "ev",
                DiscoveryMode::Notifications,
                Some(&n),
                &loc("s3://b/p"),
            )
        };
        let t = |json: &str| spec(json).unwrap().unwrap().request_timeout;
        assert_eq!(t("{}"), Duration::from_secs(20), "2m visibility: 20 s");
        assert_eq!(
            t(r#"{"visibility_timeout":"30s","wait_time":"1s"}"#),
            Duration::from_secs(10)
        );
        assert_eq!(
            t(r#"{"visibility_timeout":"10s","wait_time":"1s","request_timeout":"2s"}"#),
            Duration::from_secs(2)
        );
        for (json, says) in [
            (
                r#"{"visibility_timeout":"10s","wait_time":"1s","request_timeout":"4s"}"#,
                "at most a third of visibility_timeout",
            ),
            (r#"{"request_timeout":"500ms"}"#, "at least 1s"),
            (r#"{"request_timeout":"soon"}"#, "`soon`"),
        ] {
            let e = spec(json).unwrap_err();
            assert_eq!(e.len(), 1, "{e:?}");
            assert_eq!(e[0].0, "notifications.request_timeout");
            assert!(e[0].1.contains(says), "{json}: {}", e[0].1);
        }
    }
}
