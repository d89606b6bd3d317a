//! Where a source or table lives ([`Location`]) and the object_store options to reach it
//! ([`StoreOptions`]), built from a `[stores.<name>]` entry over the standard environment.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use url::Url;

/// Credentials and endpoints of one object store. Unset fields fall back to the standard
/// environment variables (`AWS_*`, `AZURE_STORAGE_*`, `GOOGLE_*`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// AWS region.
    pub region: Option<String>,
    /// Endpoint URL (S3-compatible servers, emulators).
    pub endpoint: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// Allow plain HTTP endpoints (emulators).
    pub allow_http: Option<bool>,
    /// Azure storage account name.
    pub account: Option<String>,
    /// Azure storage account key.
    pub access_key: Option<String>,
    /// Use the Azurite emulator's well-known account and local endpoint.
    pub use_emulator: Option<bool>,
    /// GCS service account JSON file.
    pub service_account_path: Option<PathBuf>,
    /// Any further object_store configuration keys, passed through as given.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Local,
    S3,
    Azure,
    Gcs,
}

/// A parsed location. `url` is what object_store and deltalake are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub kind: StoreKind,
    pub url: Url,
}

impl Location {
    /// The URL as it may be shown: without a password or query string (SAS tokens). The user
    /// part stays: in `abfss://` URLs it names the container.
    pub fn shown(&self) -> String {
        let mut u = self.url.clone();
        let _ = u.set_password(None);
        u.set_query(None);
        u.to_string()
    }

    /// Parse a user location (its errors show it as [`shown_input`] does): a plain path (relative paths are taken from the working
    /// directory), `file://`, `s3://`/`s3a://`, `az://`/`azure://`/`abfs(s)://`, `gs://`.
    pub fn parse(input: &str) -> Result<Location, String> {
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err("must not be empty".into());
        }
        if !trimmed.contains("://") {
            let p = Path::new(trimmed);
            let abs = if p.is_absolute() {
                p.to_path_buf()
            } else {
                std::env::current_dir()
                    .map_err(|e| format!("cannot resolve relative path: {e}"))?
                    .join(p)
            };
            let abs = normalize(&abs);
            let url = Url::from_directory_path(&abs)
                .map_err(|_| format!("`{trimmed}` is not a valid path"))?;
            return Ok(Location {
                kind: StoreKind::Local,
                url,
            });
        }
        let mut url = Url::parse(trimmed)
            .map_err(|e| format!("`{}` is not a valid URL: {e}", shown_input(trimmed)))?;
        let kind = match url.scheme() {
            "file" => StoreKind::Local,
            "s3" | "s3a" => StoreKind::S3,
            "az" | "azure" | "abfs" | "abfss" | "adl" => StoreKind::Azure,
            "gs" => StoreKind::Gcs,
            other => {
                return Err(format!(
                    "unsupported scheme `{other}://` (use a path, file://, s3://, az://, abfss:// or gs://)"
                ));
            }
        };
        if kind != StoreKind::Local && url.host_str().is_none_or(str::is_empty) {
            return Err(format!(
                "`{}` names no bucket or container",
                shown_input(trimmed)
            ));
        }
        if !url.path().ends_with('/') {
            let p = format!("{}/", url.path());
            url.set_path(&p);
        }
        Ok(Location { kind, url })
    }

    /// The local directory, for `file://` locations.
    pub fn local_path(&self) -> Option<std::path::PathBuf> {
        (self.kind == StoreKind::Local)
            .then(|| {
                self.url
                    .to_file_path()
                    .ok()
                    .map(|p| p.components().collect())
            })
            .flatten()
    }

    /// The table URI as it may be shown ([`Location::shown`] without the trailing slash).
    pub fn shown_table_uri(&self) -> String {
        self.shown().trim_end_matches('/').to_string()
    }

    /// The URL without the trailing slash, as deltalake expects a table URI.
    pub fn as_table_uri(&self) -> String {
        self.url.as_str().trim_end_matches('/').to_string()
    }

    /// Whether `other` is this location or lies below it.
    pub fn contains(&self, other: &Location) -> bool {
        other.url.scheme() == self.url.scheme()
            && other.url.host_str() == self.url.host_str()
            && other.url.path().starts_with(self.url.path())
    }
}

