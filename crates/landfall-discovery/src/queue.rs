//! The queues notification discovery reads, behind one trait: receive a few messages, extend
//! their visibility while they are held, delete them once their files are durably recorded.
//!
//! [`SqsQueue`] is Amazon SQS through aws-sdk-sqs (long polling, batches of 10,
//! `ApproximateReceiveCount` reported so malformed messages can be left to the queue's redrive
//! policy). Credentials and region come from the source store's options when given, else from
//! the AWS default chain (environment, profile, instance role). Every call is counted by
//! operation (`ReceiveMessage`, `DeleteMessageBatch`, `ChangeMessageVisibilityBatch`,
//! `GetQueueAttributes`).
//!
//! Every request has a deadline ([`SqsQueue::with_request_timeout`], `request_timeout` in the
//! configuration): a connection that takes a request and never answers is abandoned after
//! that long (a receive: its long-poll wait plus that long) and the request tried again on a
//! new one, so a silent network can delay a round but never hold it, or the visibility
//! heartbeat, for good.

use crate::CountRequests;
use async_trait::async_trait;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageSystemAttributeName, QueueAttributeName,
};
use std::time::Duration;

/// One received message.
#[derive(Debug, Clone)]
pub struct QueueMessage {
    /// The queue's message id, for logs.
    pub id: String,
    pub body: String,
    /// What deletes or extends this delivery (SQS receipt handle, Azure pop receipt).
    pub receipt: String,
    /// How many times the message was received, this time included.
    pub receive_count: u32,
}

/// A queue call that failed, with the operation and queue named.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{op} on {queue}: {detail}")]
pub struct QueueError {
    pub op: &'static str,
    pub queue: String,
    pub detail: String,
    /// Retrying may help (throttling, network, 5xx); false for a missing queue or no access.
    pub retryable: bool,
}

/// How many queue calls a delete or an extension runs at once.
pub(crate) const CONCURRENT_CALLS: usize = 16;

/// `call` on every item, [`CONCURRENT_CALLS`] at a time (a slow call does not hold the others
/// back), the answers in the items' order.
pub(crate) async fn concurrently<T, R, F>(
    items: impl IntoIterator<Item = T>,
    call: impl Fn(T) -> F,
) -> Vec<R>
where
    F: std::future::Future<Output = R>,
{
    use futures::StreamExt;
    let call = &call;
    let mut answers: Vec<(usize, R)> = futures::stream::iter(items.into_iter().enumerate())
        .map(|(i, item)| async move { (i, call(item).await) })
        .buffer_unordered(CONCURRENT_CALLS)
        .collect()
        .await;
    answers.sort_unstable_by_key(|(i, _)| *i);
    answers.into_iter().map(|(_, r)| r).collect()
}

/// What became of one delivery's visibility extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extension {
    /// Extended: the receipt to use from now on (Azure issues a new one, SQS keeps it).
    Renewed(String),
    /// Not extended, and the receipt still holds (SQS: a failed or unanswered change never
    /// shortens the visibility nor changes the receipt; Azure: refused with 401 or 403, or
    /// never sent because its deadline had passed).
    Refused,
    /// Perhaps extended under a receipt that was never seen (Azure: an update unanswered or
    /// failing otherwise may have been applied, and it replaces the pop receipt; a later
    /// attempt of the client then meets a stale receipt): the delivery can be neither extended
    /// nor deleted any more.
    Unknown,
}

