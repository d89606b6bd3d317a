//! Listing options shared by the configuration and discovery.

use serde::{Deserialize, Serialize};

/// `incremental_listing`: whether a listing round may list only the keys after the discovery
/// cursor (the last key seen) instead of the whole prefix. Auto Loader's
/// `cloudFiles.useIncrementalListing`; the rule each value follows is in
/// `landfall_discovery::incremental`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IncrementalListing {
    /// Incremental while the keys seen so far arrive in lexical order; full listings otherwise.
    #[default]
    Auto,
    /// Incremental, with a full listing at start and every `full_listing_interval` rounds.
    On,
    /// Every listing is a full one.
    Off,
}

impl IncrementalListing {
    pub const ALL: [IncrementalListing; 3] = [
        IncrementalListing::Auto,
        IncrementalListing::On,
        IncrementalListing::Off,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IncrementalListing::Auto => "auto",
            IncrementalListing::On => "on",
            IncrementalListing::Off => "off",
        }
    }

    /// The value as written in a configuration: `auto`, `on`, `off`, and Auto Loader's
    /// spellings `true` / `false` for `on` / `off` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(IncrementalListing::Auto),
            "on" | "true" => Some(IncrementalListing::On),
            "off" | "false" => Some(IncrementalListing::Off),
            _ => None,
        }
    }
}

impl std::fmt::Display for IncrementalListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_written() {
        for v in IncrementalListing::ALL {
            assert_eq!(IncrementalListing::parse(v.as_str()), Some(v));
        }
        assert_eq!(
            IncrementalListing::parse("TRUE"),
            Some(IncrementalListing::On)
        );
        assert_eq!(
            IncrementalListing::parse("false"),
            Some(IncrementalListing::Off)
        );
        assert_eq!(IncrementalListing::parse("sometimes"), None);
        assert_eq!(IncrementalListing::default(), IncrementalListing::Auto);
    }
}
