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
        .map_err(|e| format!("cannot open {url}: {e}"))?;
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
