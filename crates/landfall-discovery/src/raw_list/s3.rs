//! ListObjectsV2 of S3 (and S3-compatible stores) and of GCS's XML API, keeping keys
//! object_store cannot represent (see [`super`]).
//!
//! S3 requests carry SigV4 from object_store's signer (or none with `aws_skip_signature`) and
//! ask for URL-encoded keys; GCS requests carry object_store's OAuth bearer token (GCS and
//! its emulators may ignore `encoding-type`: keys then come as they are).

use super::http::{
    Listed, configure, connect, listed, page_size, paged, send, truthy, with_retries,
};
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer, AwsCredentialProvider};
use object_store::client::{HttpClient, HttpRequestBody};
use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use serde::Deserialize;
use url::Url;

/// How a request is authorised.
#[derive(Clone)]
enum Auth {
    /// SigV4 with object_store's AWS credentials.
    Aws {
        credentials: AwsCredentialProvider,
        region: String,
        /// `aws_request_payer`: requester-pays buckets.
        request_payer: bool,
    },
    /// `aws_skip_signature`: anonymous requests (public buckets).
    Anonymous { request_payer: bool },
    /// GCS: object_store's OAuth bearer token (empty with `disable_oauth`).
    Gcp(GcpCredentialProvider),
}

/// ListObjectsV2 for one S3 bucket.
#[derive(Clone)]
pub struct S3Lister {
    client: HttpClient,
    auth: Auth,
    /// `https://bucket.s3.region.amazonaws.com`, `https://s3.region.amazonaws.com/bucket`, or
    /// the configured endpoint (plus `/bucket` unless virtual-hosted); GCS:
    /// `https://storage.googleapis.com/bucket` or the configured base URL plus `/bucket`.
    bucket_url: String,
    /// Counts each ListObjectsV2 request (`LIST`).
    count: Option<crate::CountRequests>,
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
        let err = |e: &dyn std::fmt::Display| format!("cannot open {}: {e}", crate::shown_url(url));
        let (builder, client) = configure(
            options,
            AmazonS3Builder::new().with_url(url.to_string()),
            |k| match k {
                AmazonS3ConfigKey::Client(c) => Some(*c),
                _ => None,
            },
            AmazonS3Builder::with_config,
        );
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
        let client = connect(&client).map_err(|e| err(&e))?;
        let auth = if skip_signature {
            Auth::Anonymous { request_payer }
        } else {
            Auth::Aws {
                credentials: store.credentials().clone(),
                region,
                request_payer,
            }
        };
        Ok(Some(S3Lister {
            client,
            auth,
            bucket_url,
            count: None,
        }))
    }

    /// A lister for a `gs://` URL with the store's options (GCS's XML API speaks
    /// ListObjectsV2); `None` for other schemes.
    pub fn for_gcs_url<'a>(
        url: &Url,
        options: impl Iterator<Item = (&'a String, &'a String)>,
    ) -> Result<Option<Self>, String> {
        if url.scheme() != "gs" {
            return Ok(None);
        }
        let err = |e: &dyn std::fmt::Display| format!("cannot open {}: {e}", crate::shown_url(url));
        let (builder, client) = configure(
            options,
            GoogleCloudStorageBuilder::new().with_url(url.to_string()),
            |k| match k {
                GoogleConfigKey::Client(c) => Some(*c),
                _ => None,
            },
            GoogleCloudStorageBuilder::with_config,
        );
        let bucket = url
            .host_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| err(&"no bucket"))?
            .to_string();
        // As object_store: the configured base URL, else the service account's
        // `gcs_base_url`, else Google's.
        let account = builder
            .get_config_value(&GoogleConfigKey::ServiceAccountKey)
            .or_else(|| {
                builder
                    .get_config_value(&GoogleConfigKey::ServiceAccount)
                    .and_then(|p| std::fs::read_to_string(p).ok())
            })
            .and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok());
        let base = builder
            .get_config_value(&GoogleConfigKey::BaseUrl)
            .or_else(|| {
                account
                    .as_ref()
                    .and_then(|a| a["gcs_base_url"].as_str().map(str::to_string))
            })
            .unwrap_or_else(|| "https://storage.googleapis.com".to_string());
        let bucket_url = format!(
            "{}/{}",
            base.trim_end_matches('/'),
            percent_encoding::utf8_percent_encode(&bucket, QUERY)
        );
        let skip_signature = builder
            .get_config_value(&GoogleConfigKey::SkipSignature)
            .is_some_and(|v| truthy(&v));
        let store = builder.build().map_err(|e| err(&e))?;
        let client = connect(&client).map_err(|e| err(&e))?;
        let auth = if skip_signature {
            Auth::Anonymous {
                request_payer: false,
            }
        } else {
            Auth::Gcp(store.credentials().clone())
        };
        Ok(Some(S3Lister {
            client,
            auth,
            bucket_url,
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
        paged(move |token: Option<String>| {
            let (this, prefix, start_after) = (this.clone(), prefix.clone(), start_after.clone());
            async move {
                let page = with_retries("ListObjectsV2", || {
                    this.page(prefix.as_deref(), start_after.as_deref(), token.as_deref())
                })
                .await?;
                let next = page.next_continuation_token.clone();
                if page.is_truncated && next.is_none() {
                    return Err(
                        "ListObjectsV2: a truncated page without a continuation token".to_string(),
                    );
                }
                if token.is_some() && page.is_truncated && next == token {
                    return Err(
                        "ListObjectsV2: the store returned the same continuation token twice"
                            .to_string(),
                    );
                }
                let encoded = page.encoding_type.as_deref() == Some("url");
                let items = page
                    .contents
                    .into_iter()
                    .map(|c| c.listed(encoded))
                    .collect();
                Ok((items, next.filter(|_| page.is_truncated)))
            }
        })
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
        url.set_query(Some(&list_query(prefix, start_after, token, page_size())));
        let mut request = http::Request::builder()
            .method(http::Method::GET)
            .uri(url.as_str())
            .body(HttpRequestBody::empty())
            .map_err(|e| fixed(e.to_string()))?;
        match &self.auth {
            Auth::Aws {
                credentials,
                region,
                request_payer,
            } => {
                let credential = credentials
                    .get_credential()
                    .await
                    .map_err(|e| (format!("S3 credentials: {e}"), true))?;
                AwsAuthorizer::new(&credential, "s3", region)
                    .with_request_payer(*request_payer)
                    .authorize(&mut request, None);
            }
            Auth::Anonymous { request_payer } => {
                if *request_payer {
                    request.headers_mut().insert(
                        "x-amz-request-payer",
                        http::HeaderValue::from_static("requester"),
                    );
                }
            }
            Auth::Gcp(credentials) => {
                let credential = credentials
                    .get_credential()
                    .await
                    .map_err(|e| (format!("GCS credentials: {e}"), true))?;
                if !credential.bearer.is_empty() {
                    let bearer =
                        http::HeaderValue::from_str(&format!("Bearer {}", credential.bearer))
                            .map_err(|e| (format!("GCS credentials: {e}"), false))?;
                    request
                        .headers_mut()
                        .insert(http::header::AUTHORIZATION, bearer);
                }
            }
        }
        let what = format!("ListObjectsV2 {}", self.bucket_url);
        let body = send(&self.client, request, &what, self.count.as_ref()).await?;
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
    /// that does not decode is unrepresentable; the others are checked by [`listed`].
    fn listed(self, encoded: bool) -> Listed {
        let key = if encoded {
            match percent_encoding::percent_decode_str(&self.key.replace('+', " ")).decode_utf8() {
                Ok(k) => k.into_owned(),
                Err(_) => return Listed::Unrepresentable(self.key, self.last_modified),
            }
        } else {
            self.key
        };
        listed(key, self.size, self.last_modified, self.e_tag)
    }
}

fn parse_page(body: &str) -> Result<ListPage, String> {
    quick_xml::de::from_str(body).map_err(|e| format!("ListObjectsV2: unreadable response: {e}"))
}

/// A ListObjectsV2 response body as [`S3Lister`] reads it: its keys as listed (fuzzing).
pub fn page_keys(body: &str) -> Result<Vec<Listed>, String> {
    let page = parse_page(body)?;
    let encoded = page.encoding_type.as_deref() == Some("url");
    Ok(page
        .contents
        .into_iter()
        .map(|c| c.listed(encoded))
        .collect())
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
        assert!(matches!(
            l.auth,
            Auth::Anonymous {
                request_payer: true
            }
        ));
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

    #[test]
    fn gcs_lists_its_xml_api_at_the_base_url_object_store_uses() {
        let gs = |opts: &[(&str, &str)]| {
            let opts: Vec<(String, String)> = opts
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            S3Lister::for_gcs_url(
                &Url::parse("gs://bucket/in/").unwrap(),
                opts.iter().map(|(k, v)| (k, v)),
            )
            .unwrap()
            .unwrap()
        };
        let key = r#"{"disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": "", "gcs_base_url": "http://127.0.0.1:4443/"}"#;
        let l = gs(&[("google_service_account_key", key)]);
        assert_eq!(l.bucket_url, "http://127.0.0.1:4443/bucket");
        let l = gs(&[
            ("google_service_account_key", key),
            ("google_base_url", "http://other:1"),
        ]);
        assert_eq!(l.bucket_url, "http://other:1/bucket");
        assert!(matches!(l.auth, Auth::Gcp(_)));
        assert!(
            S3Lister::for_gcs_url(&Url::parse("s3://b/x").unwrap(), std::iter::empty())
                .unwrap()
                .is_none()
        );
    }
}
