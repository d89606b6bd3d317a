//! Opening the object store behind a location.

use object_store::ObjectStore;
use object_store::path::Path;
use std::sync::Arc;
use url::Url;

/// The store for `url` and the path of the location inside it.
pub fn open_store<'a>(
    url: &Url,
    options: impl Iterator<Item = (&'a String, &'a String)>,
) -> Result<(Arc<dyn ObjectStore>, Path), String> {
    let (store, path) = object_store::parse_url_opts(url, options)
        .map_err(|e| format!("cannot open {}: {e}", shown_url(url)))?;
    Ok((Arc::from(store), path))
}

/// `path` relative to `prefix` (both object paths), or the whole path if it is not below it.
pub fn relative_path<'a>(prefix: &Path, path: &'a str) -> &'a str {
    let p = prefix.as_ref();
    if p.is_empty() {
        return path;
    }
    path.strip_prefix(p)
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(path)
}

/// What discovery and pinned reads know of an object: its path, size, time and version.
pub fn file_meta(m: object_store::ObjectMeta) -> landfall_core::FileMeta {
    landfall_core::FileMeta {
        path: m.location.to_string(),
        size: m.size,
        modified: m.last_modified,
        etag: m.e_tag,
        version: m.version,
    }
}

/// An object path as the user wrote its location: a local file keeps its leading `/`, an object
/// store path is a URL again (`s3://bucket/key`), for errors, logs and `landfall state`.
pub fn display_path(source: &Url, object_path: &str) -> String {
    if source.scheme() == "file" {
        return format!("/{object_path}");
    }
    format!("{}/{object_path}", shown_base(source))
}

/// The object path of a path as [`display_path`] shows it (or already an object path).
pub fn object_path<'a>(source: &Url, shown: &'a str) -> &'a str {
    if source.scheme() == "file" {
        return shown.strip_prefix('/').unwrap_or(shown);
    }
    shown
        .strip_prefix(&shown_base(source))
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(shown)
}

/// `url` as it may be shown: without a password or query string (SAS tokens).
pub fn shown_url(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_password(None);
    u.set_query(None);
    u.to_string()
}

/// `scheme://[user@]host` of `source`: a password in it is never shown.
fn shown_base(source: &Url) -> String {
    let mut base = source.clone();
    let _ = base.set_password(None);
    base[..url::Position::BeforePath]
        .trim_end_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_shown_as_written() {
        let local = Url::parse("file:///data/in/").unwrap();
        assert_eq!(display_path(&local, "data/in/a.json"), "/data/in/a.json");
        assert_eq!(object_path(&local, "/data/in/a.json"), "data/in/a.json");
        let s3 = Url::parse("s3://bucket/landing/").unwrap();
        assert_eq!(
            display_path(&s3, "landing/a.json"),
            "s3://bucket/landing/a.json"
        );
        assert_eq!(
            object_path(&s3, "s3://bucket/landing/a.json"),
            "landing/a.json"
        );
        assert_eq!(object_path(&s3, "landing/a.json"), "landing/a.json");
        let az = Url::parse("abfss://c@acct.dfs.core.windows.net/p/").unwrap();
        assert_eq!(
            display_path(&az, "p/x.csv"),
            "abfss://c@acct.dfs.core.windows.net/p/x.csv"
        );
        // A password in the location is never shown; a path shown is still found again.
        let secret = Url::parse("s3://key:SECRET@bucket/in/?sig=SECRET2").unwrap();
        let shown = display_path(&secret, "in/a.json");
        assert_eq!(shown, "s3://key@bucket/in/a.json");
        assert_eq!(object_path(&secret, &shown), "in/a.json");
    }
}
