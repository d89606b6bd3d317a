//! A plain directory of Parquet files, committed by manifest.
//!
//! An attempt writes its files under `_landfall/staging/<stream>/`, which Spark, DuckDB
//! (`*/*.parquet` globs) and Hive-style readers skip because of the leading underscore. The
//! commit is the manifest `_landfall/manifests/<stream>/<batch id, 20 digits>.json`, written
//! with put-if-absent: whoever writes it first decides the batch's files, once. Publication then
//! copies each staged file to its final name and deletes the staged copy; recovery repeats it
//! (idempotent) for a manifest whose publication was interrupted.
//!
//! Readers that use the manifests never see a row twice or a partial batch. Readers that only
//! glob the directory never see a row twice either (a staged file is invisible to them until
//! its manifest exists); while a publication is in flight or interrupted they may see part of
//! a batch until recovery completes it.

use crate::error::SinkError;
use crate::writer::TableLayout;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use futures::TryStreamExt;
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{BatchCommit, BatchWriter, Committed, Committer, StagedFile};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    stream: String,
    batch_id: u64,
    committed_at: chrono::DateTime<chrono::Utc>,
    files: Vec<ManifestFile>,
    /// The state identity of the committing process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ManifestFile {
    path: String,
    staged: String,
    size: u64,
    rows: u64,
    partition_values: Vec<(String, Option<String>)>,
}

pub struct ParquetDirCommitter {
    stream: String,
    uri: String,
    store: Arc<dyn ObjectStore>,
    layout: TableLayout,
    owner: std::sync::Mutex<Option<String>>,
}

/// Delete `path`: `true` if it was there, `false` if it was missing (not an error; a retry
/// whose first attempt deleted it also says `false`). A delete is idempotent, so a failed one is
/// tried again (four attempts over about three seconds plus the requests' own time): the
/// store's client does not retry every request that may have reached the server (S3's
/// `POST ?delete` that timed out is not), and a file left behind would fail its batch for a
/// passing fault.
pub(crate) async fn delete_idempotent(
    store: &dyn ObjectStore,
    path: &Path,
) -> Result<bool, object_store::Error> {
    let mut pause = std::time::Duration::from_millis(200);
    for attempt in 1.. {
        match store.delete(path).await {
            Ok(()) => return Ok(true),
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) if attempt >= 4 => return Err(e),
            Err(e) => {
                tracing::debug!(path = %path, attempt, error = %e, "delete failed; trying again");
                tokio::time::sleep(pause).await;
                pause *= 3;
            }
        }
    }
    unreachable!("the loop returns")
}

/// Delete paths relative to the store root; a missing file is not an error. For a local store
/// the object store's own temporary files of those paths (`<path>#<digits>`, left behind when
/// the process was killed during the put or copy that creates `<path>`) go too: the store can
/// neither list nor delete them.
pub(crate) async fn delete_all(
    location: &str,
    store: &dyn ObjectStore,
    paths: &[String],
) -> Result<u64, SinkError> {
    let mut removed = 0;
    for p in paths {
        let path = Path::parse(p).map_err(|e| SinkError::Io {
            location: location.to_string(),
            op: "delete",
            reason: e.to_string(),
        })?;
        match delete_idempotent(store, &path).await {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(e) => {
                return Err(SinkError::Io {
                    location: location.to_string(),
                    op: "delete",
                    reason: format!("{p}: {e}"),
                });
            }
        }
    }
    removed += remove_local_temps(location, paths)?;
    Ok(removed)
}

/// For a `file://` location: remove the local object store's temporary files `<path>#<digits>`
/// of `paths` (relative to the location). It writes an object to such a file and then renames
/// or links it into place; a process killed in between leaves it behind, and the store itself
/// refuses these names. Other locations: nothing to do. Returns how many were removed.
pub(crate) fn remove_local_temps(location: &str, paths: &[String]) -> Result<u64, SinkError> {
    let root = match url::Url::parse(location) {
        Ok(u) if u.scheme() == "file" => match u.to_file_path() {
            Ok(r) => r,
            Err(()) => return Ok(0),
        },
        _ => return Ok(0),
    };
    let io = |op: &'static str, e: std::io::Error| SinkError::Io {
        location: location.to_string(),
        op,
        reason: e.to_string(),
    };
    // One directory read per parent directory, not per path.
    let mut by_dir: std::collections::BTreeMap<
        std::path::PathBuf,
        std::collections::HashSet<String>,
    > = Default::default();
    for p in paths {
        let Ok(path) = Path::parse(p) else { continue };
        let parts: Vec<String> = path.parts().map(|x| x.as_ref().to_string()).collect();
        let Some((name, dirs)) = parts.split_last() else {
            continue;
        };
        let dir = dirs.iter().fold(root.clone(), |d, x| d.join(x));
        by_dir.entry(dir).or_default().insert(name.clone());
    }
    let mut removed = 0;
    for (dir, names) in by_dir {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io("list temporary files", e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io("list temporary files", e))?;
            let file_name = entry.file_name();
            let Some(f) = file_name.to_str() else {
                continue;
            };
            let is_temp = f.rsplit_once('#').is_some_and(|(base, suffix)| {
                !suffix.is_empty()
                    && suffix.bytes().all(|b| b.is_ascii_digit())
                    && names.contains(base)
            });
            if !is_temp {
                continue;
            }
            match std::fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("delete temporary file", e)),
            }
        }
    }
    Ok(removed)
}

