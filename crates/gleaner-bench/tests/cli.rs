//! The `gleaner-bench` command: bad input exits with code 2 before anything is written, and
//! the tiny quick preset writes results, report and plots that `report` can rebuild.

use std::path::Path;
use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gleaner-bench"))
        .args(args)
        .output()
        .expect("run gleaner-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` (with `--out OUT` appended) and expects exit code 2, a message containing
/// `needle`, and no output directory.
fn refused(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut all: Vec<&str> = args.to_vec();
    let out_text = out.to_string_lossy().into_owned();
    all.extend(["--out", &out_text]);
    let o = bench(&all);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(
        stderr(&o).contains(needle),
        "{args:?}: `{needle}` not in {}",
        stderr(&o)
    );
    assert!(!out.exists(), "{args:?} wrote its output directory");
}

#[test]
fn bad_input_is_refused_with_exit_code_2_before_anything_runs() {
    let base = ["run", "--keys", "100", "--quiet"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    refused(&with(&["--engine", "mysql"]), "unknown engine `mysql`");
    refused(&with(&["--engine", "gleaner:nope"]), "gc_policy");
    refused(
        &with(&["--engine", "gleaner,memtable_sise=1"]),
        "unknown option `memtable_sise`",
    );
    refused(
        &with(&["--engine", "null", "--value-size", "fixed:0"]),
        "value-size",
    );
    refused(&with(&["--engine", "null", "--dist", "zipf:x"]), "zipf");
    refused(
        &with(&["--engine", "null", "--phases", "load,explode"]),
        "phase",
    );
    refused(
        &with(&["--engine", "null", "--phases", "read"]),
        "must start with `load`",
    );
    refused(
        &with(&["--engine", "null", "--cache", "12 parsecs"]),
        "--cache",
    );
    refused(
        &with(&["--engine", "null", "--space-budget", "0.5"]),
        "--space-budget",
    );
    refused(&with(&["--engine", "null", "--threads", "0"]), "--threads");
    refused(
        &with(&["--engine", "null", "--delete-range-keys", "0"]),
        "--delete-range-keys",
    );
    refused(
        &with(&[
            "--engine",
            "null",
            "--phases",
            "load,delete-range",
            "--delete-range-keys",
            "101",
        ]),
        "--delete-range-keys",
    );
    refused(
        &with(&[
            "--engine",
            "null",
            "--phases",
            "load,delete-range",
            "--delete-range-ops",
            "18446744073709551615",
        ]),
        "--delete-range-ops",
    );
    refused(&with(&["--engine", "null", "--shape", "deep"]), "--shape");
    refused(&["quick", "--scale", "tiny", "--shape", "deep"], "--shape");
    refused(
        &with(&["--engine", "null", "--compressible", "1.5"]),
        "--compressible",
    );
    refused(&["run", "--engine", "null", "--quiet"], "--load-bytes");
    refused(&["run", "--keys", "10", "--quiet"], "--engine");
    refused(
        &with(&["--engine", "null", "--phase-time-limit", "0"]),
        "--phase-time-limit",
    );
    refused(
        &with(&[
            "--engine",
            "null",
            "--ycsb",
            "d",
            "--ycsb-ops",
            "18446744073709551615",
        ]),
        "keys",
    );
    refused(
        &[
            "run",
            "--engine",
            "null",
            "--keys",
            "4000",
            "--key-size",
            "8",
            "--ycsb",
            "d,e",
            "--quiet",
        ],
        "--key-size",
    );
    refused(
        &[
            "run",
            "--engine",
            "null",
            "--load-bytes",
            "10000GiB",
            "--quiet",
        ],
        "free",
    );
    if !gleaner_bench::engine::PEERS_BUILT {
        refused(&with(&["--engine", "rocksdb-blob"]), "`peers` feature");
    }
}

#[test]
fn a_non_empty_output_directory_needs_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("keep.txt"), "mine").expect("write");
    let out = dir.path().to_string_lossy().into_owned();
    let args = [
        "run", "--engine", "null", "--keys", "50", "--phases", "load", "--quiet", "--out", &out,
    ];
    let o = bench(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert!(!dir.path().join("results.json").exists());
    let mut forced = args.to_vec();
    forced.push("--force");
    let o = bench(&forced);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("results.json").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("keep.txt")).expect("read"),
        "mine"
    );
}

fn assert_outputs(dir: &Path) {
    for f in ["results.json", "report.md", "throughput.png", "disk.png"] {
        let meta = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 0, "{f} is empty");
    }
}

#[test]
fn quick_tiny_writes_results_report_and_plots_and_report_rebuilds_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("quick");
    let out_text = out.to_string_lossy().into_owned();
    let o = bench(&["quick", "--scale", "tiny", "--quiet", "--out", &out_text]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("gleaner:terarkdb"),
        "the report table is printed: {stdout}"
    );
    assert_outputs(&out);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("read"))
            .expect("json");
    let phases = results["engines"][0]["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["load", "update", "read", "scan"]);
    assert!(phases[1]["ops"].as_u64().expect("ops") > 0);
    std::fs::remove_file(out.join("report.md")).expect("remove");
    std::fs::remove_file(out.join("disk.png")).expect("remove");
    let o = bench(&["report", &out_text]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_outputs(&out);
    let o = bench(&["report", &dir.path().join("missing").to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("results.json"), "{}", stderr(&o));
}
