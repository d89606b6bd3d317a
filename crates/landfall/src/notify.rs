//! `landfall notifications list|setup|teardown <stream>`: the cloud resources of an S3
//! notification stream that landfall creates itself (no `queue_url`): an SQS queue, with
//! `sns = true` an SNS topic and subscription, and the bucket notification for the stream's
//! prefix. What setup created is recorded in the stream's state, so teardown removes exactly
//! that. `setup` and `teardown` need the stream stopped (they write its state); the daemon also
//! sets up by itself at the first start in notification mode.

use crate::admin::LOCKED;
use clap::ValueEnum;
use landfall_config::{DiscoverySpec, StreamSpec};
use landfall_engine::notify_setup;
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

pub fn run(spec: &StreamSpec, action: Action) -> ExitCode {
    if spec.discovery == DiscoverySpec::Listing {
        eprintln!(
            "error: stream `{}` lists its source (discovery = \"listing\"); it has no notification resources",
            spec.name
        );
        return ExitCode::from(2);
    }
    if action == Action::Setup && notify_setup::setup_request(spec).is_none() {
        return setup_unowned(spec);
    }
    let opened = if action == Action::List {
        landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir)
    } else {
        landfall_state::open_rocks(&spec.name, &spec.state_dir)
    };
    let ledger = match opened {
        Ok(l) => l,
        Err(e) => {
            let code = if matches!(e, landfall_state::StateError::Locked { .. }) {
                LOCKED
            } else {
                1
            };
            eprintln!("error: stream `{}`: {e}", spec.name);
            return ExitCode::from(code);
        }
    };
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
            Action::List => match notify_setup::status(spec, &ledger).await? {
                None => Ok(vec![format!(
                    "stream `{}`: no notification resources recorded",
                    spec.name
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
                let c = notify_setup::setup(spec, &ledger).await?;
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
                let done = notify_setup::teardown(spec, &ledger).await?;
                Ok(if done.is_empty() {
                    vec![format!(
                        "stream `{}`: nothing recorded to remove",
                        spec.name
                    )]
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

/// `setup` for a stream that does not own its resources: an Azure queue is created if missing;
/// a given SQS queue_url is left as it is.
fn setup_unowned(spec: &StreamSpec) -> ExitCode {
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
    match rt.block_on(notify_setup::create_azure_queue(spec)) {
        Ok(Some(true)) => println!(
            "stream `{}`: created the Azure Storage Queue; now subscribe it to the storage account's Event Grid events (deploy/azure/event-grid.md)",
            spec.name
        ),
        Ok(Some(false)) => println!("stream `{}`: the Azure Storage Queue exists", spec.name),
        Ok(None) => println!(
            "stream `{}` reads a queue it does not own (notifications.queue_url): nothing to set up",
            spec.name
        ),
        Err(e) => {
            eprintln!("error: {}", e.message);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
