//! The owner's entry in a bucket's notification configuration, written so that it survives
//! other writers.
//!
//! S3 keeps one notification configuration per bucket, read and written whole
//! (Get/PutBucketNotificationConfiguration) with no condition: two writers that read the same
//! configuration each write back their own version, and the second drops the first's entry;
//! an outside blind write (Terraform, the console) drops it too, and nothing tells the loser,
//! whose stream then waits for events forever. So:
//! - after writing, the configuration is read back (after a short jittered pause, so a racing
//!   writer's write has landed) and the entry checked: same id, same queue or topic, created
//!   and removed events, the same prefix rule. A missing or different entry is written again
//!   after a jittered, doubling backoff, up to [`WRITE_ATTEMPTS`] times, then the setup fails
//!   (retryable) naming the bucket and the entry;
//! - at every start and every `verify_interval` the entry is checked again ([`EntryGuard`]);
//!   one found gone is written again, logged and counted, and the owner lists its prefix
//!   once, so the files published while it was gone are found.
//!
//! The prefix rule ([`rule_prefix`]): S3 compares a filter value with the key in the form it
//! encodes keys in event messages (AWS documents a space as `+` and other special characters
//! percent-encoded in filter values), which S3-compatible servers do not all share (moto
//! compares the raw key). Only the characters S3's key naming guidelines call safe mean the
//! same either way, so the rule is the decoded key prefix cut before the first other
//! character: for `landing zone/é/` it is `landing`. The rule may select more keys than the
//! stream's prefix; the stream passes over events outside its prefix itself (counted).

use crate::setup::{AwsNotifications, CreatedResources, SetupError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many times an entry is written before setup gives up (a writer racing on every try).
pub const WRITE_ATTEMPTS: u32 = 8;
/// The first pause before reading an entry back, and between attempts (doubled each time,
/// jittered by up to half again).
const FIRST_PAUSE: Duration = Duration::from_millis(150);
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// A check that failed is tried again this soon (not a whole interval later).
pub const RETRY_FAILED_CHECK: Duration = Duration::from_secs(30);

/// The longest prefix of `prefix` (a decoded key prefix) made of the characters S3's key
/// naming guidelines call safe (`0-9 a-z A-Z ! - _ . ' ( )` and `/`; `*` is refused in filter
/// values): a filter value every S3 implementation compares the same way.
pub fn rule_prefix(prefix: &str) -> String {
    let end = prefix
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || "!-_.'()/".contains(*c)))
        .map_or(prefix.len(), |(i, _)| i);
    prefix[..end].to_string()
}

/// Where the entry sends events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Queue(String),
    Topic(String),
}

/// An entry of a bucket's notification configuration as landfall writes it: created and
/// removed events for keys starting with `rule`, to a queue or a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub target: Target,
    pub rule: String,
}

impl Entry {
    /// The entry of recorded resources, with the rule for `prefix` (the owner's decoded key
    /// prefix, as configured now: a record of an older version may hold another rule).
    pub fn of(r: &CreatedResources, prefix: &str) -> Option<Entry> {
        let target = match (&r.topic_arn, &r.queue_arn) {
            (Some(t), _) => Target::Topic(t.clone()),
            (None, Some(q)) => Target::Queue(q.clone()),
            (None, None) => return None,
        };
        Some(Entry {
            id: r.notification_id.clone(),
            target,
            rule: rule_prefix(&crate::setup::dir_prefix(prefix)),
        })
    }

    fn filter(&self) -> aws_sdk_s3::types::NotificationConfigurationFilter {
        use aws_sdk_s3::types::{
            FilterRule, FilterRuleName, NotificationConfigurationFilter, S3KeyFilter,
        };
        NotificationConfigurationFilter::builder()
            .key(
                S3KeyFilter::builder()
                    .filter_rules(
                        FilterRule::builder()
                            .name(FilterRuleName::Prefix)
                            .value(&self.rule)
                            .build(),
                    )
                    .build(),
            )
            .build()
    }
}

const EVENTS: [aws_sdk_s3::types::Event; 2] = [
    aws_sdk_s3::types::Event::S3ObjectCreated,
    aws_sdk_s3::types::Event::S3ObjectRemoved,
];

/// Whether `events` holds every event landfall's entries send.
fn sends_ours(events: &[aws_sdk_s3::types::Event]) -> bool {
    EVENTS.iter().all(|e| events.contains(e))
}