fn normalize(p: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A location as a user wrote it, fit to show in a message even when it does not parse: the
/// user part blanked when it may hold a password (`user:password@`, the password possibly
/// holding `/`, `?` or `@`), then the query (a SAS token) and fragment cut off.
pub fn shown_input(input: &str) -> String {
    let (scheme, rest) = match input.find("://") {
        Some(i) => input.split_at(i + 3),
        None => ("", input),
    };
    let (user, rest) = match rest.rfind('@') {
        Some(at) if rest[..at].contains(':') => ("<redacted>@", &rest[at + 1..]),
        Some(at) => rest.split_at(at + 1),
        None => ("", rest),
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    format!("{scheme}{user}{rest}")
}

/// object_store configuration keys and values for one location. Its `Debug` shows the keys
/// and only the values known to hold no secret, so a spec printed in a log leaks nothing.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StoreOptions(pub BTreeMap<String, String>);

/// Option keys whose values are not secrets (shown by `Debug` and the API).
pub const NON_SECRET_OPTIONS: &[&str] = &[
    "aws_region",
    "aws_endpoint",
    "aws_endpoint_url_s3",
    "aws_allow_http",
    "allow_http",
    "aws_virtual_hosted_style_request",
    "aws_request_payer",
    "aws_skip_signature",
    "azure_storage_account_name",
    "azure_container_name",
    "azure_storage_use_emulator",
    "azure_use_emulator",
    "azure_endpoint",
    "google_bucket",
];

impl StoreOptions {
    /// The options with every value that may be a secret replaced by `<redacted>`.
    pub fn redacted(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(k, v)| {
                let shown = NON_SECRET_OPTIONS.contains(&k.to_ascii_lowercase().as_str());
                (
                    k.clone(),
                    if shown {
                        v.clone()
                    } else {
                        "<redacted>".into()
                    },
                )
            })
            .collect()
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StoreOptions")
            .field(&self.redacted())
            .finish()
    }
}

impl StoreOptions {
    /// Options for `kind` from the environment, overridden by `store` when given.
    pub fn build(
        kind: StoreKind,
        store: Option<&StoreConfig>,
        env: impl Fn(&str) -> Option<String>,
    ) -> StoreOptions {
        let mut o = BTreeMap::new();
        let mut set = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                o.insert(k.to_string(), v);
            }
        };
        let s = store.cloned().unwrap_or_default();
        match kind {
            StoreKind::Local => {}
            StoreKind::S3 => {
                set(
                    "aws_access_key_id",
                    s.access_key_id.or_else(|| env("AWS_ACCESS_KEY_ID")),
                );
                set(
                    "aws_secret_access_key",
                    s.secret_access_key.or_else(|| env("AWS_SECRET_ACCESS_KEY")),
                );
                set(
                    "aws_session_token",
                    s.session_token.or_else(|| env("AWS_SESSION_TOKEN")),
                );
                set(
                    "aws_region",
                    s.region
                        .or_else(|| env("AWS_REGION"))
                        .or_else(|| env("AWS_DEFAULT_REGION")),
                );
                set(
                    "aws_endpoint",
                    s.endpoint.or_else(|| env("AWS_ENDPOINT_URL")),
                );
                set(
                    "allow_http",
                    s.allow_http
                        .map(|b| b.to_string())
                        .or_else(|| env("AWS_ALLOW_HTTP")),
                );
            }
            StoreKind::Azure => {
                set(
                    "azure_storage_account_name",
                    s.account.or_else(|| env("AZURE_STORAGE_ACCOUNT_NAME")),
                );
                set(
                    "azure_storage_account_key",
                    s.access_key.or_else(|| env("AZURE_STORAGE_ACCOUNT_KEY")),
                );
                set(
                    "azure_storage_use_emulator",
                    s.use_emulator
                        .map(|b| b.to_string())
                        .or_else(|| env("AZURE_STORAGE_USE_EMULATOR")),
                );
                set(
                    "azure_storage_endpoint",
                    s.endpoint.or_else(|| env("AZURE_STORAGE_ENDPOINT")),
                );
                set(
                    "allow_http",
                    s.allow_http
                        .map(|b| b.to_string())
                        .or_else(|| env("AZURE_ALLOW_HTTP")),
                );
            }
            StoreKind::Gcs => {
                set(
                    "google_service_account",
                    s.service_account_path
                        .map(|p| p.display().to_string())
                        .or_else(|| env("GOOGLE_SERVICE_ACCOUNT"))
                        .or_else(|| env("GOOGLE_APPLICATION_CREDENTIALS")),
                );
                set("google_base_url", s.endpoint);
                set("allow_http", s.allow_http.map(|b| b.to_string()));
            }
        }
        for (k, v) in s.options {
            o.insert(k, v);
        }
        StoreOptions(o)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }

    pub fn to_hash_map(&self) -> std::collections::HashMap<String, String> {
        self.0.clone().into_iter().collect()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn location_errors_never_show_a_sas_token_or_a_password() {
        for bad in [
            "az://?sv=2022&sig=SECRETSIG",
            "s3://user:SECRETPW@/in",
            "s3://user:SECRETPW@[bad/in?sig=SECRETSIG",
            "s3://AKID:SECRET/PW@bucket/in",
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert!(!e.contains("SECRET"), "{bad}: {e}");
            assert!(e.contains("`"), "{bad}: the location is still named: {e}");
        }
        assert_eq!(
            shown_input("s3://user:pw@bucket/in?x=1"),
            "s3://<redacted>@bucket/in"
        );
        // A secret key with `/`, `?` and `@` in it.
        assert_eq!(
            shown_input("s3://AKID:ab/c?d@e@bucket/in"),
            "s3://<redacted>@bucket/in"
        );
        assert_eq!(
            shown_input("abfss://c@acct.dfs.core.windows.net/p"),
            "abfss://c@acct.dfs.core.windows.net/p"
        );
        assert_eq!(shown_input("az://c/in#frag"), "az://c/in");
    }

    #[test]
    fn debug_never_shows_secret_values() {
        let o = StoreOptions(BTreeMap::from([
            (
                "aws_secret_access_key".to_string(),
                "SECRET-VALUE".to_string(),
            ),
            ("aws_access_key_id".to_string(), "AKID-VALUE".to_string()),
            ("azure_storage_sas_key".to_string(), "sv=SAS".to_string()),
            ("aws_region".to_string(), "eu-west-1".to_string()),
        ]));
        let shown = format!("{o:?}");
        assert!(
            !shown.contains("SECRET-VALUE") && !shown.contains("AKID-VALUE"),
            "{shown}"
        );
        assert!(!shown.contains("sv=SAS"), "{shown}");
        assert!(
            shown.contains("eu-west-1") && shown.contains("aws_secret_access_key"),
            "{shown}"
        );
    }

    use super::*;

    #[test]
    fn parses_locations() {
        let l = Location::parse("s3://bucket/landing/orders").unwrap();
        assert_eq!(
            (l.kind, l.url.as_str()),
            (StoreKind::S3, "s3://bucket/landing/orders/")
        );
        assert_eq!(l.as_table_uri(), "s3://bucket/landing/orders");
        let l = Location::parse("abfss://c@acct.dfs.core.windows.net/x").unwrap();
        assert_eq!(l.kind, StoreKind::Azure);
        let l = Location::parse("/tmp/a/../b").unwrap();
        assert_eq!(l.url.as_str(), "file:///tmp/b/");
        assert_eq!(l.local_path().unwrap(), Path::new("/tmp/b"));
        assert!(
            Location::parse("ftp://x/y")
                .unwrap_err()
                .contains("unsupported scheme `ftp://`")
        );
        assert!(
            Location::parse("s3:///nobucket")
                .unwrap_err()
                .contains("names no bucket")
        );
        assert!(
            Location::parse("/data/t")
                .unwrap()
                .contains(&Location::parse("/data/t/_state").unwrap())
        );
        assert!(
            !Location::parse("/data/t")
                .unwrap()
                .contains(&Location::parse("/data/t2").unwrap())
        );
    }

    #[test]
    fn store_config_overrides_environment() {
        let env = |k: &str| match k {
            "AWS_REGION" => Some("eu-west-1".to_string()),
            "AWS_ACCESS_KEY_ID" => Some("from-env".to_string()),
            _ => None,
        };
        let store = StoreConfig {
            access_key_id: Some("from-config".into()),
            allow_http: Some(true),
            ..Default::default()
        };
        let o = StoreOptions::build(StoreKind::S3, Some(&store), env);
        assert_eq!(o.0["aws_access_key_id"], "from-config");
        assert_eq!(o.0["aws_region"], "eu-west-1");
        assert_eq!(o.0["allow_http"], "true");
        assert!(!o.0.contains_key("aws_endpoint"));
    }
}
