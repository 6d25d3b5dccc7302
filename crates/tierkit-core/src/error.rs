//! One error type for the whole core. Every variant that comes from user input names where the
//! problem is (file and byte offset or line, or the configuration key), so that front ends can
//! print it as a single line and exit with status 2.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A trace (native or text) that cannot be read: corrupt, truncated or unparsable.
    #[error("{path}: {location}{msg}")]
    BadTrace { path: String, location: String, msg: String },

    /// A configuration value that cannot work: unknown name, ill-typed parameter, impossible
    /// capacity. `key` names what the user wrote.
    #[error("{key}: {msg}")]
    BadConfig { key: String, msg: String },

    /// An operating-system error on a named file.
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },

    /// A refusal to overwrite a user's file.
    #[error("{path}: file exists (use --force to overwrite)")]
    Exists { path: String },

    /// A broken internal invariant (a bug in tierkit, not in the input).
    #[error("internal invariant violated: {0}")]
    Invariant(String),

    /// The run was stopped from outside (Ctrl-C from the Python front end).
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn at_offset(path: &str, offset: u64, msg: impl Into<String>) -> Self {
        Error::BadTrace { path: path.to_string(), location: format!("offset {offset}: "), msg: msg.into() }
    }
    pub fn at_line(path: &str, line: u64, msg: impl Into<String>) -> Self {
        Error::BadTrace { path: path.to_string(), location: format!("line {line}: "), msg: msg.into() }
    }
    pub fn trace(path: &str, msg: impl Into<String>) -> Self {
        Error::BadTrace { path: path.to_string(), location: String::new(), msg: msg.into() }
    }
    pub fn config(key: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::BadConfig { key: key.into(), msg: msg.into() }
    }
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().display().to_string(), source }
    }
    /// True for errors caused by what the user gave (exit status 2 in the CLI).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, Error::Invariant(_))
    }
}
