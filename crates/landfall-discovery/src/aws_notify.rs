//! The AWS side of notification mode that both setup and the bucket entry's guard stand on:
//! the client ([`AwsNotifications`]: S3, SQS and SNS with one configuration), what setup
//! created ([`CreatedResources`]) and its errors, and the model of a bucket's notification
//! configuration: the owner's [`Entry`] (its id, target and prefix rule) and the
//! configuration read and written whole ([`BucketConfiguration`]). setup.rs creates the
//! resources on top of it, bucket_entry.rs writes and guards the entry.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The resources setup created for one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedResources {
    pub bucket: String,
    /// The prefix rule of the bucket entry (bucket_entry.rs: the decoded prefix, cut before
    /// the first character S3 implementations compare differently).
    pub prefix: String,
    /// The id of the stream's entry in the bucket's notification configuration.
    pub notification_id: String,
    pub queue_url: Option<String>,
    pub queue_arn: Option<String>,
    pub topic_arn: Option<String>,
    pub subscription_arn: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// What setup needs to know about the stream.
#[derive(Debug, Clone)]
pub struct SetupRequest {
    pub stream: String,
    pub bucket: String,
    /// The source prefix inside the bucket, decoded (the key as S3 stores it; no leading
    /// `/`; a trailing `/` is added).
    pub prefix: String,
    pub queue_name: String,
    pub sns: bool,
    pub tags: BTreeMap<String, String>,
}

/// A setup or teardown step that failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{op} on {resource}: {detail}")]
    Aws {
        op: &'static str,
        resource: String,
        detail: String,
    },
    #[error(
        "queue `{queue}` already exists and was not created by landfall for stream `{stream}` (its landfall-stream tag is {tag}); set notifications.queue_name to another name, or queue_url to use it as it is"
    )]
    NotOurs {
        queue: String,
        stream: String,
        tag: String,
    },
    #[error(
        "bucket `{bucket}` already sends object events for prefix `{existing_prefix}` (notification `{existing_id}`), which overlaps the stream's prefix `{prefix}`; S3 refuses overlapping notification configurations. Give the streams prefixes that do not nest, or fan one bucket notification out through an SNS topic to one queue per stream (set up by hand, with queue_url)"
    )]
    Overlap {
        bucket: String,
        prefix: String,
        existing_id: String,
        existing_prefix: String,
    },
}

/// Whether each recorded resource still exists.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceStatus {
    pub queue: Option<bool>,
    pub topic: Option<bool>,
    pub bucket_notification: bool,
}

/// The S3, SQS and SNS clients setup and teardown use.
pub struct AwsNotifications {
    pub(crate) s3: aws_sdk_s3::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) sns: aws_sdk_sns::Client,
}

pub(crate) fn aws_err<E>(
    op: &'static str,
    resource: &str,
    e: aws_sdk_s3::error::SdkError<E>,
) -> SetupError
where
    E: std::error::Error + aws_sdk_s3::error::ProvideErrorMetadata + 'static,
{
    SetupError::Aws {
        op,
        resource: resource.to_string(),
        detail: crate::queue::sdk_detail(&e),
    }
}

pub(crate) fn code_of<E: aws_sdk_s3::error::ProvideErrorMetadata>(
    e: &aws_sdk_s3::error::SdkError<E>,
) -> Option<&str> {
    use aws_sdk_s3::error::ProvideErrorMetadata;
    e.code()
}

/// An XML document whose root element has no content (`<?xml ...?><Root xmlns="..."/>`).
pub(crate) fn empty_xml_document(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let text = match text.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or("", |(_, r)| r.trim()),
        None => text,
    };
    text.starts_with('<') && text.ends_with("/>") && text.matches('<').count() == 1
}

/// The id of the stream's entry in the bucket notification configuration: its queue's name
/// (unique in the account and region, unlike a stream name across deployments).
pub fn notification_id(queue_name: &str) -> String {
    queue_name.to_string()
}

/// `prefix` with exactly one trailing `/` (or empty).
pub(crate) fn dir_prefix(prefix: &str) -> String {
    let p = prefix.trim_matches('/');
    if p.is_empty() {
        String::new()
    } else {
        format!("{p}/")
    }
}