/// A message queue of storage events.
#[async_trait]
pub trait MessageQueue: Send + Sync {
    /// The queue, for messages (its URL or name).
    fn describe(&self) -> String;
    /// Up to `max` messages (at most 10 per call), waiting up to `wait` for the first,
    /// invisible to others for `visibility`.
    async fn receive(
        &self,
        max: usize,
        wait: Duration,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError>;
    /// Delete deliveries by receipt; returns the receipts that could not be deleted (a call
    /// that failed leaves its own receipts there), or an error when every call failed.
    async fn delete(&self, receipts: &[String]) -> Result<Vec<String>, QueueError>;
    /// Whether a visibility extension replaces the receipt (Azure's pop receipt): a delete
    /// must then wait for an extension in flight.
    fn renews_receipts(&self) -> bool {
        false
    }
    /// Keep deliveries invisible for `visibility` from now, every call answered by `deadline`
    /// (one not started by then is not sent). Returns, per receipt in order, what became of
    /// it; a call that fails or is unanswered answers for its own deliveries only.
    async fn extend(
        &self,
        receipts: &[String],
        visibility: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Extension>, QueueError>;
    /// The approximate number of visible messages, when the queue can tell.
    async fn approximate_depth(&self) -> Result<Option<u64>, QueueError>;
    /// How long the queue keeps a message, when it can tell.
    async fn retention(&self) -> Result<Option<Duration>, QueueError> {
        Ok(None)
    }
}

/// Connection settings for AWS clients, from the source store's options.
#[derive(Debug, Clone, Default)]
pub struct AwsSettings {
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
}

impl AwsSettings {
    /// Read region, endpoint and static credentials from object_store-style S3 options
    /// (`region`/`aws_region`, `endpoint`/`aws_endpoint`, `access_key_id`, ...); `endpoint`
    /// overrides the store's endpoint.
    pub fn from_store_options<'a>(
        options: impl Iterator<Item = (&'a String, &'a String)>,
        endpoint: Option<&str>,
    ) -> AwsSettings {
        use object_store::aws::AmazonS3ConfigKey as K;
        let mut s = AwsSettings::default();
        for (k, v) in options {
            match k.to_ascii_lowercase().parse::<K>() {
                Ok(K::Region) => s.region = Some(v.clone()),
                Ok(K::Endpoint) if s.endpoint.is_none() => s.endpoint = Some(v.clone()),
                Ok(K::AccessKeyId) => s.access_key_id = Some(v.clone()),
                Ok(K::SecretAccessKey) => s.secret_access_key = Some(v.clone()),
                Ok(K::Token) => s.session_token = Some(v.clone()),
                _ => {}
            }
        }
        if let Some(e) = endpoint {
            s.endpoint = Some(e.to_string());
        }
        s
    }

    /// The shared AWS configuration: these settings over the default chain.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(r) = &self.region {
            loader = loader.region(aws_config::Region::new(r.clone()));
        }
        if let Some(e) = &self.endpoint {
            loader = loader.endpoint_url(e.clone());
        }
        if let (Some(k), Some(s)) = (&self.access_key_id, &self.secret_access_key) {
            loader = loader.credentials_provider(aws_sdk_sqs::config::Credentials::new(
                k.clone(),
                s.clone(),
                self.session_token.clone(),
                None,
                "landfall-store-options",
            ));
        }
        loader.load().await
    }
}

/// How long one queue request may go unanswered (beyond a receive's wait) by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// An SQS queue.
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
    count: CountRequests,
    request_timeout: Duration,
}

impl SqsQueue {
    pub fn new(config: &aws_config::SdkConfig, url: &str, count: CountRequests) -> Self {
        Self::with_request_timeout(config, url, count, DEFAULT_REQUEST_TIMEOUT)
    }

    /// As [`SqsQueue::new`], each request abandoned (and tried again) when unanswered for
    /// `request_timeout` beyond its long-poll wait.
    pub fn with_request_timeout(
        config: &aws_config::SdkConfig,
        url: &str,
        count: CountRequests,
        request_timeout: Duration,
    ) -> Self {
        use aws_sdk_sqs::config::retry::{RetryPartition, TokenBucket};
        let conf = aws_sdk_sqs::config::Builder::from(config)
            .interceptor(FailedAttempts(count.clone()))
            .timeout_config(attempt_timeouts(request_timeout, request_timeout))
            // Each queue retries on its own, without the SDK's process-wide retry quota: a
            // partition's timeouts would empty it (10 tokens each) and leave every SQS call of
            // the process without retries for hours. Attempts stay bounded (3 per call).
            .retry_partition(
                RetryPartition::custom(format!("landfall-sqs {url}"))
                    .token_bucket(TokenBucket::unlimited())
                    .build(),
            )
            .build();
        SqsQueue {
            client: aws_sdk_sqs::Client::from_conf(conf),
            url: url.to_string(),
            count,
            request_timeout,
        }
    }

