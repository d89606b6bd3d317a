//! Rules across streams and locations: one queue per consumer, one state directory per
//! stream, no state directory inside an event cache or a table.

use super::Ctx;
use crate::spec::StreamSpec;
use crate::store::StoreOptions;
use std::path::{Path, PathBuf};

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

pub(super) fn cross_checks(
    ctx: &mut Ctx,
    streams: &[StreamSpec],
    locations: &[crate::LocationSpec],
) {
    // Each consumer deletes what it read, including events it filtered out: two on one queue
    // delete each other's events.
    let mut queues: Vec<(String, String)> = Vec::new();
    for l in locations {
        if let Some(q) = l.queue.as_ref().map(|n| queue_id(n, &l.options)) {
            if let Some((_, other)) = queues.iter().find(|(id, _)| *id == q) {
                ctx.err(
                    format!("locations.{}.queue_name", l.name),
                    format!(
                        "reads the same queue ({q}) as {other}; each location needs its own queue"
                    ),
                );
            }
            queues.push((q, format!("location `{}`", l.name)));
        }
        let dir = absolute(&l.state_dir);
        if let Some(o) = locations.iter().take_while(|o| o.name != l.name).find(|o| {
            let od = absolute(&o.state_dir);
            od.starts_with(&dir) || dir.starts_with(&od)
        }) {
            ctx.err(
                format!("locations.{}.state_dir", l.name),
                format!(
                    "{} nests with the event cache of location `{}`",
                    dir.display(),
                    o.name
                ),
            );
        }
    }
    for s in streams {
        if let crate::DiscoverySpec::Notifications(n) = &s.discovery
            && let q = queue_id(n, &s.source_options)
            && let Some((_, other)) = queues.iter().find(|(id, _)| *id == q)
            && other.starts_with("location")
        {
            ctx.err(
                format!("streams.{}.notifications", s.name),
                format!("reads the same queue ({q}) as {other}; a notification stream needs a queue of its own (or use discovery = \"file_events\")"),
            );
        }
    }
    for (i, s) in streams.iter().enumerate() {
        let dir = absolute(&s.state_dir);
        if let Some(l) = locations.iter().find(|l| {
            let ld = absolute(&l.state_dir);
            ld.starts_with(&dir) || dir.starts_with(&ld)
        }) {
            ctx.err(
                format!("streams.{}.state_dir", s.name),
                format!("{} nests with the event cache of location `{}` ({}); give the stream another state_dir", dir.display(), l.name, l.state_dir.display()),
            );
        }
        // A stream deletes the messages it consumed, including events it filtered out: two
        // streams on one queue would delete each other's events.
        if let Some(q) = queue_of(s)
            && let Some(other) = streams[..i].iter().find(|o| queue_of(o) == Some(q))
        {
            ctx.err(
                format!("streams.{}.notifications", s.name),
                format!("reads the same queue ({q}) as stream `{}`; each stream needs its own queue (fan out with SNS), or one would delete the other's events", other.name),
            );
        }
        archived_files_shared(ctx, s, streams);
        let dir = absolute(&s.state_dir);
        for other in &streams[..i] {
            if absolute(&other.state_dir) == dir {
                ctx.err(
                    format!("streams.{}.state_dir", s.name),
                    format!("{} is also the state directory of stream `{}`; two streams sharing one corrupt each other", dir.display(), other.name),
                );
            }
        }
        for t in streams {
            if let Some(table) = t.sink.location.local_path()
                && dir.starts_with(&table)
            {
                ctx.err(
                    format!("streams.{}.state_dir", s.name),
                    format!(
                        "{} lies inside the table {} of stream `{}`; keep state outside tables",
                        dir.display(),
                        table.display(),
                        t.name
                    ),
                );
            }
        }
    }
}

/// A stream archiving its files (`clean_source`) must be the only one reading them: another
/// stream over the same files would find them deleted or moved before it read them, or
/// (listing the destination too) ingest them a second time. A destination must also stay
/// clear of every table, bad-records path and other destination. It may lie in another
/// stream's source: that stream reads the archive (and reads nothing of this stream's
/// source, or the first rule refuses it).
fn archived_files_shared(ctx: &mut Ctx, s: &StreamSpec, streams: &[StreamSpec]) {
    use super::clean_source::overlap;
    let Some(clean) = &s.clean_source else {
        return;
    };
    let key = |field: &str| format!("streams.{}.clean_source{field}", s.name);
    for other in streams.iter().filter(|o| o.name != s.name) {
        if overlap(&other.source, &s.source) {
            ctx.err(
                key(".mode"),
                format!(
                    "stream `{}` also reads {} (source {}): this stream would {} files before that one read them; archive from one stream only",
                    other.name,
                    s.source.shown(),
                    other.source.shown(),
                    if clean.mode == landfall_core::ArchiveMode::Delete { "delete" } else { "move" }
                ),
            );
        }
    }
    let Some(dest) = &clean.move_destination else {
        return;
    };
    for other in streams.iter().filter(|o| o.name != s.name) {
        let mut clash = |what: &str, loc: &crate::Location| {
            ctx.err(
                key(".move_destination"),
                format!(
                    "{} overlaps {what} of stream `{}` ({}); moved files could overwrite or be overwritten there",
                    dest.shown(),
                    other.name,
                    loc.shown()
                ),
            );
        };
        if overlap(dest, &other.sink.location) {
            clash("the table", &other.sink.location);
        }
        if let Some((bad, _)) = &other.bad_records
            && overlap(dest, bad)
        {
            clash("the bad-records path", bad);
        }
        if let Some(od) = other
            .clean_source
            .as_ref()
            .and_then(|c| c.move_destination.as_ref())
            && overlap(dest, od)
        {
            clash("the move destination", od);
        }
    }
    if let Some((bad, _)) = &s.bad_records
        && overlap(dest, bad)
    {
        ctx.err(
            key(".move_destination"),
            format!(
                "{} overlaps this stream's bad-records path {}",
                dest.shown(),
                bad.shown()
            ),
        );
    }
}

/// The queue of a notification spec, as far as the configuration tells it apart: an SQS
/// queue by name (a URL's last segment is its name), an Azure queue by account and name.
fn queue_id(n: &crate::NotificationsSpec, options: &StoreOptions) -> String {
    let option = |k: &str| {
        options
            .iter()
            .find(|(n, _)| n.as_str() == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    match &n.queue {
        crate::QueueSpec::Sqs { url: Some(u), .. } => u
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(u)
            .to_string(),
        crate::QueueSpec::Sqs {
            url: None, name, ..
        } => name.clone(),
        crate::QueueSpec::AzureQueue { name } => {
            format!("{}/{name}", option("azure_storage_account_name"))
        }
    }
}

/// The queue a notification stream reads, when known from the configuration.
fn queue_of(s: &StreamSpec) -> Option<&str> {
    match &s.discovery {
        crate::DiscoverySpec::Notifications(n) => match &n.queue {
            crate::QueueSpec::Sqs { url: Some(u), .. } => Some(u.as_str()),
            crate::QueueSpec::Sqs {
                url: None, name, ..
            } => Some(name.as_str()),
            crate::QueueSpec::AzureQueue { name } => Some(name.as_str()),
        },
        crate::DiscoverySpec::Listing | crate::DiscoverySpec::FileEvents(_) => None,
    }
}