/// The prefix rule of a notification filter (empty: every key).
pub(crate) fn prefix_of(f: Option<&aws_sdk_s3::types::NotificationConfigurationFilter>) -> String {
    f.and_then(|f| f.key())
        .and_then(|k| {
            k.filter_rules()
                .iter()
                .find(|r| {
                    r.name()
                        .is_some_and(|n| n.as_str().eq_ignore_ascii_case("prefix"))
                })
                .and_then(|r| r.value())
        })
        .unwrap_or_default()
        .to_string()
}

impl AwsNotifications {
    pub async fn new(settings: &crate::AwsSettings) -> Self {
        let conf = settings.sdk_config().await;
        // Custom endpoints (emulators, on-premises S3) are addressed path-style.
        let s3_conf = aws_sdk_s3::config::Builder::from(&conf)
            .force_path_style(settings.endpoint.is_some())
            .build();
        AwsNotifications {
            s3: aws_sdk_s3::Client::from_conf(s3_conf),
            sqs: aws_sdk_sqs::Client::new(&conf),
            sns: aws_sdk_sns::Client::new(&conf),
        }
    }

    /// The bucket's notification configuration. An empty one that an S3-compatible server
    /// sends under another XML root (moto: `<GetBucketNotificationResponse/>`) is read as
    /// empty rather than failing setup.
    pub(crate) async fn bucket_configuration(
        &self,
        bucket: &str,
    ) -> Result<BucketConfiguration, SetupError> {
        use aws_sdk_s3::error::SdkError;
        match self
            .s3
            .get_bucket_notification_configuration()
            .bucket(bucket)
            .send()
            .await
        {
            Ok(c) => Ok(BucketConfiguration {
                queues: c.queue_configurations().to_vec(),
                topics: c.topic_configurations().to_vec(),
                lambdas: c.lambda_function_configurations().to_vec(),
                event_bridge: c.event_bridge_configuration().cloned(),
            }),
            Err(SdkError::ServiceError(e))
                if e.raw().status().as_u16() == 200
                    && e.raw().body().bytes().is_some_and(empty_xml_document) =>
            {
                Ok(BucketConfiguration::default())
            }
            Err(e) => Err(aws_err("GetBucketNotificationConfiguration", bucket, e)),
        }
    }

    /// Write a bucket's whole notification configuration.
    pub(crate) async fn put_configuration(
        &self,
        bucket: &str,
        config: aws_sdk_s3::types::NotificationConfiguration,
    ) -> Result<(), SetupError> {
        self.s3
            .put_bucket_notification_configuration()
            .bucket(bucket)
            .notification_configuration(config)
            .send()
            .await
            .map_err(|e| aws_err("PutBucketNotificationConfiguration", bucket, e))?;
        Ok(())
    }
}

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
            rule: rule_prefix(&dir_prefix(prefix)),
        })
    }

    /// The key filter; none for an empty rule (some S3-compatible servers refuse an empty
    /// filter value; no filter selects every key, as the empty prefix does).
    pub(crate) fn filter(&self) -> Option<aws_sdk_s3::types::NotificationConfigurationFilter> {
        use aws_sdk_s3::types::{
            FilterRule, FilterRuleName, NotificationConfigurationFilter, S3KeyFilter,
        };
        if self.rule.is_empty() {
            return None;
        }
        let filter = NotificationConfigurationFilter::builder()
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
            .build();
        Some(filter)
    }
}

pub(crate) const EVENTS: [aws_sdk_s3::types::Event; 2] = [
    aws_sdk_s3::types::Event::S3ObjectCreated,
    aws_sdk_s3::types::Event::S3ObjectRemoved,
];

/// Whether `events` holds every event landfall's entries send.
pub(crate) fn sends_ours(events: &[aws_sdk_s3::types::Event]) -> bool {
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
        let same = |filter, events: &[_]| prefix_of(filter) == e.rule && sends_ours(events);
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
    pub(crate) fn with(
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
                        .set_filter(e.filter())
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
                        .set_filter(e.filter())
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
