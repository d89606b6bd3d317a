//! S3 listing that survives keys object_store cannot represent.
//!
//! object_store parses a whole ListObjectsV2 page at once and fails the page when one key is
//! not a valid [`Path`] (an empty segment such as `a//b`, a `.` or `..` segment, a trailing
//! `/` on a non-empty object). One such key would stop a stream's discovery for good. This
//! lister sends ListObjectsV2 itself, with object_store's own HTTP client, credential provider
//! and SigV4 signer (the same configuration keys as the store), asks for URL-encoded keys, and
//! hands every key back: representable ones as [`ObjectMeta`], the others as
//! [`Listed::Unrepresentable`], which discovery passes over with a counted reason.

use chrono::{DateTime, Utc};
use futures::stream::{BoxStream, StreamExt};
use object_store::ClientOptions;
use object_store::ObjectMeta;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer, AwsCredentialProvider};
use object_store::client::{HttpClient, HttpConnector, HttpRequestBody, ReqwestConnector};
use object_store::path::Path;
use serde::Deserialize;
use url::Url;

/// One listed object.
pub enum Listed {
    Object(ObjectMeta),
    /// A key object_store cannot address (e.g. `a//b`), with its modification time: it can be
    /// neither read nor ingested.
    Unrepresentable(String, DateTime<Utc>),
}

/// ListObjectsV2 for one S3 bucket.
#[derive(Clone)]
pub struct S3Lister {
    client: HttpClient,
    credentials: AwsCredentialProvider,
    /// `https://bucket.s3.region.amazonaws.com`, `https://s3.region.amazonaws.com/bucket`, or
    /// the configured endpoint (plus `/bucket` unless virtual-hosted).
    bucket_url: String,
    region: String,
    /// `aws_skip_signature`: anonymous requests (public buckets).
    skip_signature: bool,
    /// `aws_request_payer`: requester-pays buckets.
    request_payer: bool,
    /// Counts each ListObjectsV2 request (`LIST`).
    count: Option<crate::CountRequests>,
}

/// Booleans as object_store reads its configuration.
fn truthy(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "1" | "true" | "on" | "yes" | "y"
    )
}

/// The bucket's base URL, as object_store's builder computes it.
fn bucket_url(bucket: &str, region: &str, endpoint: Option<&str>, virtual_hosted: bool) -> String {
    match (endpoint, virtual_hosted) {
        (Some(e), true) => e.trim_end_matches('/').to_string(),
        (Some(e), false) => format!("{}/{bucket}", e.trim_end_matches('/')),
        (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
        (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
    }
}

/// How often one page is tried before the listing round fails (throttling, resets).
const PAGE_ATTEMPTS: u32 = 4;

/// Query values encoded as SigV4 canonicalises them: everything but `A-Za-z0-9-_.~`.
const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

impl std::fmt::Debug for S3Lister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Lister")
            .field("bucket_url", &self.bucket_url)
            .field("region", &self.region)
            .finish()
    }
}

