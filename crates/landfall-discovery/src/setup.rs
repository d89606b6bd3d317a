//! Creating and removing the cloud resources of S3 notification mode: an SQS queue (and with
//! `sns`, an SNS topic the queue subscribes to), the queue's (and topic's) access policy
//! letting S3 (or SNS) send, and a bucket notification for the stream's prefix. Everything
//! created is tagged with the stream's `resource_tags` plus `landfall-stream=<name>`, and
//! described by [`CreatedResources`], which the stream's state keeps so teardown removes
//! exactly that.
//!
//! S3 keeps one notification configuration per bucket; setup reads it, adds or replaces the
//! entry whose id is `landfall-<stream>`, and writes it back, keeping everyone else's entries.
//! An existing entry of another owner whose prefix overlaps the stream's (one is a prefix of
//! the other) for ObjectCreated events is refused with a message naming it: S3 rejects
//! overlapping configurations, with an obscure error. Setup is idempotent: CreateQueue and
//! CreateTopic return the existing resource, and the bucket entry is replaced in place.

use serde::{Deserialize, Serialize};

/// The resources setup created for one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedResources {
    pub bucket: String,
    pub prefix: String,
    /// The id of the stream's entry in the bucket's notification configuration.
    pub notification_id: String,
    pub queue_url: Option<String>,
    pub queue_arn: Option<String>,
    pub topic_arn: Option<String>,
    pub subscription_arn: Option<String>,
    pub tags: std::collections::BTreeMap<String, String>,
}
