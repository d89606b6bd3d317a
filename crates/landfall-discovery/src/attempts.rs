//! Counting the HTTP attempts of a cloud store that failed: object_store retries a request
//! that met a server error (5xx), throttling (429), a timeout (408) or a broken connection
//! inside the store, so a flaky network is invisible above it. [`CountingConnector`] sits
//! under object_store's retries as its HTTP connector and counts each failed attempt as the
//! operation `FAILED` of the stream's request counter
//! (`landfall_storage_requests_total{op="FAILED"}`): retried, or the last one returned as the
//! request's error.
//!
//! [`open_counted_store`] opens a store as `object_store::parse_url_opts` does (the same
//! builders, the same keys, lower-cased), with that connector for cloud stores.

use crate::CountRequests;
use async_trait::async_trait;
use object_store::ObjectStore;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStoreScheme};
use std::sync::Arc;
use url::Url;

/// The operation failed attempts are counted as.
pub const FAILED_ATTEMPT: &str = "FAILED";

/// object_store's own HTTP client, each failed attempt counted.
#[derive(Clone)]
pub struct CountingConnector {
    count: CountRequests,
}

impl CountingConnector {
    pub fn new(count: CountRequests) -> Self {
        CountingConnector { count }
    }
}

impl std::fmt::Debug for CountingConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountingConnector")
    }
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(CountingService {
            inner,
            count: self.count.clone(),
        }))
    }
}

struct CountingService {
    inner: HttpClient,
    count: CountRequests,
}

impl std::fmt::Debug for CountingService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountingService")
    }
}

/// Whether an answer is one the store retries (or fails on after its last retry).
pub fn failed_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

#[async_trait]
impl HttpService for CountingService {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let r = self.inner.execute(req).await;
        let failed = match &r {
            Ok(resp) => failed_status(resp.status().as_u16()),
            Err(_) => true,
        };
        if failed {
            (self.count)(FAILED_ATTEMPT, 1);
        }
        r
    }
}

/// Open the store of `url` as `object_store::parse_url_opts` does; a cloud store's failed
/// attempts are counted with `count`.
pub fn open_counted_store<'a>(
    url: &Url,
    options: impl Iterator<Item = (&'a String, &'a String)>,
    count: CountRequests,
) -> Result<(Arc<dyn ObjectStore>, Path), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot open {}: {e}", crate::shown_url(url));
    let (scheme, path) = ObjectStoreScheme::parse(url).map_err(|e| err(&e))?;
    let connector = CountingConnector::new(count);
    macro_rules! build {
        ($builder:ty) => {{
            let builder =
                options.fold(
                    <$builder>::new().with_url(url.to_string()),
                    |b, (k, v)| match k.to_ascii_lowercase().parse() {
                        Ok(k) => b.with_config(k, v.clone()),
                        Err(_) => b,
                    },
                );
            let store: Arc<dyn ObjectStore> = Arc::new(
                builder
                    .with_http_connector(connector)
                    .build()
                    .map_err(|e| err(&e))?,
            );
            store
        }};
    }
    let store = match scheme {
        ObjectStoreScheme::AmazonS3 => build!(object_store::aws::AmazonS3Builder),
        ObjectStoreScheme::MicrosoftAzure => build!(object_store::azure::MicrosoftAzureBuilder),
        ObjectStoreScheme::GoogleCloudStorage => {
            build!(object_store::gcp::GoogleCloudStorageBuilder)
        }
        // A local directory: object_store's own, with GETs on the calling task
        // (crate::local_store).
        ObjectStoreScheme::Local => Arc::new(crate::local_store::InlineLocal::new()),
        _ => return crate::open_store(url, options),
    };
    let path = Path::parse(path).map_err(|e| err(&e))?;
    Ok((store, path))
}
