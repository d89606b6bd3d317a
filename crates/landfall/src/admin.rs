//! Operator actions on one stream's state, run while the stream is stopped (the daemon holds
//! the state directory's lock while it runs): `landfall skip` marks a file skipped so a batch
//! that stopped on it can go on without it; `landfall reset` sets the whole state aside.

use chrono::Utc;
use landfall_config::StreamSpec;
use landfall_core::seams::FileFilter;
use landfall_core::{FileKey, FileRecord, FileState, SkipKind, SkipReason, StateStore};
use std::process::ExitCode;

/// Find the record a user means by `path`: as `landfall state` shows it (a local path with its
/// leading `/`, a URL), as an object path, or as a ledger key (`path@version`).
fn find(ledger: &dyn StateStore, spec: &StreamSpec, path: &str) -> Result<Vec<FileRecord>, String> {
    let object = landfall_engine::object_path(&spec.source.url, path);
    if let Some(r) = ledger
        .file(&FileKey(path.to_string()))
        .map_err(|e| e.message)?
    {
        return Ok(vec![r]);
    }
    if let Some(r) = ledger
        .file(&FileKey(object.to_string()))
        .map_err(|e| e.message)?
    {
        return Ok(vec![r]);
    }
    // Versioned keys (allow_overwrites): the versions of this path not yet done with. They
    // sort together, right after `<path>@`: read those, not the ledger.
    let prefix = format!("{object}@");
    let mut after = FileKey(prefix.clone());
    let mut open = Vec::new();
    loop {
        let page = ledger
            .files_page(FileFilter::default(), Some(&after), 100, 100)
            .map_err(|e| e.message)?;
        let mut past = false;
        for r in page.files {
            if !r.key.0.starts_with(&prefix) {
                past = true;
                break;
            }
            if r.meta.path == object && !r.state.is_terminal() {
                open.push(r);
            }
        }
        match page.next {
            Some(next) if !past => after = next,
            _ => return Ok(open),
        }
    }
}