impl ParquetDirCommitter {
    pub fn new(
        stream: &str,
        uri: &str,
        options: HashMap<String, String>,
        target_file_size: u64,
    ) -> Result<Self, SinkError> {
        Ok(ParquetDirCommitter {
            stream: stream.to_string(),
            uri: uri.to_string(),
            store: crate::table_store(uri, &options)?,
            layout: TableLayout::new(uri, target_file_size),
            owner: std::sync::Mutex::new(None),
        })
    }

    fn staging_prefix(&self) -> String {
        format!("_landfall/staging/{}/", self.stream)
    }

    fn manifest_dir(&self) -> String {
        format!("_landfall/manifests/{}", self.stream)
    }

    fn manifest_path(&self, batch_id: u64) -> Path {
        Path::from(format!("{}/{batch_id:020}.json", self.manifest_dir()))
    }

    fn io(&self, op: &'static str, e: impl ToString) -> SinkError {
        SinkError::Io {
            location: crate::shown(&self.uri),
            op,
            reason: e.to_string(),
        }
    }

    async fn read_manifest(&self, batch_id: u64) -> Result<Option<Manifest>, SinkError> {
        match self.store.get(&self.manifest_path(batch_id)).await {
            Ok(r) => {
                let bytes = r.bytes().await.map_err(|e| self.io("read manifest", e))?;
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| self.io("parse manifest", e))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.io("read manifest", e)),
        }
    }

    /// Copy staged files to their final names and drop the staged copies.
    async fn publish(&self, m: &Manifest) -> Result<(), SinkError> {
        for f in &m.files {
            let final_path = Path::parse(&f.path).map_err(|e| self.io("publish", e))?;
            let staged = Path::parse(&f.staged).map_err(|e| self.io("publish", e))?;
            if self.store.head(&final_path).await.is_err() {
                self.store
                    .copy(&staged, &final_path)
                    .await
                    .map_err(|e| self.io("publish", format!("{} -> {}: {e}", f.staged, f.path)))?;
            }
            delete_idempotent(self.store.as_ref(), &staged)
                .await
                .map_err(|e| self.io("delete staged file", e))?;
        }
        Ok(())
    }
}

#[async_trait]
impl Committer for ParquetDirCommitter {
    fn location(&self) -> String {
        crate::shown(&self.uri)
    }