    fn err<E>(&self, op: &'static str, e: aws_sdk_sqs::error::SdkError<E>) -> QueueError
    where
        E: std::error::Error + aws_sdk_sqs::error::ProvideErrorMetadata + 'static,
    {
        use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
        let code = e.code().map(str::to_string);
        let detail = sdk_detail(&e);
        let permanent = matches!(
            code.as_deref(),
            Some(
                "AWS.SimpleQueueService.NonExistentQueue"
                    | "QueueDoesNotExist"
                    | "AccessDenied"
                    | "AccessDeniedException"
                    | "InvalidClientTokenId"
                    | "SignatureDoesNotMatch"
            )
        );
        QueueError {
            op,
            queue: self.url.clone(),
            detail,
            retryable: !permanent && !matches!(e, SdkError::ConstructionFailure(_)),
        }
    }
}

/// An AWS SDK error for a message: the service's code and message when it sent them, else
/// the whole error chain (network, timeout, construction).
pub(crate) fn sdk_detail<E>(e: &aws_sdk_sqs::error::SdkError<E>) -> String
where
    E: std::error::Error + aws_sdk_sqs::error::ProvideErrorMetadata + 'static,
{
    use aws_sdk_sqs::error::ProvideErrorMetadata;
    match (e.code(), e.message()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.to_string(),
        _ => aws_sdk_sqs::error::DisplayErrorContext(e).to_string(),
    }
}

/// The SDK's own connect timeout (aws-config's default), kept unless the request timeout is
/// shorter.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// Deadlines of one attempt: connecting (at most [`CONNECT_TIMEOUT`]), and the whole attempt.
fn attempt_timeouts(
    connect: Duration,
    attempt: Duration,
) -> aws_sdk_sqs::config::timeout::TimeoutConfig {
    aws_sdk_sqs::config::timeout::TimeoutConfig::builder()
        .connect_timeout(connect.min(CONNECT_TIMEOUT))
        .operation_attempt_timeout(attempt)
        .build()
}

fn secs(d: Duration) -> i32 {
    d.as_secs().min(i32::MAX as u64) as i32
}

#[async_trait]
impl MessageQueue for SqsQueue {
    fn describe(&self) -> String {
        self.url.clone()
    }

    async fn receive(
        &self,
        max: usize,
        wait: Duration,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        (self.count)("ReceiveMessage", 1);
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .wait_time_seconds(secs(wait))
            .visibility_timeout(secs(visibility))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .customize()
            .config_override(aws_sdk_sqs::config::Builder::default().timeout_config(
                attempt_timeouts(self.request_timeout, wait + self.request_timeout),
            ))
            .send()
            .await
            .map_err(|e| self.err("ReceiveMessage", e))?;
        Ok(out
            .messages()
            .iter()
            .filter_map(|m| {
                let receive_count = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                Some(QueueMessage {
                    id: m.message_id().unwrap_or_default().to_string(),
                    body: m.body().unwrap_or_default().to_string(),
                    receipt: m.receipt_handle()?.to_string(),
                    receive_count,
                })
            })
            .collect())
    }

