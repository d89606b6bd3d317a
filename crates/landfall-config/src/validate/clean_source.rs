//! `[streams.<name>.clean_source]`: Auto Loader's `cleanSource` options, checked alone and
//! against the stream's source and table (the rules across streams are in `cross`).
//!
//! - `mode`: `off`, `delete` or `move` (any case, as Auto Loader writes `OFF`/`DELETE`/`MOVE`).
//! - `retention_duration`: default 30 days; at least 7 days for `delete`, as Auto Loader
//!   requires; any for `move` (a moved file can still be read).
//! - `move_destination`: required by `move` and only there. It must be in the source's
//!   bucket or container (a move there is a server-side copy, never a download), must not be
//!   the source or lie below it (the moved files would be listed as new), and must not
//!   overlap the table.

use super::{Ctx, K, duration};
use crate::model::StreamConfig;
use crate::spec::CleanSource;
use crate::store::Location;
use landfall_core::ArchiveMode;
use std::time::Duration;

/// Auto Loader's default `cleanSource.retentionDuration`.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Auto Loader's minimum retention for `DELETE`.
pub const MIN_DELETE_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The options alone: `Some(None)` when off, `None` when invalid (errors collected).
pub(super) fn clean_source(ctx: &mut Ctx, k: K, s: &StreamConfig) -> Option<Option<CleanSource>> {
    let c = &s.clean_source;
    let mode = match c.mode.as_deref().map(|m| m.trim().to_ascii_lowercase()) {
        None => None,
        Some(m) if m == "off" => None,
        Some(m) if m == "delete" => Some(ArchiveMode::Delete),
        Some(m) if m == "move" => Some(ArchiveMode::Move),
        Some(_) => {
            ctx.err(
                k("clean_source.mode"),
                format!(
                    "`{}` is not `off`, `delete` or `move`",
                    c.mode.as_deref().unwrap_or_default()
                ),
            );
            return None;
        }
    };
    let retention = match &c.retention_duration {
        Some(r) => ctx.ok(k("clean_source.retention_duration"), duration(r))?,
        None => DEFAULT_RETENTION,
    };
    let Some(mode) = mode else {
        // Off: the other keys may stay while archiving is paused.
        return Some(None);
    };
    if mode == ArchiveMode::Delete && retention < MIN_DELETE_RETENTION {
        ctx.err(
            k("clean_source.retention_duration"),
            format!(
                "`{}` is shorter than the 7 days `delete` needs (as Auto Loader): a file deleted sooner cannot be read again to repair the table",
                c.retention_duration.as_deref().unwrap_or_default()
            ),
        );
        return None;
    }
    let move_destination = match (mode, &c.move_destination) {
        (ArchiveMode::Move, Some(d)) => {
            Some(ctx.ok(k("clean_source.move_destination"), Location::parse(d))?)
        }
        (ArchiveMode::Move, None) => {
            ctx.err(
                k("clean_source.move_destination"),
                "`mode = \"move\"` needs a `move_destination`: where the ingested files go",
            );
            return None;
        }
        (ArchiveMode::Delete, Some(_)) => {
            ctx.err(
                k("clean_source.move_destination"),
                "is only for `mode = \"move\"`; `delete` moves nothing",
            );
            return None;
        }
        (ArchiveMode::Delete, None) => None,
    };
    Some(Some(CleanSource {
        mode,
        move_destination,
        retention,
    }))
}

/// The destination against the stream's own source and table.
pub(super) fn check_destination(
    ctx: &mut Ctx,
    k: K,
    clean: &CleanSource,
    source: &Location,
    table: &Location,
) {
    let Some(dest) = &clean.move_destination else {
        return;
    };
    let key = k("clean_source.move_destination");
    if !same_store(dest, source) {
        ctx.err(
            key,
            format!(
                "{} is not in the source's {} ({}); files are moved by a copy inside one store (write both locations in the same form)",
                dest.shown(),
                if source.kind == crate::store::StoreKind::Azure { "container" } else { "bucket" },
                source.shown()
            ),
        );
    } else if below(dest, source) {
        ctx.err(
            key,
            format!(
                "{} lies in the source {}; moved files would be listed and ingested again",
                dest.shown(),
                source.shown()
            ),
        );
    } else if below(source, dest) {
        ctx.err(
            key,
            format!(
                "{} holds the source {}; a file's path below the source, put below the destination, could fall back into the source or onto files not yet ingested",
                dest.shown(),
                source.shown()
            ),
        );
    } else if overlap(dest, table) {
        ctx.err(
            key,
            format!(
                "{} overlaps the table {}; moved files would sit among its data files",
                dest.shown(),
                table.shown()
            ),
        );
    }
}

/// Whether two locations are in one bucket or container (local paths: one file system tree),
/// whatever alias of the scheme names them (`s3`/`s3a`, `az`/`azure`).
pub fn same_store(a: &Location, b: &Location) -> bool {
    let scheme = |l: &Location| match l.url.scheme() {
        "s3a" => "s3".to_string(),
        "azure" => "az".to_string(),
        s => s.to_string(),
    };
    scheme(a) == scheme(b)
        && a.url.host_str() == b.url.host_str()
        && a.url.username() == b.url.username()
}

/// The object path's segments of a location, percent-decoded (`in%2Fx` and `in/x` name one
/// object prefix; `%2a` and `%2A` one character).
fn segments(l: &Location) -> Vec<String> {
    l.url
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .flat_map(|s| {
            let decoded = percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned();
            decoded
                .split('/')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether `inner` is `outer` or lies below it, segment by segment, in one store.
pub fn below(inner: &Location, outer: &Location) -> bool {
    same_store(inner, outer) && segments(inner).starts_with(&segments(outer))
}

/// Whether one of two locations lies in the other.
pub fn overlap(a: &Location, b: &Location) -> bool {
    below(a, b) || below(b, a)
}
