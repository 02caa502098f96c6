//! `results.json`: writing it after a run and reading it back for `gleaner-bench report DIR`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::ReportError;
use crate::results::{EngineResult, PhaseResult, Results, Sample};

/// Name of the results file inside a run directory.
pub const RESULTS_FILE: &str = "results.json";

/// Newest `schema_version` this build understands.
pub const SCHEMA_VERSION: u32 = 1;

/// Path of `results.json` inside `dir`.
pub fn results_path(dir: &Path) -> PathBuf {
    dir.join(RESULTS_FILE)
}

/// Writes `results` as pretty JSON to `dir/results.json`, creating `dir` if needed.
///
/// Non-finite numbers (NaN, ±∞, e.g. a rate over a zero-length phase) are written as 0, or as
/// `null` for optional fields: JSON has no spelling for them, and serde_json would write `null`
/// into a plain number field, which then fails to read back and would lose the whole run.
/// The file is written under a temporary name and renamed, so an interrupted write never leaves
/// a truncated `results.json` behind. Errors name the file.
pub fn write_json(dir: &Path, results: &Results) -> io::Result<()> {
    let path = results_path(dir);
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    fs::create_dir_all(dir).map_err(named)?;
    let mut text = serde_json::to_string_pretty(&finite(results)).map_err(io::Error::other)?;
    text.push('\n');
    let tmp = dir.join(format!("{RESULTS_FILE}.tmp"));
    fs::write(&tmp, text).map_err(named)?;
    fs::rename(&tmp, &path).map_err(named)
}

