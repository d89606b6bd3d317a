//! An Azure Storage Queue fed by Event Grid, through the official azure_storage_queue crate.
//!
//! That crate authenticates with Entra ID tokens or SAS URLs only. A source store configured
//! with an account key (as object_store and Azurite take it) gets an account SAS derived
//! here, with azure_core's HMAC, for the queue service only (`ss=q`, permissions read, add,
//! create, update, process), valid [`SAS_VALIDITY`] and renewed well before it expires. A store with a
//! SAS token uses it as is.
//!
//! Storage Queues have no long polling: a receive that finds nothing is repeated once a second
//! until the wait is over. A delivery is identified by message id and pop receipt (kept
//! together as the receipt); extending its visibility issues a new pop receipt, which replaces
//! the old one. Deletes are one request per message (the service has no batch delete). Calls
//! are counted as `ReceiveMessages`, `DeleteMessage`, `UpdateMessage`, `GetQueueProperties`.

use crate::CountRequests;
use crate::queue::{Extension, MessageQueue, QueueError, QueueMessage, concurrently};
use async_trait::async_trait;
use azure_core::http::{ClientOptions, ExponentialRetryOptions, RetryOptions, Url};
use azure_storage_queue::models::{
    QueueClientGetPropertiesResultHeaders, QueueClientReceiveMessagesOptions,
};
use azure_storage_queue::{QueueClient, QueueClientOptions};
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a derived SAS is valid; it is renewed once less than half is left.
pub const SAS_VALIDITY: Duration = Duration::from_secs(24 * 3600);
/// The storage service version the derived SAS is signed for.
const SAS_VERSION: &str = "2021-12-02";
/// Azurite's well-known development account.
const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where the queue is and how to authenticate, from the source store's options.
#[derive(Clone)]
pub struct AzureQueueSettings {
    pub account: String,
    /// `https://<account>.queue.core.windows.net`, or the emulator's / the configured endpoint
    /// (path-style, account included).
    pub endpoint: String,
    pub queue: String,
    pub auth: AzureAuth,
}

#[derive(Clone)]
pub enum AzureAuth {
    AccountKey(String),
    /// A SAS token (query string, without `?`).
    Sas(String),
}

impl std::fmt::Debug for AzureQueueSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureQueueSettings")
            .field("account", &self.account)
            .field("endpoint", &self.endpoint)
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl AzureQueueSettings {
    /// From object_store-style Azure options (`account_name`, `access_key`, `sas_token`,
    /// `use_emulator`, ...). `endpoint` overrides the queue endpoint.
    pub fn from_store_options<'a>(
        options: impl Iterator<Item = (&'a String, &'a String)>,
        queue: &str,
        endpoint: Option<&str>,
    ) -> Result<Self, String> {
        use object_store::azure::AzureConfigKey as K;
        let (mut account, mut key, mut sas, mut emulator) = (None, None, None, false);
        for (k, v) in options {
            match k.to_ascii_lowercase().parse::<K>() {
                Ok(K::AccountName) => account = Some(v.clone()),
                Ok(K::AccessKey) => key = Some(v.clone()),
                Ok(K::SasKey) => sas = Some(v.trim_start_matches('?').to_string()),
                Ok(K::UseEmulator) => emulator = matches!(v.as_str(), "true" | "1" | "yes" | "on"),
                _ => {}
            }
        }
        if emulator {
            account.get_or_insert_with(|| EMULATOR_ACCOUNT.to_string());
            if sas.is_none() {
                key.get_or_insert_with(|| EMULATOR_KEY.to_string());
            }
        }
        let account = account.ok_or("the source store names no storage account (account_name)")?;
        let endpoint = match endpoint {
            Some(e) => e.trim_end_matches('/').to_string(),
            None if emulator => format!("http://127.0.0.1:10001/{account}"),
            None => format!("https://{account}.queue.core.windows.net"),
        };
        let auth = match (sas, key) {
            (Some(s), _) => AzureAuth::Sas(s),
            (None, Some(k)) => AzureAuth::AccountKey(k),
            (None, None) => {
                return Err("the source store has neither an access key nor a SAS token for the queue (Entra ID is not supported for queues yet)".into());
            }
        };
        Ok(AzureQueueSettings {
            account,
            endpoint,
            queue: queue.to_string(),
            auth,
        })
    }
}