    async fn delete(&self, receipts: &[String]) -> Result<Vec<String>, QueueError> {
        // Batches of ten, CONCURRENT_CALLS at a time; a batch that fails leaves its own ten
        // for the caller to try again, and the others are deleted. Only when every batch
        // failed is the error returned.
        let outcomes: Vec<(Vec<String>, Result<Vec<String>, QueueError>)> = concurrently(
            receipts.chunks(10).map(<[String]>::to_vec),
            |chunk| async move {
                (self.count)("DeleteMessageBatch", 1);
                let entries = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(r)
                            .build()
                            .expect("id and receipt handle are set")
                    })
                    .collect();
                let sent = self
                    .client
                    .delete_message_batch()
                    .queue_url(&self.url)
                    .set_entries(Some(entries))
                    .send()
                    .await;
                let outcome = match sent {
                    Ok(out) => Ok(out
                        .failed()
                        .iter()
                        .filter_map(|f| f.id().parse::<usize>().ok())
                        .filter_map(|i| chunk.get(i).cloned())
                        .collect()),
                    Err(e) => Err(self.err("DeleteMessageBatch", e)),
                };
                (chunk, outcome)
            },
        )
        .await;
        let (mut failed, mut error, mut any_ok) = (Vec::new(), None::<QueueError>, false);
        for (chunk, outcome) in outcomes {
            match outcome {
                Ok(f) => {
                    any_ok = true;
                    failed.extend(f);
                }
                Err(e) => {
                    failed.extend(chunk);
                    // Retryable if any failed call was.
                    match &mut error {
                        Some(first) => first.retryable |= e.retryable,
                        None => error = Some(e),
                    }
                }
            }
        }
        match error {
            Some(e) if !any_ok => Err(e),
            Some(e) => {
                tracing::warn!(queue = %self.url, error = %e, "some DeleteMessageBatch calls failed; their messages are tried again");
                Ok(failed)
            }
            None => Ok(failed),
        }
    }

    async fn extend(
        &self,
        receipts: &[String],
        visibility: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Extension>, QueueError> {
        // Batches of ten, CONCURRENT_CALLS at a time, each by the deadline: a slow batch costs
        // its own ten deliveries only.
        let answers: Vec<Vec<Extension>> = concurrently(
            receipts.chunks(10).map(<[String]>::to_vec),
            |chunk| async move {
                if tokio::time::Instant::now() >= deadline {
                    return vec![Extension::Refused; chunk.len()];
                }
                (self.count)("ChangeMessageVisibilityBatch", 1);
                let entries = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        ChangeMessageVisibilityBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(r)
                            .visibility_timeout(secs(visibility))
                            .build()
                            .expect("id and receipt handle are set")
                    })
                    .collect();
                let call = self
                    .client
                    .change_message_visibility_batch()
                    .queue_url(&self.url)
                    .set_entries(Some(entries))
                    .send();
                let mut out: Vec<Extension> = chunk
                    .iter()
                    .map(|r| Extension::Renewed(r.clone()))
                    .collect();
                match tokio::time::timeout_at(deadline, call).await {
                    Ok(Ok(res)) => {
                        for f in res.failed() {
                            if let Ok(i) = f.id().parse::<usize>()
                                && let Some(slot) = out.get_mut(i)
                            {
                                *slot = Extension::Refused;
                            }
                        }
                    }
                    // Failed or unanswered: SQS keeps the receipt, and a change that
                    // landed only lengthened the visibility.
                    Ok(Err(_)) | Err(_) => out.fill(Extension::Refused),
                }
                out
            },
        )
        .await;
        Ok(answers.into_iter().flatten().collect())
    }

    async fn retention(&self) -> Result<Option<Duration>, QueueError> {
        (self.count)("GetQueueAttributes", 1);
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::MessageRetentionPeriod)
            .send()
            .await
            .map_err(|e| self.err("GetQueueAttributes", e))?;
        Ok(out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::MessageRetentionPeriod))
            .and_then(|v| v.parse().ok())
            .map(Duration::from_secs))
    }

    async fn approximate_depth(&self) -> Result<Option<u64>, QueueError> {
        (self.count)("GetQueueAttributes", 1);
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .map_err(|e| self.err("GetQueueAttributes", e))?;
        Ok(out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
            .and_then(|v| v.parse().ok()))
    }
}

/// Counts each SQS attempt that failed (no answer, 5xx, 429, 408) as
/// [`crate::FAILED_ATTEMPT`]: the SDK retries them inside the call, out of sight otherwise.
struct FailedAttempts(CountRequests);

impl std::fmt::Debug for FailedAttempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailedAttempts")
    }
}

impl aws_sdk_sqs::config::Intercept for FailedAttempts {
    fn name(&self) -> &'static str {
        "landfall_failed_attempts"
    }

    fn read_after_attempt(
        &self,
        context: &aws_sdk_sqs::config::interceptors::FinalizerInterceptorContextRef<'_>,
        _runtime_components: &aws_sdk_sqs::config::RuntimeComponents,
        _cfg: &mut aws_sdk_sqs::config::ConfigBag,
    ) -> Result<(), aws_sdk_sqs::error::BoxError> {
        let failed = context
            .response()
            .is_none_or(|r| crate::failed_status(r.status().as_u16()));
        if failed {
            (self.0)(crate::FAILED_ATTEMPT, 1);
        }
        Ok(())
    }
}
