//! The report builder's error: always names the file it was working on, because the usual
//! reader is someone running `gleaner-bench report DIR` on a directory copied from elsewhere.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A report could not be read or written. Every variant names the file concerned.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReportError {
    /// Reading or writing a file failed (missing file, permissions, full disk).
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done: `read` or `write`.
        action: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// `results.json` is not valid JSON or does not match the schema.
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's complaint, with line and column.
        source: serde_json::Error,
    },
    /// `results.json` is valid but written by a newer harness than this one understands.
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// The version found in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// Drawing a plot failed.
    Plot {
        /// The PNG file being drawn.
        path: PathBuf,
        /// The drawing backend's complaint.
        message: String,
    },
}

impl ReportError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReportError::Io { path, .. }
            | ReportError::Json { path, .. }
            | ReportError::SchemaVersion { path, .. }
            | ReportError::Plot { path, .. } => path,
        }
    }

    pub(crate) fn read(path: &Path, source: io::Error) -> Self {
        ReportError::Io {
            path: path.to_path_buf(),
            action: "read",
            source,
        }
    }

    pub(crate) fn write(path: &Path, source: io::Error) -> Self {
        ReportError::Io {
            path: path.to_path_buf(),
            action: "write",
            source,
        }
    }

    pub(crate) fn plot(path: &Path, message: impl fmt::Display) -> Self {
        ReportError::Plot {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Io {
                path,
                action,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
            ReportError::Json { path, source } => {
                write!(
                    f,
                    "{} is not a valid results file: {source}",
                    path.display()
                )
            }
            ReportError::SchemaVersion {
                path,
                found,
                supported,
            } => write!(
                f,
                "{} has schema version {found}; this gleaner-bench reads up to version {supported}",
                path.display()
            ),
            ReportError::Plot { path, message } => {
                write!(f, "cannot draw {}: {message}", path.display())
            }
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportError::Io { source, .. } => Some(source),
            ReportError::Json { source, .. } => Some(source),
            ReportError::SchemaVersion { .. } | ReportError::Plot { .. } => None,
        }
    }
}