/// An account SAS for the queue service, valid until `expiry`.
pub fn account_sas(account: &str, key: &str, expiry: DateTime<Utc>) -> Result<String, String> {
    let (sp, ss, srt, spr) = ("racup", "q", "sco", "https,http");
    let se = expiry.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    // Account SAS string-to-sign for versions from 2020-12-06: account, permissions, services,
    // resource types, start, expiry, IP, protocol, version, encryption scope, each followed by
    // a newline.
    let to_sign = format!("{account}\n{sp}\n{ss}\n{srt}\n\n{se}\n\n{spr}\n{SAS_VERSION}\n\n");
    let sig = azure_core::hmac::hmac_sha256(&to_sign, &key.to_string().into())
        .map_err(|e| format!("cannot sign a SAS with the account key: {e}"))?;
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    Ok(format!(
        "sv={SAS_VERSION}&ss={ss}&srt={srt}&sp={sp}&se={}&spr={}&sig={}",
        enc(&se),
        enc(spr),
        enc(&sig)
    ))
}

/// A client and when its SAS should be renewed (`None`: a given SAS, never renewed).
type SignedClient = (Arc<QueueClient>, Option<DateTime<Utc>>);

pub struct AzureQueue {
    settings: AzureQueueSettings,
    count: CountRequests,
    /// How long one attempt may go unanswered before it is abandoned and retried.
    request_timeout: std::time::Duration,
    /// The client and when its SAS should be renewed (`None`: a given SAS, never renewed).
    client: Mutex<Option<SignedClient>>,
}

impl AzureQueue {
    pub fn new(settings: AzureQueueSettings, count: CountRequests) -> Self {
        AzureQueue {
            settings,
            count,
            request_timeout: crate::queue::DEFAULT_REQUEST_TIMEOUT,
            client: Mutex::new(None),
        }
    }

    /// Abandon (and retry) an attempt unanswered for `t` (Storage Queues have no long poll).
    pub fn with_request_timeout(mut self, t: std::time::Duration) -> Self {
        self.request_timeout = t;
        self
    }

    fn err(&self, op: &'static str, e: azure_core::Error) -> QueueError {
        let status = e.http_status().map(u16::from);
        QueueError {
            op,
            queue: self.describe(),
            detail: e.to_string(),
            retryable: !matches!(status, Some(400 | 401 | 403 | 404)),
        }
    }

    /// A client with a valid SAS.
    fn client(&self) -> Result<Arc<QueueClient>, QueueError> {
        let mut slot = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, renew)) = slot.as_ref()
            && renew.is_none_or(|r| Utc::now() < r)
        {
            return Ok(c.clone());
        }
        let fail = |detail: String| QueueError {
            op: "connect",
            queue: self.describe(),
            detail,
            retryable: false,
        };
        let (sas, renew) = match &self.settings.auth {
            AzureAuth::Sas(s) => (s.clone(), None),
            AzureAuth::AccountKey(k) => {
                let validity = chrono::Duration::from_std(SAS_VALIDITY).expect("a day");
                let expiry = Utc::now() + validity;
                (
                    account_sas(&self.settings.account, k, expiry).map_err(fail)?,
                    Some(Utc::now() + validity / 2),
                )
            }
        };
        let url = Url::parse(&format!(
            "{}/{}?{sas}",
            self.settings.endpoint, self.settings.queue
        ))
        .map_err(|e| fail(format!("bad queue URL: {e}")))?;
        let options = QueueClientOptions {
            client_options: ClientOptions {
                // The default retries for minutes; a failed round is retried by the worker.
                retry: RetryOptions::exponential(ExponentialRetryOptions {
                    max_retries: 3,
                    max_total_elapsed: azure_core::time::Duration::seconds(20),
                    ..Default::default()
                }),
                per_try_policies: vec![Arc::new(FailedAttempts {
                    count: self.count.clone(),
                    timeout: self.request_timeout,
                })],
                ..Default::default()
            },
            ..Default::default()
        };
        let c =
            Arc::new(QueueClient::new(url, None, Some(options)).map_err(|e| fail(e.to_string()))?);
        *slot = Some((c.clone(), renew));
        Ok(c)
    }

    /// Create the queue if it does not exist (`landfall notifications setup`).
    pub async fn create_if_missing(&self) -> Result<bool, QueueError> {
        let c = self.client()?;
        (self.count)("CreateQueue", 1);
        if c.exists()
            .await
            .map_err(|e| self.err("GetQueueProperties", e))?
        {
            return Ok(false);
        }
        c.create(None)
            .await
            .map_err(|e| self.err("CreateQueue", e))?;
        Ok(true)
    }
}

