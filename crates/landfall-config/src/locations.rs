//! `[locations.<name>]`: storage locations whose object events one queue delivers for every
//! stream under them (managed file events).
//!
//! A location with `file_events = true` owns one queue (given with `queue_url` / `queue_name`,
//! or created with one bucket notification for the whole location, as notification streams
//! do). One consumer per location writes the events into a RocksDB event cache; every stream
//! whose source lies under the location and whose `discovery` is `file_events` (or `auto`)
//! reads that cache from its own position. The streams need no queue and no cloud permission
//! beyond reading their files. docs/file-events.md has the details.

use crate::notifications::{NotificationsConfig, NotificationsSpec, no_events, validate_queue};
use crate::store::{Location, StoreOptions};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// One `[locations.<name>]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocationConfig {
    /// The bucket or container (and optionally a prefix): `s3://raw-events/`,
    /// `az://landing/`, `abfss://landing@account.dfs.core.windows.net/`.
    pub url: String,
    /// Name of a `[stores.<name>]` entry used to list the location and reach its queue.
    pub store: Option<String>,
    /// Consume the location's events into a cache streams read (`discovery = "file_events"`).
    #[serde(default)]
    pub file_events: bool,
    /// S3: URL of an existing SQS queue receiving the location's events. Without it landfall
    /// creates one queue and one bucket notification for the whole location at first start.
    pub queue_url: Option<String>,
    /// Azure: the Storage Queue Event Grid delivers to (required). S3: the SQS queue to create
    /// (default `landfall-location-<name>`).
    pub queue_name: Option<String>,
    /// S3: deliver through an SNS topic subscribed by the queue.
    #[serde(default)]
    pub sns: bool,
    /// Concurrent receive calls of the consumer (default 1).
    pub receivers: Option<usize>,
    /// How long a received message stays invisible (default `2m`).
    pub visibility_timeout: Option<String>,
    /// Long-poll wait of one receive (default `20s`).
    pub wait_time: Option<String>,
    /// As `notifications.request_timeout` of a stream (default `20s` or a third of
    /// `visibility_timeout`).
    pub request_timeout: Option<String>,
    /// As `notifications.entry_check_interval` of a stream (default `5m`).
    pub entry_check_interval: Option<String>,
    /// Queue service endpoint (emulators, VPC endpoints).
    pub endpoint: Option<String>,
    /// Tags of every resource landfall creates for the location.
    #[serde(default)]
    pub resource_tags: BTreeMap<String, String>,
    /// How long events stay in the cache (default `7d`). A stream whose position is older
    /// lists its prefix once and continues.
    #[serde(default = "default_retention")]
    pub retention: String,
    /// List the whole location at this interval and cache files whose events never came
    /// (default `1d`; `off` to disable).
    #[serde(default = "default_listing_interval")]
    pub listing_interval: String,
    /// Streams list their own prefix while the consumer has not finished a round for this
    /// long (default `15m`), and say so in their status.
    #[serde(default = "default_fallback")]
    pub fallback_after: String,
    /// The event cache's directory (default `<server.state_dir>/_locations/<name>`).
    pub state_dir: Option<PathBuf>,
}

fn default_retention() -> String {
    "7d".into()
}
fn default_listing_interval() -> String {
    "1d".into()
}
fn default_fallback() -> String {
    "15m".into()
}

/// A validated location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationSpec {
    pub name: String,
    pub url: Location,
    pub options: StoreOptions,
    /// The queue, when `file_events = true`.
    pub queue: Option<NotificationsSpec>,
    pub retention: Duration,
    pub listing_interval: Option<Duration>,
    pub fallback_after: Duration,
    pub state_dir: PathBuf,
}

impl LocationSpec {
    /// Whether a stream's `source` (reached with `options`) lies at or under this location:
    /// the same service (endpoint, Azure account, where both say), the same bucket or
    /// container, the path below the location's prefix at a `/` boundary.
    pub fn holds_source(&self, source: &Location, options: &StoreOptions) -> bool {
        const SERVICE: [&str; 4] = [
            "aws_endpoint",
            "azure_storage_account_name",
            "azure_storage_endpoint",
            "azure_storage_use_emulator",
        ];
        let differ = SERVICE.iter().any(|k| {
            let get = |o: &StoreOptions| o.iter().find(|(n, _)| n.as_str() == *k).map(|(_, v)| v.clone());
            matches!((get(&self.options), get(options)), (Some(a), Some(b)) if a.trim_end_matches('/') != b.trim_end_matches('/'))
        });
        !differ && self.holds(source)
    }

    /// Whether `source` lies at or under this location's URL (same bucket or container, path
    /// below the location's prefix at a `/` boundary).
    pub fn holds(&self, source: &Location) -> bool {
        let (a, b) = (&self.url.url, &source.url);
        if a.scheme() != b.scheme() || a.host_str() != b.host_str() || a.username() != b.username()
        {
            return false;
        }
        let dir = |p: &str| format!("{}/", p.trim_end_matches('/'));
        dir(b.path()).starts_with(&dir(a.path()))
    }

    /// The prefix inside the bucket or container (no leading or trailing `/`).
    pub fn prefix(&self) -> String {
        self.url.url.path().trim_matches('/').to_string()
    }
}