pub fn skip(spec: &StreamSpec, path: &str, reason: Option<String>) -> ExitCode {
    match skip_file(spec, path, reason) {
        Ok(message) => {
            println!("{message}");
            ExitCode::SUCCESS
        }
        Err((message, code)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// `skip_file`'s code when the state directory is locked (by another process, or for a moment
/// by a read of this one).
pub const LOCKED: u8 = 75;

/// Mark one file of a stopped stream skipped by hand. `Ok`: what was done; `Err`: why not,
/// with the exit code (2: the request is wrong, 1: the state or table could not be read).
/// Called from a thread outside any async runtime (it builds its own to ask the table).
pub fn skip_file(
    spec: &StreamSpec,
    path: &str,
    reason: Option<String>,
) -> Result<String, (String, u8)> {
    let failed = |m: String| (m, 1u8);
    let ledger = landfall_state::open_rocks(&spec.name, &spec.state_dir).map_err(|e| {
        let code = if matches!(e, landfall_state::StateError::Locked { .. }) {
            LOCKED
        } else {
            1
        };
        (format!("stream `{}`: {e}", spec.name), code)
    })?;
    let records = find(&ledger, spec, path).map_err(|e| failed(e.to_string()))?;
    let record = match records.as_slice() {
        [one] => one,
        [] => {
            return Err((
                format!(
                    "stream `{}` has no file `{path}` waiting to be ingested (see `landfall state {}`)",
                    spec.name, spec.name
                ),
                2,
            ));
        }
        many => {
            return Err((
                format!(
                    "`{path}` matches {} versions; name one by its key: {}",
                    many.len(),
                    many.iter()
                        .map(|r| r.key.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                2,
            ));
        }
    };
    // A file of the open batch: if that batch's commit landed after all (the stream stopped
    // on an error after the commit), the file's rows are in the table; skipping it would
    // record a lie. Recovery at the next start records the batch instead.
    if record.state == FileState::InBatch
        && let Some(b) = record.batch_id
    {
        match batch_landed(spec, b) {
            Ok(true) => {
                return Err((
                    format!(
                        "batch {b} holding `{path}` already landed in the table {}; nothing to skip: start the stream and recovery records it",
                        spec.sink.location.shown_table_uri()
                    ),
                    2,
                ));
            }
            Ok(false) => {}
            Err(e) => {
                return Err(failed(format!(
                    "cannot ask the table whether batch {b} landed: {e}"
                )));
            }
        }
    }
    let reason = SkipReason {
        kind: SkipKind::Manual,
        detail: reason.unwrap_or_else(|| "skipped by hand".into()),
    };
    let r = ledger
        .skip_file(&record.key, reason, Utc::now())
        .map_err(|e| failed(e.message))?;
    let shown = landfall_engine::display_path(&spec.source.url, &r.meta.path);
    let why = r.skip.as_ref().map(|s| s.to_string()).unwrap_or_default();
    Ok(match r.batch_id {
        Some(b) if r.state == FileState::Skipped => {
            format!("{shown}: skipped ({why}); batch {b} runs without it at the next start")
        }
        _ => format!("{shown}: skipped ({why})"),
    })
}

/// Whether the table already holds batch `batch_id` of the stream.
fn batch_landed(spec: &StreamSpec, batch_id: u64) -> Result<bool, String> {
    let committer = landfall_engine::wiring::open_committer(spec).map_err(|e| e.message)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(committer.last_committed())
        .map(|t| t.is_some_and(|t| t >= batch_id))
        .map_err(|e| e.message)
}

/// Move the stream's state directory aside (`<dir>.reset-<timestamp>`), keeping it for
/// inspection. The next start begins a new state: batch ids continue after the table's.
pub fn reset(spec: &StreamSpec) -> ExitCode {
    let dir = &spec.state_dir;
    let mut moved = None;
    // The include_existing_files cutoff carries over: files that were pending in the old state
    // are not older than it, so the new state still ingests them.
    let mut cutoff = None;
    if dir.exists() {
        // Opening takes the lock: refuse while the daemon runs the stream.
        match landfall_state::open_rocks(&spec.name, dir) {
            Ok(old) => {
                cutoff = old
                    .meta(landfall_engine::stream::memory::EXISTING_CUTOFF_META)
                    .ok()
                    .flatten()
            }
            // A damaged state is what a reset is for: set it aside unless a process holds it
            // (RocksDB checks the lock before it reads, so a damaged open says nothing of it).
            Err(landfall_state::StateError::Corrupted { reason, .. }) => {
                if let Some(pid) = lock_holder(dir) {
                    eprintln!(
                        "error: stream `{}`: state directory {} is held by process {pid}: stop it first",
                        spec.name,
                        dir.display()
                    );
                    return ExitCode::FAILURE;
                }
                eprintln!(
                    "warning: stream `{}`: the state in {} is damaged ({reason}); setting it aside",
                    spec.name,
                    dir.display()
                );
                cutoff = landfall_state::open_rocks_read_only(&spec.name, dir)
                    .ok()
                    .and_then(|l| {
                        l.meta(landfall_engine::stream::memory::EXISTING_CUTOFF_META)
                            .ok()
                            .flatten()
                    });
                if cutoff.is_none() && !spec.include_existing_files {
                    eprintln!(
                        "warning: stream `{}`: the damaged state's include_existing_files cutoff \
                         could not be read: the new state takes its own at its start, so files \
                         that arrived before it and are not in the table yet are not ingested",
                        spec.name
                    );
                }
            }
            Err(e) => {
                eprintln!("error: stream `{}`: {e}", spec.name);
                return ExitCode::FAILURE;
            }
        }
        let aside = dir.with_file_name(format!(
            "{}.reset-{}",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
            Utc::now().format("%Y%m%dT%H%M%SZ")
        ));
        if let Err(e) = std::fs::rename(dir, &aside) {
            eprintln!("error: cannot move {} aside: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        moved = Some(aside);
    }
    // The new state says it was asked for, so the start check lets it continue after the
    // table's batches instead of refusing a new state facing a table with this stream's data.
    let marker = moved
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(no earlier state)".into());
    let written = landfall_state::open_rocks(&spec.name, dir)
        .map_err(|e| e.to_string())
        .and_then(|l| {
            if let Some(c) = &cutoff {
                l.set_meta(landfall_engine::stream::memory::EXISTING_CUTOFF_META, c)
                    .map_err(|e| e.message)?;
            }
            l.set_meta(landfall_engine::recovery::RESET_META, &marker)
                .map_err(|e| e.message)
        });
    if let Err(e) = written {
        eprintln!(
            "error: stream `{}`: cannot start a new state: {e}",
            spec.name
        );
        return ExitCode::FAILURE;
    }
    println!(
        "stream `{}`: {}; the next start begins a new state (batch ids continue after the table's; files already in the table are ingested again unless include_existing_files = false)",
        spec.name,
        match &moved {
            Some(p) => format!("state moved to {}", p.display()),
            None => "there was no state".into(),
        }
    );
    ExitCode::SUCCESS
}

/// The process holding the RocksDB lock of `dir` (an fcntl write lock on `LOCK`, as RocksDB
/// takes it), if another one does.
fn lock_holder(dir: &std::path::Path) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("LOCK"))
        .ok()?;
    // SAFETY: a zeroed flock is a valid value; F_GETLK only writes into it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    // SAFETY: a valid descriptor and a pointer to a live flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut fl) };
    (r == 0 && fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl.l_pid)
}