fn split_receipt(r: &str) -> (&str, &str) {
    r.split_once('\n').unwrap_or((r, ""))
}

#[async_trait]
impl MessageQueue for AzureQueue {
    fn describe(&self) -> String {
        format!("{}/{}", self.settings.endpoint, self.settings.queue)
    }

    async fn receive(
        &self,
        max: usize,
        wait: Duration,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, QueueError> {
        let c = self.client()?;
        let until = std::time::Instant::now() + wait;
        loop {
            (self.count)("ReceiveMessages", 1);
            let rsp = c
                .receive_messages(Some(QueueClientReceiveMessagesOptions {
                    number_of_messages: Some(max.clamp(1, 32) as i32),
                    visibility_timeout: Some(visibility.as_secs().clamp(1, 7 * 86400) as i32),
                    ..Default::default()
                }))
                .await
                .map_err(|e| self.err("ReceiveMessages", e))?;
            let got = rsp
                .into_model()
                .map_err(|e| self.err("ReceiveMessages", e))?
                .items
                .unwrap_or_default();
            let out: Vec<QueueMessage> = got
                .into_iter()
                .filter_map(|m| {
                    let id = m.message_id?;
                    Some(QueueMessage {
                        receipt: format!("{id}\n{}", m.pop_receipt?),
                        id,
                        body: m.message_text.unwrap_or_default(),
                        receive_count: m.dequeue_count.unwrap_or(1).clamp(0, u32::MAX as i64)
                            as u32,
                    })
                })
                .collect();
            let now = std::time::Instant::now();
            if !out.is_empty() || now >= until {
                return Ok(out);
            }
            tokio::time::sleep((until - now).min(Duration::from_secs(1))).await;
        }
    }

    fn renews_receipts(&self) -> bool {
        true
    }

    async fn delete(&self, receipts: &[String]) -> Result<Vec<String>, QueueError> {
        let c = self.client()?;
        // Storage Queues delete one message per call: calls run CONCURRENT_CALLS at a time.
        let outcomes = concurrently(receipts.iter().cloned(), |r: String| {
            let (c, count) = (c.clone(), self.count.clone());
            async move {
                let (id, pop) = split_receipt(&r);
                count("DeleteMessage", 1);
                match c.delete_message(id, pop, None).await {
                    Ok(_) => None,
                    // Gone already (deleted, or expired): nothing to retry.
                    Err(e) if e.http_status().map(u16::from) == Some(404) => None,
                    // Refused, or no answer: the caller tries it again.
                    Err(_) => Some(r),
                }
            }
        })
        .await;
        Ok(outcomes.into_iter().flatten().collect())
    }

    async fn extend(
        &self,
        receipts: &[String],
        visibility: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Extension>, QueueError> {
        let c = self.client()?;
        let name = azure_core::http::headers::HeaderName::from_static("x-ms-popreceipt");
        let secs = visibility.as_secs().clamp(1, 7 * 86400) as i32;
        // One call per message, CONCURRENT_CALLS at a time, each by the deadline (a slow call
        // does not hold the others back; one not started by then is not sent), answers put
        // back in the receipts' order.
        let answers = concurrently(receipts.iter().cloned(), |r: String| {
            let (c, name, count) = (c.clone(), name.clone(), self.count.clone());
            async move {
                // Not sent unless a twelfth of the timeout is left: a call cut off at
                // the deadline would leave its delivery unknown.
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left < visibility / 12 {
                    return Extension::Refused;
                }
                let (id, pop) = split_receipt(&r);
                count("UpdateMessage", 1);
                let call = c.update_message(id, pop, secs, None);
                match tokio::time::timeout_at(deadline, call).await {
                    Ok(Ok(rsp)) => match rsp.headers().get_optional_str(&name) {
                        Some(p) => Extension::Renewed(format!("{id}\n{p}")),
                        None => Extension::Unknown,
                    },
                    // Refused for want of permission: not applied, the pop receipt
                    // still holds. Any other failure is not a clear refusal: after a
                    // lost answer the client's retry carries the pop receipt the applied
                    // first attempt replaced (400 PopReceiptMismatch, or 404).
                    Ok(Err(e))
                        if e.http_status()
                            .map(u16::from)
                            .is_some_and(|s| s == 401 || s == 403) =>
                    {
                        Extension::Refused
                    }
                    // Perhaps applied, under a pop receipt never seen.
                    Ok(Err(_)) | Err(_) => Extension::Unknown,
                }
            }
        })
        .await;
        Ok(answers)
    }

    async fn approximate_depth(&self) -> Result<Option<u64>, QueueError> {
        let c = self.client()?;
        (self.count)("GetQueueProperties", 1);
        let rsp = c
            .get_properties(None)
            .await
            .map_err(|e| self.err("GetQueueProperties", e))?;
        Ok(rsp
            .approximate_messages_count()
            .ok()
            .flatten()
            .map(|n| n.max(0) as u64))
    }
}

/// Bounds each queue attempt by `timeout` (an unanswered attempt fails as an I/O error,
/// which azure_core retries on a new connection) and counts each attempt that failed (no
/// answer, 5xx, 429, 408) as [`crate::FAILED_ATTEMPT`]: azure_core retries them inside the
/// call.
struct FailedAttempts {
    count: CountRequests,
    timeout: std::time::Duration,
}

impl std::fmt::Debug for FailedAttempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailedAttempts")
    }
}

