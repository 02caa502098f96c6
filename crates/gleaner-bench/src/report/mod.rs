//! Reports: `results.json`, `report.md` and PNG plots, and rebuilding them from the JSON.

mod error;
mod format;
mod json;
mod markdown;
mod select;

#[cfg(test)]
mod fixture;

pub use error::ReportError;
pub use json::{RESULTS_FILE, SCHEMA_VERSION, read_json, results_path, write_json};
pub use markdown::markdown;
pub use select::{PhaseKey, Reference};