/// Reads `dir/results.json`. A missing, unreadable or malformed file, or one written by a newer
/// schema, gives an error naming the file (and for malformed JSON, the line and column).
pub fn read_json(dir: &Path) -> Result<Results, ReportError> {
    let path = results_path(dir);
    let bytes = fs::read(&path).map_err(|e| ReportError::read(&path, e))?;
    let results: Results = serde_json::from_slice(&bytes).map_err(|source| ReportError::Json {
        path: path.clone(),
        source,
    })?;
    // Version 0 is what `Results::default()` carries; accept it so hand-built files work.
    if results.schema_version > SCHEMA_VERSION {
        return Err(ReportError::SchemaVersion {
            path,
            found: results.schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(results)
}

/// A copy of `results` whose floating-point fields are all finite (see [`write_json`]).
fn finite(results: &Results) -> Results {
    let mut r = results.clone();
    r.workload.space_budget = r.workload.space_budget.filter(|b| b.is_finite());
    fix(&mut r.workload.compressible);
    r.engines.iter_mut().for_each(finite_engine);
    r
}

fn finite_engine(engine: &mut EngineResult) {
    engine.phases.iter_mut().for_each(finite_phase);
    for Sample {
        t,
        ops_per_sec,
        device_read_mb_s,
        device_write_mb_s,
        ..
    } in &mut engine.timeseries
    {
        for x in [t, ops_per_sec, device_read_mb_s, device_write_mb_s] {
            fix(x);
        }
    }
}

fn finite_phase(p: &mut PhaseResult) {
    let l = &mut p.latency_us;
    for x in [
        &mut p.seconds,
        &mut p.ops_per_sec,
        &mut p.mb_per_sec,
        &mut p.write_amp,
        &mut p.stall_seconds,
        &mut p.space.space_amp_end,
        &mut p.space.space_amp_peak,
        &mut l.p50,
        &mut l.p99,
        &mut l.p999,
        &mut l.max,
        &mut l.mean,
    ] {
        fix(x);
    }
    let op_latencies = p.by_op.values_mut().map(|o| &mut o.latency_us);
    for l in p
        .delete_range
        .iter_mut()
        .map(|d| &mut d.latency_us)
        .chain(op_latencies)
    {
        for x in [&mut l.p50, &mut l.p99, &mut l.p999, &mut l.max, &mut l.mean] {
            fix(x);
        }
    }
    p.engine_stall_seconds = p.engine_stall_seconds.filter(|s| s.is_finite());
    if let Some(gc) = &mut p.gc {
        for x in [
            &mut gc.read_seconds,
            &mut gc.lookup_seconds,
            &mut gc.write_seconds,
            &mut gc.paced_seconds,
            &mut gc.job_seconds,
            &mut gc.compaction_wait_seconds,
        ] {
            fix(x);
        }
    }
}

/// 0 is the schema's own convention for "undefined" ratios (`write_amp` of a read-only phase).
fn fix(x: &mut f64) {
    if !x.is_finite() {
        *x = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn report_json_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let results = fixture::results();
        write_json(dir.path(), &results).unwrap();
        let text = fs::read_to_string(results_path(dir.path())).unwrap();
        assert!(text.starts_with("{\n  \"schema_version\": 1,"), "{text}");
        assert_eq!(read_json(dir.path()).unwrap(), results);
        // The temporary file is gone after the rename.
        assert!(!dir.path().join("results.json.tmp").exists());
    }

    #[test]
    fn report_json_round_trip_with_range_deletes_and_a_skipped_phase() {
        let dir = tempfile::tempdir().unwrap();
        let mut results = fixture::with_delete_range();
        results.engines[0].phases[3]
            .delete_range
            .as_mut()
            .unwrap()
            .latency_us
            .max = f64::NAN;
        write_json(dir.path(), &results).unwrap();
        let text = fs::read_to_string(results_path(dir.path())).unwrap();
        // Only the phases that have them carry the new fields.
        assert_eq!(text.matches("\"delete_range\"").count(), 2, "{text}");
        assert_eq!(
            text.matches("\"skipped\": \"not supported\"").count(),
            1,
            "{text}"
        );
        let back = read_json(dir.path()).unwrap();
        let ranges = back.engines[0].phases[3].delete_range.unwrap();
        assert_eq!((ranges.ops, ranges.keys_removed), (1_000, 61_234));
        assert_eq!(ranges.latency_us.max, 0.0, "non-finite written as 0");
        assert_eq!(back.engines[3], results.engines[3]);
        assert_eq!(back.engines[1], results.engines[1]);
    }

    #[test]
    fn report_json_results_from_before_the_shape_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let results = fixture::results();
        let mut json = serde_json::to_value(&results).unwrap();
        json["workload"]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| !["shape", "engine_sizes", "compression"].contains(&k.as_str()));
        for engine in json["engines"].as_array_mut().unwrap() {
            for phase in engine["phases"].as_array_mut().unwrap() {
                phase.as_object_mut().unwrap().remove("tree");
            }
        }
        let text = serde_json::to_string(&json).unwrap();
        assert!(!text.contains("\"tree\"") && !text.contains("\"shape\""));
        assert!(!text.contains("\"compression\""));
        fs::write(results_path(dir.path()), text).unwrap();
        let back = read_json(dir.path()).unwrap();
        // The only rule there was: `absolute`.
        assert_eq!(back.workload.shape, "absolute");
        // Every engine compressed with LZ4 before `--compression`.
        assert_eq!(back.workload.compression, "lz4");
        assert!(back.workload.engine_sizes.is_empty());
        assert!(
            back.engines
                .iter()
                .flat_map(|e| &e.phases)
                .all(|p| p.tree.is_none())
        );
        assert!(crate::report::markdown(&back).contains("- Shape: `absolute`"));
    }

    #[test]
    fn report_json_creates_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        write_json(&nested, &Results::default()).unwrap();
        assert_eq!(read_json(&nested).unwrap(), Results::default());
    }

    #[test]
    fn report_json_non_finite_numbers_still_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut results = fixture::results();
        results.workload.space_budget = Some(f64::INFINITY);
        let phase = &mut results.engines[0].phases[0];
        phase.write_amp = f64::NAN;
        phase.engine_stall_seconds = Some(f64::NAN);
        results.engines[0].timeseries[0].ops_per_sec = f64::NEG_INFINITY;
        write_json(dir.path(), &results).unwrap();
        let back = read_json(dir.path()).unwrap();
        assert_eq!(back.workload.space_budget, None);
        assert_eq!(back.engines[0].phases[0].write_amp, 0.0);
        assert_eq!(back.engines[0].phases[0].engine_stall_seconds, None);
        assert_eq!(back.engines[0].timeseries[0].ops_per_sec, 0.0);
    }

    #[test]
    fn report_json_missing_file_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_json(dir.path()).unwrap_err();
        assert!(matches!(err, ReportError::Io { .. }), "{err:?}");
        assert_eq!(err.path(), results_path(dir.path()));
        let text = err.to_string();
        assert!(text.contains("results.json"), "{text}");
        assert!(text.starts_with("cannot read "), "{text}");
    }

    #[test]
    fn report_json_malformed_file_names_it() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(results_path(dir.path()), "{\"schema_version\": 1,").unwrap();
        let err = read_json(dir.path()).unwrap_err();
        assert!(matches!(err, ReportError::Json { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("results.json"), "{text}");
        assert!(text.contains("line 1"), "{text}");

        // Valid JSON of the wrong shape is malformed too, and the field is named.
        fs::write(results_path(dir.path()), "{\"schema_version\": \"one\"}").unwrap();
        let text = read_json(dir.path()).unwrap_err().to_string();
        assert!(text.contains("results.json"), "{text}");
        assert!(text.contains("invalid type"), "{text}");
    }

    #[test]
    fn report_json_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let results = Results {
            schema_version: SCHEMA_VERSION + 1,
            ..Results::default()
        };
        write_json(dir.path(), &results).unwrap();
        let text = read_json(dir.path()).unwrap_err().to_string();
        assert!(text.contains("results.json"), "{text}");
        assert!(text.contains("schema version 2"), "{text}");
    }
}
