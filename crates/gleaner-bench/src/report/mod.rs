//! Reports: `results.json`, `report.md` and PNG plots, and rebuilding them from the JSON.
//!
//! After a run the harness writes `results.json` with [`write_json`] and then calls
//! [`rebuild`]; `gleaner-bench report DIR` calls [`rebuild`] alone, so a report can be
//! regenerated (or restyled) from the JSON without rerunning anything. The layout of every file
//! is documented in `docs/benchmarks.md`.

mod error;
mod format;
mod json;
mod markdown;
mod plots;
mod select;

#[cfg(test)]
pub(crate) mod fixture;

use std::fs;
use std::path::Path;

pub use error::ReportError;
pub use json::{RESULTS_FILE, SCHEMA_VERSION, read_json, results_path, write_json};
pub use markdown::markdown;
pub use plots::plots;
pub use select::{PhaseKey, Reference};

/// Name of the Markdown report inside a run directory.
pub const REPORT_FILE: &str = "report.md";

/// Reads `dir/results.json` and writes `dir/report.md` and the plots next to it, replacing any
/// earlier ones. Stops at the first file it cannot read or write, and names it.
pub fn rebuild(dir: &Path) -> Result<(), ReportError> {
    let results = read_json(dir)?;
    let report = dir.join(REPORT_FILE);
    fs::write(&report, markdown(&results)).map_err(|e| ReportError::write(&report, e))?;
    plots(dir, &results)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_rebuild_from_json_alone() {
        let dir = tempfile::tempdir().unwrap();
        let results = fixture::results();
        write_json(dir.path(), &results).unwrap();
        rebuild(dir.path()).unwrap();

        let report = fs::read_to_string(dir.path().join(REPORT_FILE)).unwrap();
        assert_eq!(report, markdown(&results));
        let mut files: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "bars_gc_jobs.png",
                "bars_gc_read.png",
                "bars_gc_write.png",
                "bars_ops_per_sec.png",
                "bars_space_amp.png",
                "bars_write_amp.png",
                "device_io.png",
                "disk.png",
                "report.md",
                "results.json",
                "throughput.png",
            ]
        );
        for file in files.iter().filter(|f| f.ends_with(".png")) {
            let bytes = fs::read(dir.path().join(file)).unwrap();
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{file}");
        }
    }

    #[test]
    fn report_rebuild_without_results_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = rebuild(dir.path()).unwrap_err();
        assert!(err.to_string().contains("results.json"), "{err}");
        assert!(!dir.path().join(REPORT_FILE).exists());
    }
}
