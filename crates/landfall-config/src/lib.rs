//! landfall's configuration: TOML stream definitions, read with the `config` crate into
//! documented serde structs (`deny_unknown_fields`), then validated into typed [`StreamSpec`]s.
//!
//! Loading has three steps, each with its own error: `${VAR}` / `${VAR:-default}` interpolation
//! of the raw text ([`interpolate`]), deserialisation (an unknown key or a wrong type names the
//! key), and validation ([`validate`]), which reports every problem at once as
//! `<key path>: <reason>`.

mod error;
mod interpolate;
mod locations;
mod model;
mod notifications;
mod spec;
mod store;
mod suggest;
mod validate;

pub use error::{ConfigError, ValidationError};
pub use interpolate::interpolate;
pub use landfall_core::IncrementalListing;
pub use locations::{LocationConfig, LocationSpec};
pub use model::*;
pub use notifications::{DiscoveryMode, NotificationsConfig, NotificationsSpec, QueueSpec};
pub use spec::{
    AutoCompaction, CleanSource, DiscoverySpec, FileEventsSpec, HealthTable, RecordMode, SinkSpec,
    StreamSpec, Trigger, ValidatedConfig,
};
pub use store::{Location, StoreConfig, StoreKind, StoreOptions};
pub use validate::{DEFAULT_FULL_LISTING_INTERVAL, MIN_FILE_AGE, validate};

use std::path::Path;

/// Read, interpolate, parse and validate a config file.
pub fn load(path: &Path) -> Result<ValidatedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    load_str(&text, &path.display().to_string())
}

/// As [`load`], from text; `origin` names the source in messages.
pub fn load_str(text: &str, origin: &str) -> Result<ValidatedConfig, ConfigError> {
    let raw = parse_str(text, origin)?;
    validate(raw)
}

/// Interpolate and deserialise without validating.
pub fn parse_str(text: &str, origin: &str) -> Result<LandfallConfig, ConfigError> {
    let text = interpolate(text, |k| std::env::var(k).ok())?;
    let cfg = config::Config::builder()
        .add_source(config::File::from_str(&text, config::FileFormat::Toml))
        .build()
        .map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
    // Every unknown key is reported in one run: serde stops at the first, so each one found is
    // set aside and the rest read again, in the file's order. A table that then lacks a
    // required key (the unknown one was its misspelling) is set aside whole, unreported: its
    // error is the unknown key already reported.
    let mut tree = cfg.cache;
    let mut unknown = Vec::new();
    let mut trimmed: Vec<String> = Vec::new();
    loop {
        match tree.clone().try_deserialize::<LandfallConfig>() {
            Ok(parsed) if unknown.is_empty() => return Ok(parsed),
            Ok(_) => break,
            Err(e) => {
                let message = e.to_string();
                if unknown.len() >= MAX_UNKNOWN_KEYS {
                    break;
                }
                if let Some(table) = suggest::removed_key_was_required(&message, &trimmed)
                    && suggest::remove_table(&mut tree, &table)
                {
                    continue;
                }
                match suggest::remove_unknown_key(&mut tree, &message) {
                    Some(parent) => {
                        trimmed.push(parent);
                        unknown.push(suggest::with_suggestion(&message));
                    }
                    None => {
                        // Another kind of error: reported after the unknown keys (or alone).
                        unknown.push(suggest::with_suggestion(&message));
                        break;
                    }
                }
            }
        }
    }
    Err(ConfigError::Parse {
        origin: origin.to_string(),
        message: unknown.join(&format!("\n{origin}: ")),
    })
}

/// At most this many unknown keys are reported in one run.
const MAX_UNKNOWN_KEYS: usize = 50;