/// Check one location. Errors are `(key below the location, reason)`.
pub(crate) fn validate_location(
    name: &str,
    l: &LocationConfig,
    store: Option<&crate::StoreConfig>,
    state_root: &std::path::Path,
) -> Result<LocationSpec, Vec<(String, String)>> {
    let mut errors: Vec<(String, String)> = Vec::new();
    let url = match Location::parse(&l.url) {
        Ok(u) => Some(u),
        Err(e) => {
            errors.push(("url".into(), e));
            None
        }
    };
    let duration =
        |key: &str, v: &str, errors: &mut Vec<(String, String)>| match humantime::parse_duration(v)
        {
            Ok(d) if d >= Duration::from_secs(1) => Some(d),
            Ok(_) => {
                errors.push((key.into(), "must be at least 1s".into()));
                None
            }
            Err(e) => {
                errors.push((key.into(), format!("`{v}` is not a duration ({e})")));
                None
            }
        };
    let retention = duration("retention", &l.retention, &mut errors);
    let listing_interval = if l.listing_interval == "off" {
        Some(None)
    } else {
        duration("listing_interval", &l.listing_interval, &mut errors).map(Some)
    };
    let fallback_after = duration("fallback_after", &l.fallback_after, &mut errors);
    let queue_keys_set = l.queue_url.is_some()
        || l.queue_name.is_some()
        || l.sns
        || l.receivers.is_some()
        || l.visibility_timeout.is_some()
        || l.wait_time.is_some()
        || l.request_timeout.is_some()
        || l.entry_check_interval.is_some()
        || l.endpoint.is_some()
        || !l.resource_tags.is_empty();
    let mut queue = None;
    if let Some(u) = &url {
        if l.file_events {
            if let Some(reason) = no_events(u.kind) {
                errors.push(("file_events".into(), reason.into()));
            } else {
                let n = NotificationsConfig {
                    queue_url: l.queue_url.clone(),
                    queue_name: l.queue_name.clone(),
                    sns: l.sns,
                    receivers: l.receivers.unwrap_or(1),
                    visibility_timeout: l
                        .visibility_timeout
                        .clone()
                        .unwrap_or_else(|| NotificationsConfig::default().visibility_timeout),
                    wait_time: l
                        .wait_time
                        .clone()
                        .unwrap_or_else(|| NotificationsConfig::default().wait_time),
                    request_timeout: l.request_timeout.clone(),
                    endpoint: l.endpoint.clone(),
                    entry_check_interval: l
                        .entry_check_interval
                        .clone()
                        .unwrap_or_else(crate::notifications::default_entry_check),
                    resource_tags: l.resource_tags.clone(),
                };
                match validate_queue(&format!("landfall-location-{name}"), &n, u) {
                    Ok(q) => queue = Some(q),
                    Err(e) => errors.extend(e.into_iter().map(|(k, r)| (k.to_string(), r))),
                }
            }
        } else if queue_keys_set {
            errors.push((
                "file_events".into(),
                "queue settings are given but file_events is false; set file_events = true to consume the location's events".into(),
            ));
        }
    }
    if let (Some(r), Some(Some(i))) = (retention, listing_interval)
        && i >= r
    {
        errors.push((
            "listing_interval".into(),
            "must be shorter than retention: a file whose event was lost must be listed while its modification time is still inside the retention".into(),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let url = url.expect("checked");
    Ok(LocationSpec {
        name: name.to_string(),
        options: StoreOptions::build(url.kind, store, |v| std::env::var(v).ok()),
        url,
        queue,
        retention: retention.expect("checked"),
        listing_interval: listing_interval.expect("checked"),
        fallback_after: fallback_after.expect("checked"),
        state_dir: l
            .state_dir
            .clone()
            .unwrap_or_else(|| state_root.join("_locations").join(name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> LocationConfig {
        let v: toml_like::Value = toml_like::parse(toml);
        serde_json::from_value(v).unwrap()
    }

    mod toml_like {
        pub type Value = serde_json::Value;
        /// `key = value` lines with JSON values (enough for these tests).
        pub fn parse(s: &str) -> Value {
            let mut m = serde_json::Map::new();
            for line in s.lines().filter(|l| !l.trim().is_empty()) {
                let (k, v) = line.split_once('=').unwrap();
                m.insert(k.trim().into(), serde_json::from_str(v.trim()).unwrap());
            }
            Value::Object(m)
        }
    }

    #[test]
    fn a_location_holds_its_prefix_at_a_slash() {
        let l = validate_location(
            "raw",
            &parse("url = \"s3://b/data\"\nfile_events = true"),
            None,
            std::path::Path::new("/s"),
        )
        .unwrap();
        let at = |u: &str| l.holds(&Location::parse(u).unwrap());
        assert!(at("s3://b/data/x"));
        assert!(at("s3://b/data"));
        assert!(!at("s3://b/data2/x"));
        assert!(!at("s3://c/data/x"));
        assert_eq!(l.prefix(), "data");
        assert_eq!(l.state_dir, std::path::Path::new("/s/_locations/raw"));
        let Some(q) = &l.queue else { panic!() };
        assert_eq!(
            q.queue,
            crate::QueueSpec::Sqs {
                url: None,
                name: "landfall-location-raw".into(),
                sns: false
            }
        );
        assert_eq!(l.retention, Duration::from_secs(7 * 86400));
    }

    #[test]
    fn bad_settings_are_named() {
        let e = validate_location(
            "raw",
            &parse("url = \"/tmp/x\"\nfile_events = true\nretention = \"1h\"\nlisting_interval = \"2h\""),
            None,
            std::path::Path::new("/s"),
        )
        .unwrap_err();
        let keys: Vec<_> = e.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["file_events", "listing_interval"]);
        let e = validate_location(
            "raw",
            &parse("url = \"az://c/\"\nqueue_name = \"q-1\""),
            None,
            std::path::Path::new("/s"),
        )
        .unwrap_err();
        assert_eq!(e[0].0, "file_events");
    }
}
