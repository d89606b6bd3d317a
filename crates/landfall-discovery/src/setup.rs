//! Creating and removing the cloud resources of S3 notification mode: an SQS queue (and with
//! `sns`, an SNS topic the queue subscribes to), the queue's (and topic's) access policy
//! letting S3 (or SNS) send, and a bucket notification for the stream's prefix. Everything
//! created is tagged with the stream's `resource_tags` plus `landfall-stream=<name>`, and
//! described by [`CreatedResources`], which the stream's state keeps so teardown removes
//! exactly that.
//!
//! S3 keeps one notification configuration per bucket; setup reads it, adds or replaces the
//! entry whose id is the queue's name, and writes it back, keeping everyone else's entries.
//! An existing entry of another owner whose prefix overlaps the stream's (one is a prefix of
//! the other) for ObjectCreated events is refused with a message naming it: S3 rejects
//! overlapping configurations, with an obscure error. Setup is idempotent: CreateQueue and
//! CreateTopic return the existing resource, and the bucket entry is replaced in place.

use crate::bucket_entry::{BucketConfiguration, Entry, Target, rule_prefix};
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

fn aws_err<E>(op: &'static str, resource: &str, e: aws_sdk_s3::error::SdkError<E>) -> SetupError
where
    E: std::error::Error + aws_sdk_s3::error::ProvideErrorMetadata + 'static,
{
    SetupError::Aws {
        op,
        resource: resource.to_string(),
        detail: crate::queue::sdk_detail(&e),
    }
}

fn code_of<E: aws_sdk_s3::error::ProvideErrorMetadata>(
    e: &aws_sdk_s3::error::SdkError<E>,
) -> Option<&str> {
    use aws_sdk_s3::error::ProvideErrorMetadata;
    e.code()
}

/// An XML document whose root element has no content (`<?xml ...?><Root xmlns="..."/>`).
fn empty_xml_document(body: &[u8]) -> bool {
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

/// The condition of a statement letting S3 send for `bucket_arn`: the bucket's ARN and, when
/// known, the bucket owner's account, as AWS documents for S3 event notifications.
fn s3_condition(bucket_arn: &str, account: Option<&str>) -> serde_json::Value {
    match account {
        Some(a) => serde_json::json!({
            "ArnLike": {"aws:SourceArn": bucket_arn},
            "StringEquals": {"aws:SourceAccount": a}
        }),
        None => serde_json::json!({"ArnLike": {"aws:SourceArn": bucket_arn}}),
    }
}

/// Whether two key prefixes select overlapping keys.
fn overlaps(a: &str, b: &str) -> bool {
    a.starts_with(b) || b.starts_with(a)
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

/// Whether an entry sends any of the events landfall's entry sends (created or removed):
/// S3 refuses two entries with overlapping prefixes for the same event type.
fn creates_objects(events: &[aws_sdk_s3::types::Event]) -> bool {
    events.iter().any(|e| {
        let e = e.as_str();
        e.starts_with("s3:ObjectCreated:") || e.starts_with("s3:ObjectRemoved:")
    })
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

    /// Create (or find) the queue, the topic and subscription with `sns`, the access
    /// policies, and the bucket notification. Idempotent.
    pub async fn setup(&self, req: &SetupRequest) -> Result<CreatedResources, SetupError> {
        use aws_sdk_sqs::types::QueueAttributeName;
        let id = notification_id(&req.queue_name);
        // The filter value S3 holds (bucket_entry.rs: cut before characters S3 implementations
        // compare differently), what overlaps are judged by and what is recorded.
        let prefix = rule_prefix(&dir_prefix(&req.prefix));
        let bucket = &req.bucket;
        let current = self.bucket_configuration(bucket).await?;
        // Refuse before creating anything.
        let others = current
            .queues
            .iter()
            .map(|q| (q.id(), q.events(), q.filter()))
            .chain(
                current
                    .topics
                    .iter()
                    .map(|t| (t.id(), t.events(), t.filter())),
            )
            .chain(
                current
                    .lambdas
                    .iter()
                    .map(|l| (l.id(), l.events(), l.filter())),
            );
        for (other_id, events, filter) in others {
            if other_id == Some(id.as_str()) || !creates_objects(events) {
                continue;
            }
            let theirs = prefix_of(filter);
            if overlaps(&theirs, &prefix) {
                return Err(SetupError::Overlap {
                    bucket: bucket.clone(),
                    prefix,
                    existing_id: other_id.unwrap_or("(no id)").to_string(),
                    existing_prefix: theirs,
                });
            }
        }
        let mut tags = req.tags.clone();
        tags.insert("landfall-stream".into(), req.stream.clone());
        // An existing queue of that name is taken over only if landfall made it for this
        // stream (CreateQueue would return it silently, and setup would rewrite its policy).
        if let Ok(found) = self
            .sqs
            .get_queue_url()
            .queue_name(&req.queue_name)
            .send()
            .await
            && let Some(url) = found.queue_url()
        {
            let existing = self
                .sqs
                .list_queue_tags()
                .queue_url(url)
                .send()
                .await
                .map_err(|e| aws_err("ListQueueTags", url, e))?;
            let owner = existing
                .tags()
                .and_then(|t| t.get("landfall-stream"))
                .cloned();
            if owner.as_deref() != Some(req.stream.as_str()) {
                return Err(SetupError::NotOurs {
                    queue: req.queue_name.clone(),
                    stream: req.stream.clone(),
                    tag: owner.map_or("absent".into(), |o| format!("`{o}`")),
                });
            }
        }

        let queue_url = self
            .sqs
            .create_queue()
            .queue_name(&req.queue_name)
            .set_tags(Some(tags.clone().into_iter().collect()))
            .send()
            .await
            .map_err(|e| aws_err("CreateQueue", &req.queue_name, e))?
            .queue_url()
            .unwrap_or_default()
            .to_string();
        let queue_arn = self
            .sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| aws_err("GetQueueAttributes", &queue_url, e))?
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .unwrap_or_default();
        // arn:<partition>:sqs:<region>:<account>:<name>: the bucket's ARN is in the queue's
        // partition (aws, aws-cn, aws-us-gov).
        let partition = queue_arn
            .split(':')
            .nth(1)
            .filter(|p| !p.is_empty())
            .unwrap_or("aws");
        let bucket_arn = format!("arn:{partition}:s3:::{bucket}");
        // aws:SourceAccount must be the bucket owner's account. The queue is in landfall's
        // account, which may not own the bucket (S3 sends to queues of other accounts): the
        // condition is written only when S3 confirms the bucket is in the queue's account.
        let queue_account = queue_arn.split(':').nth(4).filter(|a| !a.is_empty());
        let account = match queue_account {
            Some(a) => match self
                .s3
                .head_bucket()
                .bucket(bucket)
                .expected_bucket_owner(a)
                .send()
                .await
            {
                Ok(_) => Some(a),
                Err(e) => {
                    tracing::info!(bucket, account = a, error = %aws_sdk_s3::error::DisplayErrorContext(&e), "the bucket is not confirmed in the queue's account; the access policy names the bucket only (no aws:SourceAccount)");
                    None
                }
            },
            None => None,
        };

        let (topic_arn, subscription_arn, sender, sender_arn) = if req.sns {
            let topic_tags: Vec<aws_sdk_sns::types::Tag> = tags
                .iter()
                .filter_map(|(k, v)| {
                    aws_sdk_sns::types::Tag::builder()
                        .key(k)
                        .value(v)
                        .build()
                        .ok()
                })
                .collect();
            let topic_arn = self
                .sns
                .create_topic()
                .name(&req.queue_name)
                .set_tags(Some(topic_tags))
                .send()
                .await
                .map_err(|e| aws_err("CreateTopic", &req.queue_name, e))?
                .topic_arn()
                .unwrap_or_default()
                .to_string();
            let topic_policy = serde_json::json!({
                "Version": "2012-10-17",
                "Statement": [{
                    "Sid": "landfall-s3-publish",
                    "Effect": "Allow",
                    "Principal": {"Service": "s3.amazonaws.com"},
                    "Action": "sns:Publish",
                    "Resource": topic_arn,
                    "Condition": s3_condition(&bucket_arn, account)
                }]
            });
            self.sns
                .set_topic_attributes()
                .topic_arn(&topic_arn)
                .attribute_name("Policy")
                .attribute_value(topic_policy.to_string())
                .send()
                .await
                .map_err(|e| aws_err("SetTopicAttributes", &topic_arn, e))?;
            let subscription_arn = self
                .sns
                .subscribe()
                .topic_arn(&topic_arn)
                .protocol("sqs")
                .endpoint(&queue_arn)
                .attributes("RawMessageDelivery", "true")
                .return_subscription_arn(true)
                .send()
                .await
                .map_err(|e| aws_err("Subscribe", &topic_arn, e))?
                .subscription_arn()
                .map(str::to_string);
            (
                Some(topic_arn.clone()),
                subscription_arn,
                "sns.amazonaws.com",
                topic_arn,
            )
        } else {
            (None, None, "s3.amazonaws.com", bucket_arn.clone())
        };
        // AWS's documented statements: S3 sends (to the queue or the topic) for the bucket's
        // ARN in the bucket owner's account (aws:SourceAccount: the confused-deputy guard);
        // SNS sends to the queue for the topic's ARN.
        let condition = if req.sns {
            serde_json::json!({"ArnEquals": {"aws:SourceArn": sender_arn}})
        } else {
            s3_condition(&bucket_arn, account)
        };
        let queue_policy = serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "landfall-send",
                "Effect": "Allow",
                "Principal": {"Service": sender},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": condition
            }]
        });
        self.sqs
            .set_queue_attributes()
            .queue_url(&queue_url)
            .attributes(QueueAttributeName::Policy, queue_policy.to_string())
            .send()
            .await
            .map_err(|e| aws_err("SetQueueAttributes", &queue_url, e))?;

        // The bucket's configuration: everyone else's entries kept, ours added or replaced,
        // and read back until it holds (bucket_entry.rs).
        let entry = Entry {
            id: id.clone(),
            target: match &topic_arn {
                Some(t) => Target::Topic(t.clone()),
                None => Target::Queue(queue_arn.clone()),
            },
            rule: prefix.clone(),
        };
        self.write_entry(bucket, &entry).await?;
        Ok(CreatedResources {
            bucket: bucket.clone(),
            prefix,
            notification_id: id,
            queue_url: Some(queue_url),
            queue_arn: Some(queue_arn),
            topic_arn,
            subscription_arn,
            tags,
        })
    }

    /// Remove what setup created: the bucket's entry (others kept), the subscription, the
    /// topic and the queue. Resources already gone are not an error. Returns what was done.
    pub async fn teardown(&self, r: &CreatedResources) -> Result<Vec<String>, SetupError> {
        let mut done = Vec::new();
        let current = self.bucket_configuration(&r.bucket).await?;
        if current.has(&r.notification_id) {
            self.put_configuration(&r.bucket, current.replacing(&r.notification_id, None, None))
                .await?;
            done.push(format!(
                "removed bucket notification {} from {}",
                r.notification_id, r.bucket
            ));
        }
        if let Some(s) = &r.subscription_arn {
            match self.sns.unsubscribe().subscription_arn(s).send().await {
                Ok(_) => done.push(format!("removed subscription {s}")),
                Err(e) if code_of(&e) == Some("NotFound") => {}
                Err(e) => return Err(aws_err("Unsubscribe", s, e)),
            }
        }
        if let Some(t) = &r.topic_arn {
            // DeleteTopic succeeds on a missing topic.
            self.sns
                .delete_topic()
                .topic_arn(t)
                .send()
                .await
                .map_err(|e| aws_err("DeleteTopic", t, e))?;
            done.push(format!("deleted topic {t}"));
        }
        if let Some(q) = &r.queue_url {
            match self.sqs.delete_queue().queue_url(q).send().await {
                Ok(_) => done.push(format!("deleted queue {q}")),
                Err(e)
                    if matches!(
                        code_of(&e),
                        Some("AWS.SimpleQueueService.NonExistentQueue" | "QueueDoesNotExist")
                    ) => {}
                Err(e) => return Err(aws_err("DeleteQueue", q, e)),
            }
        }
        Ok(done)
    }

    /// Whether the recorded resources exist.
    pub async fn status(&self, r: &CreatedResources) -> Result<ResourceStatus, SetupError> {
        let current = self.bucket_configuration(&r.bucket).await?;
        let bucket_notification = current.has(&r.notification_id);
        let queue = match &r.queue_url {
            None => None,
            Some(q) => Some(
                self.sqs
                    .get_queue_attributes()
                    .queue_url(q)
                    .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                    .send()
                    .await
                    .is_ok(),
            ),
        };
        let topic = match &r.topic_arn {
            None => None,
            Some(t) => Some(
                self.sns
                    .get_topic_attributes()
                    .topic_arn(t)
                    .send()
                    .await
                    .is_ok(),
            ),
        };
        Ok(ResourceStatus {
            queue,
            topic,
            bucket_notification,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_overlap_when_one_contains_the_other() {
        assert!(overlaps("a/", "a/b/"));
        assert!(overlaps("", "a/"));
        assert!(!overlaps("a/", "ab/"));
        assert_eq!(dir_prefix("/landing/x/"), "landing/x/");
        assert_eq!(dir_prefix(""), "");
    }

    #[test]
    fn an_empty_reply_under_another_root_is_an_empty_configuration() {
        assert!(empty_xml_document(
            b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<GetBucketNotificationResponse xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"/>"
        ));
        assert!(!empty_xml_document(
            b"<NotificationConfiguration><QueueConfiguration/></NotificationConfiguration>"
        ));
    }
}
