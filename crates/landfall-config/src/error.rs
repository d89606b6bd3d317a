//! Configuration errors. Validation collects every problem and names each one's key.

use std::fmt;
use std::path::PathBuf;

/// One invalid setting: the dotted key path and why it is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub key: String,
    pub reason: String,
}

impl ValidationError {
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ValidationError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "line {line}: environment variable `{var}` is not set (write ${{{var}:-default}} to give a default)"
    )]
    MissingVariable { line: usize, var: String },
    #[error("line {line}: unterminated `${{` (write $$ for a literal dollar sign)")]
    UnterminatedVariable { line: usize },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("invalid configuration:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<ValidationError>),
}
