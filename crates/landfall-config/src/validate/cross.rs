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
        moved_files_seen_again(ctx, s, streams);
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

/// A stream moving its files (`clean_source.mode = "move"`) into a location that a stream
/// listing the same files also lists: that stream would find each file twice, at its source
/// and at its destination, and ingest it twice. (A stream whose source holds the destination
/// but not the files' source is an archive reader, and welcome.)
fn moved_files_seen_again(ctx: &mut Ctx, s: &StreamSpec, streams: &[StreamSpec]) {
    let Some(dest) = s
        .clean_source
        .as_ref()
        .and_then(|c| c.move_destination.as_ref())
    else {
        return;
    };
    // The stream's own source against its destination is checked with its options.
    for other in streams.iter().filter(|o| o.name != s.name) {
        let reads_dest = other.source.contains(dest) || dest.contains(&other.source);
        let reads_files = other.source.contains(&s.source) || s.source.contains(&other.source);
        if reads_dest && reads_files {
            ctx.err(
                format!("streams.{}.clean_source.move_destination", s.name),
                format!(
                    "{} is listed by stream `{}` (source {}), which also lists this stream's files: each moved file would be ingested there a second time",
                    dest.shown(),
                    other.name,
                    other.source.shown()
                ),
            );
        }
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