#[async_trait::async_trait]
impl azure_core::http::policies::Policy for FailedAttempts {
    async fn send(
        &self,
        ctx: &azure_core::http::Context,
        request: &mut azure_core::http::Request,
        next: &[Arc<dyn azure_core::http::policies::Policy>],
    ) -> azure_core::http::policies::PolicyResult {
        let Some((first, rest)) = next.split_first() else {
            return Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Other,
                "no transport after the attempt counter",
            ));
        };
        let r = match tokio::time::timeout(self.timeout, first.send(ctx, request, rest)).await {
            Ok(r) => r,
            Err(_) => Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Io,
                format!("no answer within {} s", self.timeout.as_secs_f64()),
            )),
        };
        let failed = match &r {
            Ok(resp) => crate::failed_status(u16::from(resp.status())),
            Err(_) => true,
        };
        if failed {
            (self.count)(crate::FAILED_ATTEMPT, 1);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_emulator_gets_its_account_and_key() {
        let opts = [("use_emulator".to_string(), "true".to_string())];
        let s = AzureQueueSettings::from_store_options(
            opts.iter().map(|(k, v)| (k, v)),
            "events",
            None,
        )
        .unwrap();
        assert_eq!(s.account, "devstoreaccount1");
        assert_eq!(s.endpoint, "http://127.0.0.1:10001/devstoreaccount1");
        assert!(matches!(s.auth, AzureAuth::AccountKey(_)));
        let none: [(String, String); 0] = [];
        assert!(
            AzureQueueSettings::from_store_options(none.iter().map(|(k, v)| (k, v)), "q", None)
                .is_err()
        );
    }

    #[test]
    fn an_account_sas_is_signed_for_the_queue_service() {
        let expiry = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        let sas = account_sas("devstoreaccount1", EMULATOR_KEY, expiry).unwrap();
        assert!(sas.starts_with("sv=2021-12-02&ss=q&srt=sco&sp=racup&se=2026-12-01T00%3A00%3A00Z&spr=https%2Chttp&sig="), "{sas}");
        // Deterministic for the same inputs.
        assert_eq!(
            sas,
            account_sas("devstoreaccount1", EMULATOR_KEY, expiry).unwrap()
        );
    }
}
