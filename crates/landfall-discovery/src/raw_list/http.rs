//! What the cloud listers share: the listed entry, object_store's HTTP client and options,
//! retries of a page, and paging a listing into a stream.

use chrono::{DateTime, Utc};
use futures::stream::{BoxStream, StreamExt};
use object_store::client::{HttpClient, HttpConnector, ReqwestConnector};
use object_store::path::Path;
use object_store::{ClientConfigKey, ClientOptions, ObjectMeta};

/// One listed object.
pub enum Listed {
    Object(ObjectMeta),
    /// A key object_store cannot address (e.g. `a//b`), with its modification time: it can be
    /// neither read nor ingested.
    Unrepresentable(String, DateTime<Utc>),
}

/// A listed key checked against what object_store can address. A key that object_store would
/// address as another path (an empty, `.` or `..` segment; a leading or trailing `/` on an
/// object with content) is unrepresentable: reading "it" would read something else. A
/// zero-byte "folder/" marker stays an object (discovery passes it over as empty).
pub(crate) fn listed(
    key: String,
    size: u64,
    last_modified: DateTime<Utc>,
    e_tag: Option<String>,
) -> Listed {
    let marker = size == 0 && key.ends_with('/');
    match Path::parse(&key) {
        Ok(location) if location.as_ref() == key || marker => Listed::Object(ObjectMeta {
            location,
            last_modified,
            size,
            e_tag,
            version: None,
        }),
        _ => Listed::Unrepresentable(key, last_modified),
    }
}

/// Booleans as object_store reads its configuration.
pub(crate) fn truthy(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "1" | "true" | "on" | "yes" | "y"
    )
}

/// A store's options applied as object_store applies them: every key of the store's kind `K`
/// to its builder (`apply`), and the HTTP client's keys among them (`client_key`) to the
/// client options the lister connects with. Keys of other stores are ignored.
pub(crate) fn configure<'a, K: std::str::FromStr, B>(
    options: impl Iterator<Item = (&'a String, &'a String)>,
    mut builder: B,
    client_key: impl Fn(&K) -> Option<ClientConfigKey>,
    apply: impl Fn(B, K, String) -> B,
) -> (B, ClientOptions) {
    let mut client = ClientOptions::new();
    for (k, v) in options {
        if let Ok(key) = k.to_ascii_lowercase().parse::<K>() {
            if let Some(c) = client_key(&key) {
                client = client.with_config(c, v.clone());
            }
            builder = apply(builder, key, v.clone());
        }
    }
    (builder, client)
}

/// The HTTP client a lister sends its requests with (object_store's own).
pub(crate) fn connect(client: &ClientOptions) -> Result<HttpClient, String> {
    ReqwestConnector::default()
        .connect(client)
        .map_err(|e| e.to_string())
}

/// `LANDFALL_S3_LIST_MAX_KEYS`: a smaller page than the stores' 1,000 (S3 `max-keys`, Azure
/// `maxresults`), so tests can drive the continuation of a listing with a few objects.
pub(crate) fn page_size() -> Option<u32> {
    static N: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("LANDFALL_S3_LIST_MAX_KEYS")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// How often one page is tried before the listing round fails (throttling, resets).
const PAGE_ATTEMPTS: u32 = 4;

/// One page request, tried again with backoff after errors that may pass (5xx, 429, resets):
/// `page` returns the message and whether trying again may help.
pub(crate) async fn with_retries<T, F, Fut>(what: &str, mut page: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, (String, bool)>>,
{
    let mut wait = std::time::Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match page().await {
            Ok(p) => return Ok(p),
            Err((e, true)) if attempt < PAGE_ATTEMPTS => {
                tracing::debug!(error = %e, attempt, "{what} page failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 3;
                attempt += 1;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// A listing as a stream of keys from a page function: `page(token)` returns one page's
/// keys and the next page's token (`None`: the last page). The first error ends the stream.
pub(crate) fn paged<F, Fut>(page: F) -> BoxStream<'static, Result<Listed, String>>
where
    F: Fn(Option<String>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(Vec<Listed>, Option<String>), String>> + Send,
{
    futures::stream::try_unfold(Some(None::<String>), move |token| {
        let page = page.clone();
        async move {
            let Some(token) = token else {
                return Ok(None);
            };
            let (items, next) = page(token).await?;
            let items: Vec<Result<Listed, String>> = items.into_iter().map(Ok).collect();
            Ok(Some((futures::stream::iter(items), next.map(Some))))
        }
    })
    .map(|page| match page {
        Ok(items) => items.boxed(),
        Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
    })
    .flatten()
    .boxed()
}

/// Send one signed list request (counted as a `LIST`; a failed one also as
/// [`crate::FAILED_ATTEMPT`]) and return its body; on error, the message (naming `what`) and
/// whether trying again may help (network, 5xx, 429).
pub(crate) async fn send(
    client: &object_store::client::HttpClient,
    request: object_store::client::HttpRequest,
    what: &str,
    count: Option<&crate::CountRequests>,
) -> Result<String, (String, bool)> {
    let failed = |e: &dyn std::fmt::Display| {
        if let Some(count) = count {
            count(crate::FAILED_ATTEMPT, 1);
        }
        (format!("{what}: {e}"), true)
    };
    if let Some(count) = count {
        count("LIST", 1);
    }
    let response = client.execute(request).await.map_err(|e| failed(&e))?;
    let status = response.status();
    let body = response.into_body().bytes().await.map_err(|e| failed(&e))?;
    let body = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        if let Some(count) = count.filter(|_| crate::failed_status(status.as_u16())) {
            count(crate::FAILED_ATTEMPT, 1);
        }
        let again = status.is_server_error() || status.as_u16() == 429;
        return Err((
            format!(
                "{what}: HTTP {status}: {}",
                body.chars().take(500).collect::<String>()
            ),
            again,
        ));
    }
    Ok(body)
}