impl S3Lister {
    /// A lister for an `s3://` (or `s3a://`) URL with the store's options; `None` for other
    /// schemes, and for configurations whose requests it would not sign or address exactly as
    /// object_store does (S3 Express zonal endpoints): those are listed by object_store.
    pub fn for_url<'a>(
        url: &Url,
        options: impl Iterator<Item = (&'a String, &'a String)>,
    ) -> Result<Option<Self>, String> {
        if !matches!(url.scheme(), "s3" | "s3a") {
            return Ok(None);
        }
        let err = |e: &dyn std::fmt::Display| format!("cannot open {url}: {e}");
        let mut builder = AmazonS3Builder::new().with_url(url.to_string());
        let mut client = ClientOptions::new();
        for (k, v) in options {
            if let Ok(key) = k.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                if let AmazonS3ConfigKey::Client(c) = &key {
                    client = client.with_config(*c, v.clone());
                }
                builder = builder.with_config(key, v.clone());
            }
        }
        let config = |k: AmazonS3ConfigKey| builder.get_config_value(&k);
        let flag = |k: AmazonS3ConfigKey| config(k).is_some_and(|v| truthy(&v));
        let (skip_signature, request_payer) = (
            flag(AmazonS3ConfigKey::SkipSignature),
            flag(AmazonS3ConfigKey::RequestPayer),
        );
        // As object_store: the URL's host names the bucket (`with_url` is applied at build).
        let bucket = url
            .host_str()
            .map(str::to_string)
            .or_else(|| config(AmazonS3ConfigKey::Bucket))
            .filter(|b| !b.is_empty())
            .ok_or_else(|| err(&"no bucket"))?;
        if flag(AmazonS3ConfigKey::S3Express) || bucket.ends_with("--x-s3") {
            return Ok(None);
        }
        let region = config(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let endpoint =
            config(AmazonS3ConfigKey::S3Endpoint).or_else(|| config(AmazonS3ConfigKey::Endpoint));
        let bucket_url = bucket_url(
            &bucket,
            &region,
            endpoint.as_deref(),
            flag(AmazonS3ConfigKey::VirtualHostedStyleRequest),
        );
        let store = builder.build().map_err(|e| err(&e))?;
        let client = ReqwestConnector::default()
            .connect(&client)
            .map_err(|e| err(&e))?;
        Ok(Some(S3Lister {
            client,
            credentials: store.credentials().clone(),
            bucket_url,
            region,
            skip_signature,
            request_payer,
            count: None,
        }))
    }

    /// Count each ListObjectsV2 request with `count`.
    pub fn with_counter(mut self, count: crate::CountRequests) -> Self {
        self.count = Some(count);
        self
    }

    /// Every object under `prefix` (all levels), page by page, in key order.
    pub fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<Listed, String>> {
        self.list_after(prefix, None)
    }

    /// The objects under `prefix` whose keys sort after `start_after` (ListObjectsV2
    /// `start-after`; all of them when `None`), page by page, in key order. Every page is one
    /// counted `LIST` request, as for a full listing.
    pub fn list_after(
        &self,
        prefix: Option<&Path>,
        start_after: Option<&str>,
    ) -> BoxStream<'static, Result<Listed, String>> {
        let this = self.clone();
        let prefix = prefix.map(|p| format!("{}/", p.as_ref()));
        let start_after = start_after.map(str::to_string);
        futures::stream::try_unfold(Some(None::<String>), move |token| {
            let (this, prefix, start_after) = (this.clone(), prefix.clone(), start_after.clone());
            async move {
                let Some(token) = token else {
                    return Ok(None);
                };
                let page = this
                    .page_with_retries(prefix.as_deref(), start_after.as_deref(), token.as_deref())
                    .await?;
                let next = page
                    .is_truncated
                    .then_some(page.next_continuation_token.clone());
                if page.is_truncated && next.as_ref().is_none_or(|t| t.is_none()) {
                    return Err(
                        "ListObjectsV2: a truncated page without a continuation token".to_string(),
                    );
                }
                if token.is_some() && next.as_ref() == Some(&token) {
                    return Err(
                        "ListObjectsV2: the store returned the same continuation token twice"
                            .to_string(),
                    );
                }
                let encoded = page.encoding_type.as_deref() == Some("url");
                let items: Vec<Result<Listed, String>> = page
                    .contents
                    .into_iter()
                    .map(|c| Ok(c.listed(encoded)))
                    .collect();
                Ok(Some((futures::stream::iter(items), next)))
            }
        })
        .map(|page| match page {
            Ok(items) => items.boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
    }

    /// One page, tried again with backoff after errors that may pass (5xx, 429, resets).
    async fn page_with_retries(
        &self,
        prefix: Option<&str>,
        start_after: Option<&str>,
        token: Option<&str>,
    ) -> Result<ListPage, String> {
        let mut wait = std::time::Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match self.page(prefix, start_after, token).await {
                Ok(p) => return Ok(p),
                Err((e, true)) if attempt < PAGE_ATTEMPTS => {
                    tracing::debug!(error = %e, attempt, "ListObjectsV2 page failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait *= 3;
                    attempt += 1;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One ListObjectsV2 call; on error, the message and whether trying again may help.
    async fn page(
        &self,
        prefix: Option<&str>,
        start_after: Option<&str>,
        token: Option<&str>,
    ) -> Result<ListPage, (String, bool)> {
        let fixed = |e: String| (e, false);
        let mut url = Url::parse(&self.bucket_url).map_err(|e| fixed(e.to_string()))?;
        url.set_query(Some(&list_query(prefix, start_after, token, max_keys())));
        let mut request = http::Request::builder()
            .method(http::Method::GET)
            .uri(url.as_str())
            .body(HttpRequestBody::empty())
            .map_err(|e| fixed(e.to_string()))?;
        if !self.skip_signature {
            let credential = self
                .credentials
                .get_credential()
                .await
                .map_err(|e| (format!("S3 credentials: {e}"), true))?;
            AwsAuthorizer::new(&credential, "s3", &self.region)
                .with_request_payer(self.request_payer)
                .authorize(&mut request, None);
        } else if self.request_payer {
            request.headers_mut().insert(
                "x-amz-request-payer",
                http::HeaderValue::from_static("requester"),
            );
        }
        let failed =
            |e: &dyn std::fmt::Display| (format!("ListObjectsV2 {}: {e}", self.bucket_url), true);
        if let Some(count) = &self.count {
            count("LIST", 1);
        }
        let response = self.client.execute(request).await.map_err(|e| failed(&e))?;
        let status = response.status();
        let body = response.into_body().bytes().await.map_err(|e| failed(&e))?;
        let body = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let again = status.is_server_error() || status.as_u16() == 429;
            return Err((
                format!(
                    "ListObjectsV2 {}: HTTP {status}: {}",
                    self.bucket_url,
                    body.chars().take(500).collect::<String>()
                ),
                again,
            ));
        }
        parse_page(&body).map_err(fixed)
    }
}

/// The query of one ListObjectsV2 request. `start-after` goes on every page, as object_store
/// sends it: S3 resumes from the continuation token once there is one.
fn list_query(
    prefix: Option<&str>,
    start_after: Option<&str>,
    token: Option<&str>,
    max_keys: Option<u32>,
) -> String {
    let mut query = String::from("list-type=2&encoding-type=url");
    if let Some(n) = max_keys {
        query.push_str(&format!("&max-keys={n}"));
    }
    for (name, value) in [
        ("prefix", prefix),
        ("start-after", start_after),
        ("continuation-token", token),
    ] {
        if let Some(v) = value {
            query.push_str(&format!(
                "&{name}={}",
                percent_encoding::utf8_percent_encode(v, QUERY)
            ));
        }
    }
    query
}

/// `LANDFALL_S3_LIST_MAX_KEYS`: a smaller page than S3's 1,000 keys, so tests can drive the
/// continuation of a listing with a few objects.
fn max_keys() -> Option<u32> {
    static N: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("LANDFALL_S3_LIST_MAX_KEYS")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListPage {
    #[serde(default)]
    contents: Vec<Contents>,
    #[serde(default)]
    is_truncated: bool,
    #[serde(default)]
    next_continuation_token: Option<String>,
    /// `url` when the store encoded the keys as asked; some S3-compatible stores ignore it.
    #[serde(default)]
    encoding_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Contents {
    key: String,
    last_modified: DateTime<Utc>,
    size: u64,
    #[serde(default, rename = "ETag")]
    e_tag: Option<String>,
}

impl Contents {
    /// With `encoding-type=url`, keys are percent-encoded (`+` for a space, as S3 does). A key
    /// that does not decode, or that object_store would address as another path (an empty,
    /// `.` or `..` segment; a leading or trailing `/` on an object with content), is
    /// unrepresentable: reading "it" would read something else.
    fn listed(self, encoded: bool) -> Listed {
        let key = if encoded {
            match percent_encoding::percent_decode_str(&self.key.replace('+', " ")).decode_utf8() {
                Ok(k) => k.into_owned(),
                Err(_) => return Listed::Unrepresentable(self.key, self.last_modified),
            }
        } else {
            self.key
        };
        let marker = self.size == 0 && key.ends_with('/');
        match Path::parse(&key) {
            Ok(location) if location.as_ref() == key || marker => Listed::Object(ObjectMeta {
                location,
                last_modified: self.last_modified,
                size: self.size,
                e_tag: self.e_tag,
                version: None,
            }),
            _ => Listed::Unrepresentable(key, self.last_modified),
        }
    }
}

fn parse_page(body: &str) -> Result<ListPage, String> {
    quick_xml::de::from_str(body).map_err(|e| format!("ListObjectsV2: unreadable response: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>in/</Prefix><KeyCount>5</KeyCount><MaxKeys>1000</MaxKeys>
  ENCODING<IsTruncated>true</IsTruncated>
  <Contents><Key>in/a%2Bb+c.json</Key><LastModified>2026-11-30T10:00:00.000Z</LastModified>
    <ETag>&quot;abc&quot;</ETag><Size>10</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>in/x//y.json</Key><LastModified>2026-11-30T10:00:01.000Z</LastModified>
    <ETag>&quot;def&quot;</ETag><Size>11</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>in/%C3%A9t%C3%A9.json</Key><LastModified>2026-11-30T10:00:02.000Z</LastModified>
    <ETag>&quot;ghi&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>in/full.json/</Key><LastModified>2026-11-30T10:00:03.000Z</LastModified>
    <ETag>&quot;jkl&quot;</ETag><Size>13</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>in/bad%FF.json</Key><LastModified>2026-11-30T10:00:04.000Z</LastModified>
    <ETag>&quot;mno&quot;</ETag><Size>14</Size><StorageClass>STANDARD</StorageClass></Contents>
  <NextContinuationToken>tok/en==</NextContinuationToken>
</ListBucketResult>"#;

    fn listed(encoding: &str) -> Vec<Listed> {
        let page = parse_page(&PAGE.replace("ENCODING", encoding)).unwrap();
        assert!(page.is_truncated);
        assert_eq!(page.next_continuation_token.as_deref(), Some("tok/en=="));
        let encoded = page.encoding_type.as_deref() == Some("url");
        page.contents
            .into_iter()
            .map(|c| c.listed(encoded))
            .collect()
    }

    fn object(l: &Listed) -> &str {
        match l {
            Listed::Object(m) => m.location.as_ref(),
            Listed::Unrepresentable(k, _) => panic!("{k} is representable"),
        }
    }

    fn unrepresentable(l: &Listed) -> &str {
        match l {
            Listed::Unrepresentable(k, _) => k,
            Listed::Object(m) => panic!("{} is not representable", m.location),
        }
    }

    #[test]
    fn url_encoded_keys_are_decoded_and_odd_ones_passed_over() {
        let l = listed("<EncodingType>url</EncodingType>");
        assert_eq!(object(&l[0]), "in/a+b c.json");
        if let Listed::Object(m) = &l[0] {
            assert_eq!((m.size, m.e_tag.as_deref()), (10, Some("\"abc\"")));
        }
        assert_eq!(unrepresentable(&l[1]), "in/x//y.json");
        assert_eq!(object(&l[2]), "in/été.json");
        // object_store would read `in/full.json`, another object.
        assert_eq!(unrepresentable(&l[3]), "in/full.json/");
        assert_eq!(unrepresentable(&l[4]), "in/bad%FF.json");
    }

    #[test]
    fn keys_are_taken_as_they_are_when_the_store_did_not_encode_them() {
        let l = listed("");
        assert_eq!(object(&l[0]), "in/a%2Bb+c.json");
        assert_eq!(object(&l[2]), "in/%C3%A9t%C3%A9.json");
        assert_eq!(object(&l[4]), "in/bad%FF.json");
    }

    #[test]
    fn start_after_is_sent_encoded_on_every_page() {
        assert_eq!(
            list_query(Some("in/"), None, None, None),
            "list-type=2&encoding-type=url&prefix=in%2F"
        );
        assert_eq!(
            list_query(
                Some("in/"),
                Some("in/2026/01/02/a b+é.json"),
                Some("tok/en=="),
                Some(50)
            ),
            "list-type=2&encoding-type=url&max-keys=50&prefix=in%2F\
             &start-after=in%2F2026%2F01%2F02%2Fa%20b%2B%C3%A9.json&continuation-token=tok%2Fen%3D%3D"
        );
    }

    #[test]
    fn an_empty_last_page_parses() {
        let page = parse_page(
            "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>",
        )
        .unwrap();
        assert!(page.contents.is_empty() && !page.is_truncated);
    }

    #[test]
    fn bucket_urls_match_object_store() {
        assert_eq!(
            bucket_url("b", "eu-west-1", None, false),
            "https://s3.eu-west-1.amazonaws.com/b"
        );
        assert_eq!(
            bucket_url("b", "eu-west-1", None, true),
            "https://b.s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            bucket_url("b", "r", Some("http://127.0.0.1:9000/"), false),
            "http://127.0.0.1:9000/b"
        );
        assert_eq!(
            bucket_url("b", "r", Some("https://b.minio.example"), true),
            "https://b.minio.example"
        );
    }

    fn lister(options: &[(&str, &str)]) -> Option<S3Lister> {
        let opts: Vec<(String, String)> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        S3Lister::for_url(
            &Url::parse("s3://bucket/in/").unwrap(),
            opts.iter().map(|(k, v)| (k, v)),
        )
        .unwrap()
    }

    #[test]
    fn configuration_follows_object_store() {
        let base = [
            ("aws_access_key_id", "k"),
            ("aws_secret_access_key", "s"),
            ("aws_region", "eu-west-1"),
        ];
        let l = lister(&base).unwrap();
        assert_eq!(l.bucket_url, "https://s3.eu-west-1.amazonaws.com/bucket");
        // The URL names the bucket even when an option names another; the S3 endpoint wins
        // over the generic one; booleans as object_store reads them.
        let mut o = base.to_vec();
        o.extend([
            ("aws_bucket", "other"),
            ("aws_endpoint", "http://generic:1"),
            ("aws_endpoint_url_s3", "http://s3only:2"),
            ("aws_allow_http", "yes"),
            ("aws_request_payer", "1"),
            ("aws_skip_signature", "on"),
        ]);
        let l = lister(&o).unwrap();
        assert_eq!(l.bucket_url, "http://s3only:2/bucket");
        assert!(l.request_payer && l.skip_signature);
        // S3 Express is left to object_store.
        let mut o = base.to_vec();
        o.push(("aws_s3_express", "true"));
        assert!(lister(&o).is_none());
        assert!(
            S3Lister::for_url(&Url::parse("file:///tmp/x").unwrap(), std::iter::empty())
                .unwrap()
                .is_none()
        );
    }
}