/// A bucket's notification configuration.
#[derive(Default)]
pub(crate) struct BucketConfiguration {
    pub(crate) queues: Vec<aws_sdk_s3::types::QueueConfiguration>,
    pub(crate) topics: Vec<aws_sdk_s3::types::TopicConfiguration>,
    pub(crate) lambdas: Vec<aws_sdk_s3::types::LambdaFunctionConfiguration>,
    pub(crate) event_bridge: Option<aws_sdk_s3::types::EventBridgeConfiguration>,
}

impl BucketConfiguration {
    /// Whether the configuration has a queue or topic entry with this id.
    pub(crate) fn has(&self, id: &str) -> bool {
        self.queues.iter().any(|q| q.id() == Some(id))
            || self.topics.iter().any(|t| t.id() == Some(id))
    }

    /// Whether the configuration holds `e` as landfall writes it.
    pub(crate) fn holds(&self, e: &Entry) -> bool {
        let same =
            |filter, events: &[_]| crate::setup::prefix_of(filter) == e.rule && sends_ours(events);
        match &e.target {
            Target::Queue(arn) => self.queues.iter().any(|q| {
                q.id() == Some(e.id.as_str())
                    && q.queue_arn() == arn
                    && same(q.filter(), q.events())
            }),
            Target::Topic(arn) => self.topics.iter().any(|t| {
                t.id() == Some(e.id.as_str())
                    && t.topic_arn() == arn
                    && same(t.filter(), t.events())
            }),
        }
    }

    /// This configuration with the entry `e.id` written as `e`.
    fn with(
        &self,
        e: &Entry,
        bucket: &str,
    ) -> Result<aws_sdk_s3::types::NotificationConfiguration, SetupError> {
        use aws_sdk_s3::types::{QueueConfiguration, TopicConfiguration};
        let build_err = |err: aws_sdk_s3::error::BuildError| SetupError::Aws {
            op: "PutBucketNotificationConfiguration",
            resource: bucket.to_string(),
            detail: err.to_string(),
        };
        let (queue, topic) = match &e.target {
            Target::Queue(arn) => (
                Some(
                    QueueConfiguration::builder()
                        .id(&e.id)
                        .queue_arn(arn)
                        .set_events(Some(EVENTS.to_vec()))
                        .filter(e.filter())
                        .build()
                        .map_err(build_err)?,
                ),
                None,
            ),
            Target::Topic(arn) => (
                None,
                Some(
                    TopicConfiguration::builder()
                        .id(&e.id)
                        .topic_arn(arn)
                        .set_events(Some(EVENTS.to_vec()))
                        .filter(e.filter())
                        .build()
                        .map_err(build_err)?,
                ),
            ),
        };
        Ok(self.replacing(&e.id, queue, topic))
    }

    /// This configuration with the entry `id` replaced by `queue` or `topic` (or removed):
    /// every other entry, Lambda and EventBridge setting kept.
    pub(crate) fn replacing(
        &self,
        id: &str,
        queue: Option<aws_sdk_s3::types::QueueConfiguration>,
        topic: Option<aws_sdk_s3::types::TopicConfiguration>,
    ) -> aws_sdk_s3::types::NotificationConfiguration {
        let queues = self
            .queues
            .iter()
            .filter(|q| q.id() != Some(id))
            .cloned()
            .chain(queue)
            .collect();
        let topics = self
            .topics
            .iter()
            .filter(|t| t.id() != Some(id))
            .cloned()
            .chain(topic)
            .collect();
        aws_sdk_s3::types::NotificationConfiguration::builder()
            .set_queue_configurations(Some(queues))
            .set_topic_configurations(Some(topics))
            .set_lambda_function_configurations(Some(self.lambdas.clone()))
            .set_event_bridge_configuration(self.event_bridge.clone())
            .build()
    }
}

/// `d` plus up to half again, from the clock and the process id (no shared state: two
/// processes racing draw different pauses).
fn jittered(d: Duration) -> Duration {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos() as u64)
        ^ ((std::process::id() as u64) << 20);
    // SplitMix64 finaliser: spreads the bits of the seed.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    d + d.mul_f64((z % 1000) as f64 / 2000.0)
}

/// What a check of the entry found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryCheck {
    /// The entry is there as written.
    Present,
    /// It was gone (or changed) and is written again: list once.
    Restored,
}

