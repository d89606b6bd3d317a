//! Azure List Blobs, keeping keys object_store cannot represent (see [`super`]).
//!
//! Requests are addressed as object_store addresses them (Azurite with `use_emulator`, the
//! configured endpoint, or `https://<account>.blob.core.windows.net`) and signed by its
//! `AzureAuthorizer` with its credential provider: shared key, SAS or bearer token alike.
//! List Blobs has no `start-after`: a listing after a cursor filters the keys, as object_store
//! does. ADLS Gen2 directory entries are not objects and are left out, as object_store does.

use super::http::{
    Listed, configure, connect, listed, page_size, paged, send, truthy, with_retries,
};
use chrono::{DateTime, Utc};
use futures::stream::{BoxStream, StreamExt};
use object_store::azure::{
    AzureAuthorizer, AzureConfigKey, AzureCredentialProvider, MicrosoftAzureBuilder,
};
use object_store::client::{HttpClient, HttpRequestBody};
use object_store::path::Path;
use serde::Deserialize;
use url::Url;

/// The storage service version the requests ask for (object_store's).
const VERSION: &str = "2023-11-03";

/// List Blobs for one container.
#[derive(Clone)]
pub struct AzureLister {
    client: HttpClient,
    /// `None` with `azure_skip_signature`.
    credentials: Option<AzureCredentialProvider>,
    account: String,
    /// `https://<account>.blob.core.windows.net/<container>`, the endpoint plus
    /// `/<container>`, or Azurite's `<url>/<account>/<container>`.
    container_url: String,
    count: Option<crate::CountRequests>,
}

impl std::fmt::Debug for AzureLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureLister")
            .field("container_url", &self.container_url)
            .finish()
    }
}

