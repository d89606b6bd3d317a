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

use crate::aws_notify::*;

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

/// Whether an entry sends any of the events landfall's entry sends (created or removed):
/// S3 refuses two entries with overlapping prefixes for the same event type.
fn creates_objects(events: &[aws_sdk_s3::types::Event]) -> bool {
    events.iter().any(|e| {
        let e = e.as_str();
        e.starts_with("s3:ObjectCreated:") || e.starts_with("s3:ObjectRemoved:")
    })
}

impl AwsNotifications {
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