impl AwsNotifications {
    /// Write `e` into `bucket`'s configuration, everyone else's entries kept, until a read
    /// back shows it (see the module doc).
    pub(crate) async fn write_entry(&self, bucket: &str, e: &Entry) -> Result<(), SetupError> {
        let mut pause = FIRST_PAUSE;
        for _ in 0..WRITE_ATTEMPTS {
            let current = self.bucket_configuration(bucket).await?;
            if !current.holds(e) {
                self.put_configuration(bucket, current.with(e, bucket)?)
                    .await?;
            }
            tokio::time::sleep(jittered(pause)).await;
            if self.bucket_configuration(bucket).await?.holds(e) {
                return Ok(());
            }
            tracing::warn!(bucket, entry = %e.id, "the bucket notification entry was overwritten by another writer; writing it again");
            pause = (pause * 2).min(MAX_PAUSE);
        }
        Err(SetupError::Aws {
            op: "PutBucketNotificationConfiguration",
            resource: bucket.to_string(),
            detail: format!(
                "entry `{}` was overwritten by another writer on each of {WRITE_ATTEMPTS} tries (who else writes this bucket's notification configuration?)",
                e.id
            ),
        })
    }

    /// Whether `e` is in `bucket`'s configuration; written again when it is not.
    pub async fn check_entry(&self, bucket: &str, e: &Entry) -> Result<EntryCheck, SetupError> {
        if self.bucket_configuration(bucket).await?.holds(e) {
            return Ok(EntryCheck::Present);
        }
        self.write_entry(bucket, e).await?;
        Ok(EntryCheck::Restored)
    }
}

/// Called with the owner and the entry when an entry was found gone and written again.
pub type OnRestored = Arc<dyn Fn(&str, &Entry) + Send + Sync>;

/// Checks an owner's bucket entry at its first round and every `every` after, writing it
/// again when it is gone (see the module doc).
pub struct EntryGuard {
    owner: String,
    aws: AwsNotifications,
    bucket: String,
    entry: Entry,
    every: Duration,
    /// When the next check is due (`None`: at the next round).
    next: Mutex<Option<Instant>>,
    /// Called when the entry was found gone and written again (logs and counts).
    on_restored: OnRestored,
}

impl EntryGuard {
    pub fn new(
        owner: &str,
        aws: AwsNotifications,
        bucket: &str,
        entry: Entry,
        every: Duration,
        on_restored: OnRestored,
    ) -> Self {
        EntryGuard {
            owner: owner.to_string(),
            aws,
            bucket: bucket.to_string(),
            entry,
            every,
            next: Mutex::new(None),
            on_restored,
        }
    }

    /// Check the entry when due. `Ok(true)`: it was gone and is written again, so the owner
    /// must list once. A failed check (denied, an outage) is due again after
    /// [`RETRY_FAILED_CHECK`] (or the interval, when shorter).
    pub async fn check_if_due(&self) -> Result<bool, SetupError> {
        let due = {
            let next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            next.is_none_or(|at| Instant::now() >= at)
        };
        if !due {
            return Ok(false);
        }
        let found = self.aws.check_entry(&self.bucket, &self.entry).await;
        let after = match found {
            Ok(_) => self.every,
            Err(_) => self.every.min(RETRY_FAILED_CHECK),
        };
        *self.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + after);
        if found? == EntryCheck::Restored {
            (self.on_restored)(&self.owner, &self.entry);
            return Ok(true);
        }
        Ok(false)
    }

    /// The bucket the entry is in.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_stops_before_the_first_unsafe_character() {
        assert_eq!(rule_prefix("landing/x/"), "landing/x/");
        assert_eq!(rule_prefix("landing zone/é/"), "landing");
        assert_eq!(rule_prefix("é/"), "");
        assert_eq!(rule_prefix("a-b_c.d!e'f(g)/h/"), "a-b_c.d!e'f(g)/h/");
        assert_eq!(rule_prefix("events/date=2024-01-01/"), "events/date");
        assert_eq!(rule_prefix("a+b/"), "a");
        assert_eq!(rule_prefix("a*b/"), "a");
        assert_eq!(rule_prefix(""), "");
    }

    #[test]
    fn jitter_stays_within_half_again() {
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100));
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(150));
        }
    }
}