    async fn prepare(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()> {
        self.layout.set(schema, partition_by);
        Ok(())
    }

    /// Later data files carry the new columns; readers merge files by name (DuckDB's
    /// `union_by_name`, Spark's `mergeSchema`).
    async fn evolve(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()> {
        self.layout.set(schema, partition_by);
        Ok(())
    }

    async fn last_committed(&self) -> SeamResult<Option<u64>> {
        let prefix = Path::from(self.manifest_dir());
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| self.io("list manifests", e))?;
        Ok(metas
            .iter()
            .filter_map(|m| {
                m.location
                    .filename()?
                    .strip_suffix(".json")?
                    .parse::<u64>()
                    .ok()
            })
            .max())
    }

    fn set_owner(&self, owner: &str) {
        *self.owner.lock().expect("owner lock") = Some(owner.to_string());
    }

    async fn batch_commit(&self, batch_id: u64) -> SeamResult<Option<BatchCommit>> {
        // The staged names: those the hook recorded.
        Ok(self.read_manifest(batch_id).await?.map(|m| BatchCommit {
            files: m.files.into_iter().map(|f| f.staged).collect(),
            owner: m.owner,
        }))
    }

    async fn batch_version(&self, batch_id: u64) -> SeamResult<Option<i64>> {
        // A Parquet directory's "version" of a batch is the batch id, once its manifest exists.
        Ok(self.read_manifest(batch_id).await?.map(|_| batch_id as i64))
    }

    async fn writer(
        &self,
        batch_id: u64,
        attempt: u32,
        on_new_file: StagedHook,
    ) -> SeamResult<Box<dyn BatchWriter>> {
        Ok(Box::new(self.layout.writer(
            self.store.clone(),
            batch_id,
            attempt,
            self.staging_prefix(),
            on_new_file,
        )?))
    }

    async fn commit(&self, batch_id: u64, files: &[StagedFile]) -> SeamResult<Committed> {
        let prefix = self.staging_prefix();
        let manifest = Manifest {
            stream: self.stream.clone(),
            batch_id,
            committed_at: chrono::Utc::now(),
            files: files
                .iter()
                .map(|f| ManifestFile {
                    path: f.path.strip_prefix(&prefix).unwrap_or(&f.path).to_string(),
                    staged: f.path.clone(),
                    size: f.size,
                    rows: f.rows,
                    partition_values: f.partition_values.clone(),
                })
                .collect(),
            owner: self.owner.lock().expect("owner lock").clone(),
        };
        let body = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let landed_before = match self
            .store
            .put_opts(&self.manifest_path(batch_id), body.into(), opts)
            .await
        {
            Ok(_) => {
                // Crash injection (tests): the manifest decides the batch, nothing is published.
                landfall_core::failpoint::hit("after_manifest");
                self.publish(&manifest).await?;
                false
            }
            // An earlier attempt committed this batch: its manifest decides.
            Err(object_store::Error::AlreadyExists { .. }) => {
                self.complete(batch_id).await?;
                true
            }
            Err(e) => {
                return Err(SinkError::Commit {
                    location: crate::shown(&self.uri),
                    batch_id,
                    reason: e.to_string(),
                }
                .into());
            }
        };
        Ok(Committed {
            version: batch_id as i64,
            landed_before,
        })
    }

    async fn remove_files(&self, paths: &[String]) -> SeamResult<u64> {
        Ok(delete_all(&crate::shown(&self.uri), self.store.as_ref(), paths).await?)
    }

    async fn remove_orphans(&self, batch_id: u64, paths: &[String]) -> SeamResult<u64> {
        // The batch's manifest names the files of the attempt that landed; without one the
        // batch is not published here, and nothing is removed.
        let Some(m) = self.read_manifest(batch_id).await? else {
            return Ok(0);
        };
        let live: std::collections::HashSet<&str> = m
            .files
            .iter()
            .flat_map(|f| [f.path.as_str(), f.staged.as_str()])
            .collect();
        let doomed: Vec<String> = paths
            .iter()
            .filter(|p| !live.contains(p.as_str()))
            .cloned()
            .collect();
        Ok(delete_all(&crate::shown(&self.uri), self.store.as_ref(), &doomed).await?)
    }

    async fn table_version(&self) -> SeamResult<Option<i64>> {
        Ok(self.last_committed().await?.map(|v| v as i64))
    }

    async fn complete(&self, batch_id: u64) -> SeamResult<()> {
        if let Some(m) = self.read_manifest(batch_id).await? {
            self.publish(&m).await?;
            // A publication or manifest write killed half-way may have left the local store's
            // temporary files (`<name>#<digits>`) beside the final names.
            let mut names: Vec<String> = m.files.iter().map(|f| f.path.clone()).collect();
            names.push(self.manifest_path(batch_id).to_string());
            remove_local_temps(&self.uri, &names)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::local::LocalFileSystem;

    #[tokio::test]
    async fn delete_all_removes_the_local_stores_temporary_files_too() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = LocalFileSystem::new_with_prefix(root).unwrap();
        let uri = url::Url::from_directory_path(root).unwrap().to_string();
        std::fs::create_dir_all(root.join("tag=a")).unwrap();
        for f in [
            "tag=a/x.parquet",
            "tag=a/x.parquet#1",
            "tag=a/x.parquet#12",
            "tag=a/x.parquet#tmp",
            "tag=a/x.parquet.bak#1",
            "tag=a/y.parquet#1",
            "tag=a/z.parquet#3",
        ] {
            std::fs::write(root.join(f), b"data").unwrap();
        }
        let paths = vec![
            "tag=a/x.parquet".to_string(),
            // Never created; only its temporary file exists.
            "tag=a/z.parquet".to_string(),
            "tag=b/missing.parquet".to_string(),
        ];
        let n = delete_all(&uri, &store, &paths).await.unwrap();
        assert_eq!(n, 4);
        let mut left: Vec<String> = std::fs::read_dir(root.join("tag=a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["x.parquet#tmp", "x.parquet.bak#1", "y.parquet#1"]);
        // Not a local store: nothing to look at.
        assert_eq!(remove_local_temps("s3://bucket/t", &paths).unwrap(), 0);
    }
}
