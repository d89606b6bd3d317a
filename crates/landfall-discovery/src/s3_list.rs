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
    /// A key object_store cannot address (e.g. `a//b`): it can be neither read nor ingested.
    Unrepresentable(String),
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
}

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
    /// schemes.
    pub fn for_url<'a>(
        url: &Url,
        options: impl Iterator<Item = (&'a String, &'a String)>,
    ) -> Result<Option<Self>, String> {
        if !matches!(url.scheme(), "s3" | "s3a") {
            return Ok(None);
        }
        let err = |e: &dyn std::fmt::Display| format!("cannot open {url}: {e}");
        let mut allow_http = false;
        let mut builder = AmazonS3Builder::new().with_url(url.to_string());
        for (k, v) in options {
            let key = k.to_ascii_lowercase();
            if key == "allow_http" {
                allow_http = v.eq_ignore_ascii_case("true");
            }
            if let Ok(k) = key.parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(k, v.clone());
            }
        }
        let config = |k: AmazonS3ConfigKey| builder.get_config_value(&k);
        // `with_url` is parsed only by `build`: the bucket is the URL's host unless set.
        let bucket = config(AmazonS3ConfigKey::Bucket)
            .or_else(|| url.host_str().map(str::to_string))
            .filter(|b| !b.is_empty())
            .ok_or_else(|| err(&"no bucket"))?;
        let region = config(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let virtual_hosted = config(AmazonS3ConfigKey::VirtualHostedStyleRequest)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let bucket_url = match (config(AmazonS3ConfigKey::Endpoint), virtual_hosted) {
            (Some(e), true) => e.trim_end_matches('/').to_string(),
            (Some(e), false) => format!("{}/{bucket}", e.trim_end_matches('/')),
            (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
            (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
        };
        let store = builder.build().map_err(|e| err(&e))?;
        let client = ReqwestConnector::default()
            .connect(&ClientOptions::new().with_allow_http(allow_http))
            .map_err(|e| err(&e))?;
        Ok(Some(S3Lister {
            client,
            credentials: store.credentials().clone(),
            bucket_url,
            region,
        }))
    }

    /// Every object under `prefix` (all levels), page by page, in key order.
    pub fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<Listed, String>> {
        let this = self.clone();
        let prefix = prefix.map(|p| format!("{}/", p.as_ref()));
        futures::stream::try_unfold(Some(None::<String>), move |token| {
            let (this, prefix) = (this.clone(), prefix.clone());
            async move {
                let Some(token) = token else {
                    return Ok(None);
                };
                let page = this.page(prefix.as_deref(), token.as_deref()).await?;
                let next = page
                    .is_truncated
                    .then_some(page.next_continuation_token.clone());
                if page.is_truncated && next.as_ref().is_none_or(|t| t.is_none()) {
                    return Err(
                        "ListObjectsV2: a truncated page without a continuation token".to_string(),
                    );
                }
                let items: Vec<Result<Listed, String>> =
                    page.contents.into_iter().map(Contents::listed).collect();
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

    async fn page(&self, prefix: Option<&str>, token: Option<&str>) -> Result<ListPage, String> {
        let mut url = Url::parse(&self.bucket_url).map_err(|e| e.to_string())?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("list-type", "2");
            q.append_pair("encoding-type", "url");
            if let Some(n) = max_keys() {
                q.append_pair("max-keys", &n.to_string());
            }
            if let Some(p) = prefix {
                q.append_pair("prefix", p);
            }
            if let Some(t) = token {
                q.append_pair("continuation-token", t);
            }
        }
        let credential = self
            .credentials
            .get_credential()
            .await
            .map_err(|e| format!("S3 credentials: {e}"))?;
        let mut request = http::Request::builder()
            .method(http::Method::GET)
            .uri(url.as_str())
            .body(HttpRequestBody::empty())
            .map_err(|e| e.to_string())?;
        AwsAuthorizer::new(&credential, "s3", &self.region).authorize(&mut request, None);
        let response = self
            .client
            .execute(request)
            .await
            .map_err(|e| format!("ListObjectsV2 {}: {e}", self.bucket_url))?;
        let status = response.status();
        let body = response
            .into_body()
            .bytes()
            .await
            .map_err(|e| format!("ListObjectsV2 {}: {e}", self.bucket_url))?;
        let body = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(format!(
                "ListObjectsV2 {}: HTTP {status}: {}",
                self.bucket_url,
                body.chars().take(500).collect::<String>()
            ));
        }
        parse_page(&body)
    }
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
    /// `encoding-type=url` keys are percent-encoded (with `+` for spaces, as S3 does).
    fn listed(self) -> Result<Listed, String> {
        let raw = self.key.replace('+', " ");
        let key = percent_encoding::percent_decode_str(&raw)
            .decode_utf8()
            .map_err(|e| format!("ListObjectsV2: key {:?} is not UTF-8: {e}", self.key))?
            .into_owned();
        Ok(match Path::parse(&key) {
            Ok(location) => Listed::Object(ObjectMeta {
                location,
                last_modified: self.last_modified,
                size: self.size,
                e_tag: self.e_tag,
                version: None,
            }),
            Err(_) => Listed::Unrepresentable(key),
        })
    }
}

fn parse_page(body: &str) -> Result<ListPage, String> {
    quick_xml::de::from_str(body).map_err(|e| format!("ListObjectsV2: unreadable response: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_page_with_unrepresentable_and_encoded_keys() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>in/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>
  <EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>
  <Contents><Key>in/a%2Bb+c.json</Key><LastModified>2026-11-30T10:00:00.000Z</LastModified>
    <ETag>&quot;abc&quot;</ETag><Size>10</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>in/x//y.json</Key><LastModified>2026-11-30T10:00:01.000Z</LastModified>
    <ETag>&quot;def&quot;</ETag><Size>11</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>in/%C3%A9t%C3%A9.json</Key><LastModified>2026-11-30T10:00:02.000Z</LastModified>
    <ETag>&quot;ghi&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>
  <NextContinuationToken>tok/en==</NextContinuationToken>
</ListBucketResult>"#;
        let page = parse_page(body).unwrap();
        assert!(page.is_truncated);
        assert_eq!(page.next_continuation_token.as_deref(), Some("tok/en=="));
        let listed: Vec<_> = page
            .contents
            .into_iter()
            .map(|c| c.listed().unwrap())
            .collect();
        match &listed[0] {
            Listed::Object(m) => {
                assert_eq!(m.location.as_ref(), "in/a+b c.json");
                assert_eq!(m.size, 10);
                assert_eq!(m.e_tag.as_deref(), Some("\"abc\""));
            }
            Listed::Unrepresentable(k) => panic!("{k} is representable"),
        }
        assert!(matches!(&listed[1], Listed::Unrepresentable(k) if k == "in/x//y.json"));
        assert!(matches!(&listed[2], Listed::Object(m) if m.location.as_ref() == "in/été.json"));
    }

    #[test]
    fn an_empty_last_page_parses() {
        let page = parse_page(
            "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>",
        )
        .unwrap();
        assert!(page.contents.is_empty() && !page.is_truncated);
    }
}