impl AzureLister {
    /// A lister for an `az://`, `azure://`, `adl://` or `abfs(s)://` URL with the store's
    /// options; `None` for other schemes and for Fabric OneLake (listed by object_store).
    pub fn for_url<'a>(
        url: &Url,
        options: impl Iterator<Item = (&'a String, &'a String)>,
    ) -> Result<Option<Self>, String> {
        let err = |e: &dyn std::fmt::Display| format!("cannot open {}: {e}", crate::shown_url(url));
        let host = url.host_str().unwrap_or_default();
        let (container, url_account) = match url.scheme() {
            // `container@account.dfs.core.windows.net`, in any of the schemes (as object_store).
            "az" | "azure" | "adl" | "abfs" | "abfss" if !url.username().is_empty() => {
                if host.contains("fabric") {
                    return Ok(None);
                }
                let account = host.split('.').next().unwrap_or_default().to_string();
                (url.username().to_string(), Some(account))
            }
            "az" | "azure" | "adl" => (host.to_string(), None),
            _ => return Ok(None),
        };
        if container.is_empty() {
            return Err(err(&"no container"));
        }
        let (builder, mut client) = configure(
            options,
            MicrosoftAzureBuilder::new().with_url(url.to_string()),
            |k| match k {
                AzureConfigKey::Client(c) => Some(*c),
                _ => None,
            },
            MicrosoftAzureBuilder::with_config,
        );
        let config = |k: AzureConfigKey| builder.get_config_value(&k);
        let flag = |k: AzureConfigKey| config(k).is_some_and(|v| truthy(&v));
        if flag(AzureConfigKey::UseFabricEndpoint) {
            return Ok(None);
        }
        let emulator = flag(AzureConfigKey::UseEmulator);
        let account = url_account
            .or_else(|| config(AzureConfigKey::AccountName))
            .or_else(|| emulator.then(|| "devstoreaccount1".to_string()))
            .ok_or_else(|| err(&"no storage account (azure_storage_account_name)"))?;
        let container_url = if emulator {
            let base = std::env::var("AZURITE_BLOB_STORAGE_URL")
                .unwrap_or_else(|_| "http://127.0.0.1:10000".into());
            format!("{}/{account}/{container}", base.trim_end_matches('/'))
        } else {
            match config(AzureConfigKey::Endpoint) {
                Some(e) => format!("{}/{container}", e.trim_end_matches('/')),
                None => format!("https://{account}.blob.core.windows.net/{container}"),
            }
        };
        if emulator {
            client = client.with_allow_http(true);
        }
        let skip_signature = flag(AzureConfigKey::SkipSignature);
        let store = builder.build().map_err(|e| err(&e))?;
        let client = connect(&client).map_err(|e| err(&e))?;
        Ok(Some(AzureLister {
            client,
            credentials: (!skip_signature).then(|| store.credentials().clone()),
            account,
            container_url,
            count: None,
        }))
    }

    /// Count each List Blobs request with `count`.
    pub fn with_counter(mut self, count: crate::CountRequests) -> Self {
        self.count = Some(count);
        self
    }

    /// The blobs under `prefix` whose names sort after `start_after` (all of them when
    /// `None`), page by page, in name order.
    pub fn list_after(
        &self,
        prefix: Option<&Path>,
        start_after: Option<&str>,
    ) -> BoxStream<'static, Result<Listed, String>> {
        let this = self.clone();
        let prefix = prefix.map(|p| format!("{}/", p.as_ref()));
        let from = start_after.map(str::to_string);
        let listing = paged(move |marker: Option<String>| {
            let (this, prefix, from) = (this.clone(), prefix.clone(), from.clone());
            async move {
                let page = with_retries("List Blobs", || {
                    this.page(prefix.as_deref(), from.as_deref(), marker.as_deref())
                })
                .await?;
                let next = page.next_marker.filter(|m| !m.is_empty());
                if marker.is_some() && next == marker {
                    return Err("List Blobs: the store returned the same marker twice".to_string());
                }
                let items = page
                    .blobs
                    .blobs
                    .into_iter()
                    .filter(|b| b.properties.resource_type.as_deref() != Some("directory"))
                    .map(Blob::listed)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((items, next))
            }
        });
        match start_after.map(str::to_string) {
            None => listing,
            Some(after) => listing
                .filter(move |l| {
                    let keep = match l {
                        Ok(Listed::Object(m)) => m.location.as_ref() > after.as_str(),
                        Ok(Listed::Unrepresentable(k, _)) => k.as_str() > after.as_str(),
                        Err(_) => true,
                    };
                    futures::future::ready(keep)
                })
                .boxed(),
        }
    }

    /// One List Blobs call; on error, the message and whether trying again may help.
    /// `start_from`: the first page starts at this name (`startFrom`, as object_store sends
    /// it; a store that ignores it lists from the start, and the caller filters).
    async fn page(
        &self,
        prefix: Option<&str>,
        start_from: Option<&str>,
        marker: Option<&str>,
    ) -> Result<EnumerationResults, (String, bool)> {
        let fixed = |e: String| (e, false);
        let mut url = Url::parse(&self.container_url).map_err(|e| fixed(e.to_string()))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("restype", "container")
                .append_pair("comp", "list");
            if let Some(p) = prefix {
                q.append_pair("prefix", p);
            }
            match (marker, start_from) {
                (Some(m), _) => {
                    q.append_pair("marker", m);
                }
                (None, Some(from)) => {
                    q.append_pair("startFrom", from);
                }
                (None, None) => {}
            }
            if let Some(n) = page_size() {
                q.append_pair("maxresults", &n.to_string());
            }
        }
        let mut request = http::Request::builder()
            .method(http::Method::GET)
            .uri(url.as_str())
            .body(HttpRequestBody::empty())
            .map_err(|e| fixed(e.to_string()))?;
        match &self.credentials {
            Some(provider) => {
                let credential = provider
                    .get_credential()
                    .await
                    .map_err(|e| (format!("Azure credentials: {e}"), true))?;
                AzureAuthorizer::new(&credential, &self.account).authorize(&mut request);
            }
            None => {
                request
                    .headers_mut()
                    .insert("x-ms-version", http::HeaderValue::from_static(VERSION));
            }
        }
        let what = format!("List Blobs {}", self.container_url);
        let body = send(&self.client, request, &what, self.count.as_ref()).await?;
        parse_page(&body).map_err(fixed)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EnumerationResults {
    #[serde(default)]
    blobs: Blobs,
    #[serde(default)]
    next_marker: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Blobs {
    #[serde(default, rename = "Blob")]
    blobs: Vec<Blob>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Blob {
    name: BlobName,
    properties: Properties,
}

/// A name with characters XML cannot carry comes percent-encoded, marked `Encoded="true"`.
#[derive(Debug, Deserialize)]
struct BlobName {
    #[serde(rename = "@Encoded", default)]
    encoded: Option<String>,
    #[serde(rename = "$text", default)]
    value: String,
}

#[derive(Debug, Deserialize)]
struct Properties {
    #[serde(rename = "Last-Modified")]
    last_modified: String,
    #[serde(rename = "Content-Length")]
    content_length: u64,
    #[serde(rename = "Etag", default)]
    etag: Option<String>,
    #[serde(rename = "ResourceType", default)]
    resource_type: Option<String>,
}

impl Blob {
    /// The blob as listed; an unreadable modification time fails the page (as in
    /// object_store), since the age and modification filters depend on it.
    fn listed(self) -> Result<Listed, String> {
        let modified = DateTime::parse_from_rfc2822(&self.properties.last_modified)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                format!(
                    "List Blobs: `{}` has an unreadable Last-Modified `{}`: {e}",
                    self.name.value, self.properties.last_modified
                )
            })?;
        let name = if self.name.encoded.as_deref().is_some_and(|e| e == "true") {
            match percent_encoding::percent_decode_str(&self.name.value).decode_utf8() {
                Ok(n) => n.into_owned(),
                Err(_) => return Ok(Listed::Unrepresentable(self.name.value, modified)),
            }
        } else {
            self.name.value
        };
        Ok(listed(
            name,
            self.properties.content_length,
            modified,
            self.properties.etag,
        ))
    }
}

fn parse_page(body: &str) -> Result<EnumerationResults, String> {
    quick_xml::de::from_str(body).map_err(|e| format!("List Blobs: unreadable response: {e}"))
}

