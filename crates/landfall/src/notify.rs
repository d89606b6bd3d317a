//! `landfall notifications list|setup|teardown <stream>`: the cloud resources of an S3
//! notification stream that landfall creates itself (no `queue_url`): an SQS queue, with
//! `sns = true` an SNS topic and subscription, and the bucket notification for the stream's
//! prefix. What setup created is recorded in the stream's state, so teardown removes exactly
//! that. `setup` and `teardown` need the stream stopped (they write its state); the daemon also
//! sets up by itself at the first start in notification mode.
//!
//! `--location <name>` does the same for a file-events location: one queue and one bucket
//! notification for the whole location, recorded in its event cache.

use crate::admin::LOCKED;
use clap::ValueEnum;
use landfall_config::{LocationSpec, StreamSpec};
use landfall_engine::notify_setup::{self, Notes, QueueOwner};
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Action {
    /// Show the recorded resources and whether each exists.
    List,
    /// Create the resources (idempotent) and record them.
    Setup,
    /// Remove the recorded resources and forget them.
    Teardown,
}

/// `landfall notifications <action> <stream>`: the resources of a notification stream,
/// recorded in its ledger.
pub fn run(spec: &StreamSpec, action: Action) -> ExitCode {
    let not_owner = format!(
        "stream `{}` does not read a queue of its own (discovery is not \"notifications\"); it has no notification resources",
        spec.name
    );
    run_for(
        QueueOwner::of_stream(spec),
        &not_owner,
        action,
        |read_only| {
            if read_only {
                landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir)
            } else {
                landfall_state::open_rocks(&spec.name, &spec.state_dir)
            }
        },
    )
}

/// `landfall notifications <action> --location <name>`: the resources of a file-events
/// location, recorded in its event cache.
pub fn run_location(spec: &LocationSpec, action: Action) -> ExitCode {
    let not_owner = format!(
        "location `{}` has file_events = false; it has no notification resources",
        spec.name
    );
    run_for(
        QueueOwner::of_location(spec),
        &not_owner,
        action,
        |read_only| {
            if read_only {
                landfall_state::open_event_cache_read_only(&spec.name, &spec.state_dir)
            } else {
                landfall_state::open_event_cache(&spec.name, &spec.state_dir)
            }
        },
    )
}

/// Run `action` for `owner` (`None`: the owner reads no queue of its own, `not_owner` says so)
/// with its notes opened by `open` (read-only for `list`).
fn run_for<N: Notes>(
    owner: Option<QueueOwner>,
    not_owner: &str,
    action: Action,
    open: impl FnOnce(bool) -> Result<N, landfall_state::StateError>,
) -> ExitCode {
    let Some(owner) = owner else {
        eprintln!("error: {not_owner}");
        return ExitCode::from(2);
    };
    if action == Action::Setup && notify_setup::setup_request(&owner).is_none() {
        return setup_unowned(&owner);
    }
    match open(action == Action::List) {
        Ok(notes) => run_owner(&owner, &notes, action),
        Err(e) => opening_failed(&owner, e),
    }
}

fn opening_failed(owner: &QueueOwner, e: landfall_state::StateError) -> ExitCode {
    let code = if matches!(e, landfall_state::StateError::Locked { .. }) {
        LOCKED
    } else {
        1
    };
    eprintln!("error: {}: {e}", owner.what);
    ExitCode::from(code)
}

fn run_owner<N: Notes + ?Sized>(owner: &QueueOwner, notes: &N, action: Action) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<Vec<String>, landfall_core::SeamError> = rt.block_on(async {
        match action {
            Action::List => match notify_setup::status(owner, notes).await? {
                None => Ok(vec![format!(
                    "{}: no notification resources recorded",
                    owner.what
                )]),
                Some((r, s)) => {
                    let exists = |b: Option<bool>| match b {
                        Some(true) => "exists",
                        Some(false) => "MISSING",
                        None => "-",
                    };
                    let mut out = vec![
                        format!(
                            "bucket notification {} on s3://{}/{}: {}",
                            r.notification_id,
                            r.bucket,
                            r.prefix,
                            exists(Some(s.bucket_notification))
                        ),
                        format!(
                            "queue {}: {}",
                            r.queue_url.as_deref().unwrap_or("-"),
                            exists(s.queue)
                        ),
                    ];
                    if let Some(t) = &r.topic_arn {
                        out.push(format!("topic {t}: {}", exists(s.topic)));
                    }
                    let tags: Vec<String> =
                        r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    out.push(format!("tags: {}", tags.join(", ")));
                    Ok(out)
                }
            },
            Action::Setup => {
                let c = notify_setup::setup(owner, notes).await?;
                Ok(c.map(|c| {
                    vec![format!(
                        "set up: queue {}{}, bucket notification {} for s3://{}/{}",
                        c.queue_url.as_deref().unwrap_or("-"),
                        c.topic_arn
                            .as_deref()
                            .map(|t| format!(" via topic {t}"))
                            .unwrap_or_default(),
                        c.notification_id,
                        c.bucket,
                        c.prefix
                    )]
                })
                .unwrap_or_default())
            }
            Action::Teardown => {
                let done = notify_setup::teardown(owner, notes).await?;
                Ok(if done.is_empty() {
                    vec![format!("{}: nothing recorded to remove", owner.what)]
                } else {
                    done
                })
            }
        }
    });
    match result {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::FAILURE
        }
    }
}

/// `setup` for an owner that does not own its resources: an Azure queue is created if
/// missing; a given SQS queue_url is left as it is.
fn setup_unowned(owner: &QueueOwner) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(notify_setup::create_azure_queue(owner)) {
        Ok(Some(true)) => println!(
            "{}: created the Azure Storage Queue; now subscribe it to the storage account's Event Grid events (deploy/azure/event-grid.md)",
            owner.what
        ),
        Ok(Some(false)) => println!("{}: the Azure Storage Queue exists", owner.what),
        Ok(None) => println!(
            "{} reads a queue it does not own (queue_url): nothing to set up",
            owner.what
        ),
        Err(e) => {
            eprintln!("error: {}", e.message);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