/// A List Blobs response body as [`AzureLister`] reads it: its names as listed (fuzzing).
pub fn page_keys(body: &str) -> Result<Vec<Listed>, String> {
    parse_page(body)?
        .blobs
        .blobs
        .into_iter()
        .map(Blob::listed)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="c">
  <Prefix>in/</Prefix><MaxResults>5</MaxResults>
  <Blobs>
    <Blob><Name>in/a b.json</Name><Properties><Creation-Time>Tue, 01 Dec 2026 01:00:00 GMT</Creation-Time>
      <Last-Modified>Tue, 01 Dec 2026 01:00:00 GMT</Last-Modified><Etag>0x8DD1</Etag>
      <Content-Length>10</Content-Length><BlobType>BlockBlob</BlobType></Properties></Blob>
    <Blob><Name>in/x//y.json</Name><Properties>
      <Last-Modified>Tue, 01 Dec 2026 01:00:01 GMT</Last-Modified><Etag>0x8DD2</Etag>
      <Content-Length>11</Content-Length></Properties></Blob>
    <Blob><Name Encoded="true">in/%01bell.json</Name><Properties>
      <Last-Modified>Tue, 01 Dec 2026 01:00:02 GMT</Last-Modified><Etag>0x8DD3</Etag>
      <Content-Length>12</Content-Length></Properties></Blob>
    <Blob><Name>in/dir</Name><Properties>
      <Last-Modified>Tue, 01 Dec 2026 01:00:03 GMT</Last-Modified><Etag>0x8DD4</Etag>
      <Content-Length>0</Content-Length><ResourceType>directory</ResourceType></Properties></Blob>
  </Blobs>
  <NextMarker>2!80!tok</NextMarker>
</EnumerationResults>"#;

    #[test]
    fn blobs_are_read_and_odd_names_passed_over() {
        let page = parse_page(PAGE).unwrap();
        assert_eq!(page.next_marker.as_deref(), Some("2!80!tok"));
        let dirs = page
            .blobs
            .blobs
            .iter()
            .filter(|b| b.properties.resource_type.as_deref() == Some("directory"))
            .count();
        assert_eq!(dirs, 1);
        let l: Vec<Listed> = page
            .blobs
            .blobs
            .into_iter()
            .map(|b| Blob::listed(b).unwrap())
            .collect();
        match &l[0] {
            Listed::Object(m) => {
                assert_eq!(m.location.as_ref(), "in/a b.json");
                assert_eq!((m.size, m.e_tag.as_deref()), (10, Some("0x8DD1")));
                assert_eq!(m.last_modified.to_rfc3339(), "2026-12-01T01:00:00+00:00");
            }
            Listed::Unrepresentable(k, _) => panic!("{k} is representable"),
        }
        assert!(matches!(&l[1], Listed::Unrepresentable(k, _) if k == "in/x//y.json"));
        // Decoded from its percent-encoded form (object_store cannot address a control
        // character either).
        assert!(matches!(&l[2], Listed::Unrepresentable(k, _) if k == "in/\u{1}bell.json"));
        let bad = parse_page(
            "<EnumerationResults><Blobs><Blob><Name>a</Name><Properties>\
             <Last-Modified>yesterday</Last-Modified><Content-Length>1</Content-Length>\
             </Properties></Blob></Blobs></EnumerationResults>",
        )
        .unwrap();
        let err = bad
            .blobs
            .blobs
            .into_iter()
            .next()
            .unwrap()
            .listed()
            .err()
            .unwrap();
        assert!(err.contains("Last-Modified `yesterday`"), "{err}");
        let empty =
            parse_page("<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>").unwrap();
        assert!(empty.blobs.blobs.is_empty());
        assert_eq!(empty.next_marker.as_deref().filter(|m| !m.is_empty()), None);
    }

    fn lister(url: &str, options: &[(&str, &str)]) -> Option<AzureLister> {
        let opts: Vec<(String, String)> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        AzureLister::for_url(&Url::parse(url).unwrap(), opts.iter().map(|(k, v)| (k, v))).unwrap()
    }

    #[test]
    fn containers_are_addressed_as_object_store_does() {
        let key = ("azure_storage_account_key", "a2V5");
        let l = lister("az://c/in/", &[("azure_storage_account_name", "acct"), key]).unwrap();
        assert_eq!(l.container_url, "https://acct.blob.core.windows.net/c");
        let l = lister("abfss://c@acct.dfs.core.windows.net/in/", &[key]).unwrap();
        assert_eq!(
            (l.container_url.as_str(), l.account.as_str()),
            ("https://acct.blob.core.windows.net/c", "acct")
        );
        let l = lister(
            "az://c/",
            &[
                ("azure_storage_account_name", "acct"),
                key,
                ("azure_storage_endpoint", "http://proxy:1/"),
            ],
        )
        .unwrap();
        assert_eq!(l.container_url, "http://proxy:1/c");
        let l = lister("az://c@acct.dfs.core.windows.net/in/", &[key]).unwrap();
        assert_eq!(l.container_url, "https://acct.blob.core.windows.net/c");
        assert!(lister("abfss://ws@onelake.dfs.fabric.microsoft.com/x", &[]).is_none());
        assert!(lister("s3://b/x", &[]).is_none());
    }
}
