//! Redis 7.0's own test suite against gleaner-server: Redis's Tcl harness and nine of its unit
//! files, vendored byte for byte in `tests/redis-7.0/` (origin, license and checksums in its
//! `VENDORED.md`), each unit run against a server of its own, every test's outcome checked
//! against three committed lists in `tests/redis-suite/`:
//!
//! - `expected-pass.txt`, lines `UNIT<TAB>test name`: tests that must pass;
//! - `excluded.txt`, lines `UNIT<TAB>test name<TAB>reason`: tests gleaner-server will never pass
//!   by design (another data type, replication, persistence or other Redis internals); the
//!   reason starts with a category of [`EXCLUDED_CATEGORIES`];
//! - `pending.txt`, same format: tests that must pass one day and do not yet; the reason says
//!   what is missing (`needs: ...`). It is empty once the server is complete.
//!
//! A unit's test fails, with the complete list of differences, when an expected-pass test did
//! not pass (failed, was skipped, or never ran); a test passed but is listed as excluded or
//! pending; a test ran and is in no list; or a listed test was never reported by the harness
//! (a stale entry), or was skipped by it. Tests the harness skips by their tags (`[ignore]`:
//! `slow`, `external:skip`, `singledb:skip`, and the `needs:` tags of [`HARNESS_OPTIONS`]) need
//! no entry.
//!
//! The harness can also stop short: an `[exception]` (an error outside any test, such as a
//! command it sends before each file being refused) ends the unit, and an error in a
//! `start_server` block outside its tests (reported as an `[err]` that names no test) ends that
//! block. Such an abort is listed like a test, under the name `[exception] MESSAGE` or
//! `[error] MESSAGE`, in pending.txt or excluded.txt; an abort in no list fails the unit. After
//! a listed abort, excluded and pending entries the harness never reached are counted as "not
//! reached" rather than stale (expected-pass entries must still pass).
//!
//! Blessing: with `GLEANER_REDIS_SUITE_BLESS=1` the tests rewrite the lists from what they
//! observed instead of failing (`GLEANER_REDIS_SUITE_BLESS=1 cargo test -j2 -p gleaner-server
//! --test redis_suite`): the tests that passed go to expected-pass.txt; every other test and
//! abort keeps its excluded or pending entry and reason if it had one, and otherwise goes to
//! pending.txt with the reason `unclassified`; entries for tests not reported are dropped
//! (kept, after an abort, when not reached). Only the units that ran are rewritten. Review the
//! diff, and classify the `unclassified` entries, before committing.
//!
//! Tcl (`tclsh`, 8.5 or later) is required: without it the tests fail and say to install the
//! `tcl` package (`.ci/run` does).

mod common;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use common::Server;

/// The vendored harness and unit files.
const VENDORED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/redis-7.0");
/// The three lists.
const LISTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/redis-suite");
/// Set to `1` to rewrite the lists from the observed results instead of failing.
const BLESS_VAR: &str = "GLEANER_REDIS_SUITE_BLESS";

/// How long one unit may run, harness start-up included: generous, for a loaded 2-core machine
/// (a unit takes a few seconds). A unit still running then is killed, and its test fails with
/// the output so far.
const UNIT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the harness's output may stay open after the harness exited (its test client exits
/// as soon as the harness closed their socket).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The harness's options besides `--port` and `--single`:
/// - `--host`: external mode, against the server started here (the harness then starts no
///   server of its own and skips tests tagged `external:skip`);
/// - `--singledb`: no `SELECT 9` on connect; tests tagged `singledb:skip` are skipped;
/// - `--ignore-encoding`, `--ignore-digest`: no `OBJECT ENCODING` / `DEBUG DIGEST` checks in
///   the harness's assertion helpers;
/// - `--tags -slow`: the slow tests are skipped (the command line);
/// - `--durable`: an error that is not an assertion (such as `-ERR unknown command`) fails
///   that test alone, instead of ending the whole unit with an `[exception]`.
///
/// Besides these, each run gets `--skipfile` with the unit's excluded tests
/// ([`write_skipfile`]): the harness reports them as skipped without running them. Run, they
/// would stop the unit at their first command of a data type the server does not have, or
/// fail halfway and leave the harness's shared client inside `MULTI` or in RESP3 with
/// deferred raw replies, failing later tests that the server passes.
///
/// External mode starts exactly one test client, so `--clients` does not apply.
const HARNESS_OPTIONS: &[&str] = &[
    "--host",
    "127.0.0.1",
    "--singledb",
    "--ignore-encoding",
    "--ignore-digest",
    "--tags",
    "-slow",
    "--durable",
];

/// Categories an excluded test's reason starts with (then `: ` and free text, or nothing).
const EXCLUDED_CATEGORIES: &[&str] = &[
    "data type",
    "replication",
    "persistence",
    "scripting",
    "modules",
    "pub/sub",
    "redis internal",
];
/// Categories a pending test's reason starts with: what is missing (`needs: ...`), or
/// `unclassified` (written by a bless, to be replaced by hand).
const PENDING_CATEGORIES: &[&str] = &["needs", "unclassified"];

macro_rules! units {
    ($($test:ident => $unit:literal,)*) => {
        $(
            #[test]
            fn $test() {
                run_and_check($unit);
            }
        )*
        /// The units, in the lists' order.
        const UNITS: &[&str] = &[$($unit),*];
    };
}

// One test per unit: cargo runs them side by side up to its thread count, each against a
// server of its own.
units! {
    unit_type_string => "unit/type/string",
    unit_keyspace => "unit/keyspace",
    unit_expire => "unit/expire",
    unit_type_incr => "unit/type/incr",
    unit_scan => "unit/scan",
    unit_multi => "unit/multi",
    unit_protocol => "unit/protocol",
    unit_quit => "unit/quit",
    unit_info_command => "unit/info-command",
}

// ---------------------------------------------------------------------------------------------
// The vendored files

/// The files under `dir`, as paths relative to it with `/` separators, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).expect("under the root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Every vendored file is byte for byte the one VENDORED.md lists, and every file is listed.
#[test]
fn vendored_files_match_their_recorded_sha256() {
    let root = Path::new(VENDORED);
    let manifest = fs::read_to_string(root.join("VENDORED.md")).expect("read VENDORED.md");
    let mut listed: HashMap<String, String> = HashMap::new();
    for line in manifest.lines() {
        let Some((hash, path)) = line.split_once("  ") else {
            continue;
        };
        if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            let dup = listed.insert(path.to_string(), hash.to_ascii_lowercase());
            assert!(dup.is_none(), "VENDORED.md lists {path} twice");
        }
    }
    assert!(!listed.is_empty(), "VENDORED.md lists no file");
    let mut problems = Vec::new();
    let present = files_under(root);
    for path in &present {
        if path == "VENDORED.md" {
            continue;
        }
        let bytes = fs::read(root.join(path)).expect("read a vendored file");
        match listed.get(path) {
            None => problems.push(format!("{path}: not listed in VENDORED.md")),
            Some(want) if *want != sha256_hex(&bytes) => problems.push(format!(
                "{path}: SHA-256 {} differs from the recorded {want} (vendored files are \
                 never edited)",
                sha256_hex(&bytes)
            )),
            Some(_) => {}
        }
    }
    let present: HashSet<&String> = present.iter().collect();
    let mut missing: Vec<&String> = listed.keys().filter(|p| !present.contains(p)).collect();
    missing.sort();
    for path in missing {
        problems.push(format!("{path}: listed in VENDORED.md but missing"));
    }
    assert!(
        problems.is_empty(),
        "the vendored Redis test files in {VENDORED} differ from VENDORED.md:\n  {}",
        problems.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// Running one unit

/// What one run of the harness printed, and how it ended.
struct HarnessRun {
    /// Its standard output and error, interleaved as written.
    output: String,
    /// Its exit status; `None` when it was killed at [`UNIT_TIMEOUT`].
    status: Option<ExitStatus>,
    /// How long it ran.
    elapsed: Duration,
    /// The server's stderr.
    server_stderr: String,
}

/// Copies the directory `from` to `to` (created).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for path in files_under(from) {
        let dest = to.join(&path);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).expect("create a directory of the copy");
        }
        fs::copy(from.join(&path), &dest).expect("copy a vendored file");
    }
}

/// Kills every process of the process group `pgid` (the harness and its test client).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn require_tclsh() {
    assert!(
        common::have("tclsh"),
        "tclsh was not found: Redis's test suite needs Tcl 8.5 or later. Install the `tcl` \
         package (`sudo apt-get install tcl`; .ci/run installs it when missing)"
    );
}

/// Runs `unit` once: copies the vendored tree into a fresh directory (the harness writes
/// `tests/tmp/` under its working directory), starts a server on a fresh database, and runs the
/// harness against it, in a process group of its own so that it and its test client can be
/// killed together.
fn run_harness(unit: &str, baseport: u32) -> HarnessRun {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let tree = tmp.path().join("tree");
    copy_tree(Path::new(VENDORED), &tree);
    let db = tmp.path().join("db");
    let skipfile = tmp.path().join("excluded-tests");
    write_skipfile(unit, &skipfile);
    let server = Server::start(&db, &[]);

    let (reader, writer) = std::io::pipe().expect("pipe");
    let mut cmd = Command::new("tclsh");
    cmd.arg("tests/test_helper.tcl")
        .args(HARNESS_OPTIONS)
        .args(["--port", &server.port().to_string()])
        // The harness's own listening port is looked for in [baseport - 32, baseport): a
        // range per unit, so units running side by side do not race for it.
        .args(["--baseport", &baseport.to_string()])
        .args(["--single", unit])
        .arg("--skipfile")
        .arg(&skipfile)
        .current_dir(&tree)
        // Colours only when TERM names an xterm; the parser strips them anyway.
        .env_remove("TERM")
        .stdin(Stdio::null())
        .stdout(writer.try_clone().expect("pipe"))
        .stderr(writer)
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn tclsh");
    // The pipe's write ends now belong to the harness and its client alone.
    drop(cmd);
    let pgid = child.id();

    let output = Arc::new(Mutex::new(Vec::new()));
    let (eof_tx, eof_rx) = mpsc::channel();
    let collected = Arc::clone(&output);
    thread::spawn(move || {
        let mut reader = reader;
        let mut buf = [0u8; 8192];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => collected
                    .lock()
                    .expect("output lock")
                    .extend_from_slice(&buf[..n]),
            }
        }
        let _ = eof_tx.send(());
    });

    let (status_tx, status_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = status_tx.send(child.wait());
    });
    let status = match status_rx.recv_timeout(UNIT_TIMEOUT) {
        Ok(status) => Some(status.expect("wait for tclsh")),
        Err(_) => {
            // Still running, so the group still exists: kill it and reap the harness.
            kill_group(pgid);
            let _ = status_rx.recv_timeout(DRAIN_TIMEOUT);
            None
        }
    };
    let elapsed = started.elapsed();
    if eof_rx.recv_timeout(DRAIN_TIMEOUT).is_err() {
        // A process of the group still holds the output open (so the group exists).
        kill_group(pgid);
        let _ = eof_rx.recv_timeout(DRAIN_TIMEOUT);
    }
    let output = String::from_utf8_lossy(&output.lock().expect("output lock")).into_owned();
    let server_stderr = server.stderr();
    drop(server);
    HarnessRun {
        output: strip_ansi(&output),
        status,
        elapsed,
        server_stderr,
    }
}

/// Writes the names of `unit`'s excluded tests to `path`, one per line, for the harness's
/// `--skipfile` (exact names; none starts with `/`, which would make it a regular expression).
fn write_skipfile(unit: &str, path: &Path) {
    let lists = Lists::load();
    let names: Vec<&str> = lists
        .list(ListKind::Excluded)
        .iter()
        .filter(|e| e.unit == unit && !is_abort(&e.name))
        .map(|e| {
            assert!(
                !e.name.starts_with('/'),
                "an excluded name that reads as a regexp: {:?}",
                e.name
            );
            e.name.as_str()
        })
        .collect();
    std::fs::write(path, names.join("\n") + "\n").expect("write the skip file");
}

/// Runs `unit` and checks, or with [`BLESS_VAR`] rewrites, the lists.
fn run_and_check(unit: &str) {
    require_tclsh();
    let index = UNITS.iter().position(|u| *u == unit).expect("a known unit") as u32;
    let mut attempt = 0;
    let (run, report) = loop {
        let run = run_harness(unit, 22_000 + 64 * index + 1_000 * attempt);
        let report = parse_output(unit, &run.output);
        // Another program may take the port the harness found free before the harness binds
        // it; then nothing ran, and the unit is run again on other ports.
        if report.records == 0 && run.output.contains("couldn't open socket") && attempt < 2 {
            attempt += 1;
            continue;
        }
        break (run, report);
    };

    let ended = match run.status {
        None => Some(format!(
            "the harness was killed after {UNIT_TIMEOUT:?} (a timeout)"
        )),
        Some(_) if report.done || report.exception.is_some() => None,
        Some(status) => Some(format!(
            "the harness exited ({status}) without finishing the unit or reporting an exception"
        )),
    };
    if let Some(why) = ended {
        panic!(
            "redis suite {unit}: {why}. Its output so far:\n{}\n--- gleaner-server stderr:\n{}",
            run.output, run.server_stderr
        );
    }

    let _guard = LISTS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let lists = Lists::load();
    let problems = lists.format_problems();
    assert!(
        problems.is_empty(),
        "the lists in {LISTS} are malformed:\n  {}",
        problems.join("\n  ")
    );
    let check = compare(unit, &report, &lists);
    let bless = std::env::var(BLESS_VAR).is_ok_and(|v| v == "1");
    if bless {
        let blessed = bless_unit(unit, &report, &lists);
        blessed.save();
        let check = compare(unit, &report, &blessed);
        summary(unit, &check, &run, " (lists rewritten)");
        return;
    }
    summary(unit, &check, &run, "");
    if !check.problems.is_empty() {
        panic!(
            "redis suite {unit}: the results differ from the lists in {LISTS}:\n  {}\n\n\
             Fix the server, or update the lists by hand, or rewrite them from these results \
             with {BLESS_VAR}=1 (then review the diff and classify what lands in pending.txt as \
             `unclassified`).\n--- harness output:\n{}",
            check.problems.join("\n  "),
            run.output
        );
    }
}

/// Prints one line per unit, also when it passes (straight to stderr: the test harness would
/// capture `eprintln!`).
fn summary(unit: &str, check: &Check, run: &HarnessRun, note: &str) {
    let mut line = format!(
        "redis suite {unit}: {} passed, {} excluded, {} pending",
        check.passed, check.excluded, check.pending
    );
    if check.not_reached > 0 {
        let _ = write!(
            line,
            " ({} listed tests not reached after an abort)",
            check.not_reached
        );
    }
    if check.skipped > 0 {
        let _ = write!(line, ", {} skipped by the harness's tags", check.skipped);
    }
    let _ = write!(line, "; {:.1} s{note}", run.elapsed.as_secs_f64());
    let _ = writeln!(std::io::stderr(), "{line}");
}

// ---------------------------------------------------------------------------------------------
// The harness's output

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Pass,
    /// `[skip]` or `[ignore]`: not run.
    Skip,
    Fail,
}

/// One test as the harness reported it.
#[derive(Debug)]
struct TestResult {
    name: String,
    /// The worst outcome of the tests of this name (a unit may run two tests of one name).
    outcome: Outcome,
    /// For a failure, the harness's details; for a skip, its reason.
    detail: String,
}

/// What the harness reported for one unit.
#[derive(Debug, Default)]
struct Report {
    /// The tests, by the order of their first report.
    tests: Vec<TestResult>,
    /// Aborts (`[exception] ...`, `[error] ...`), named as the lists name them.
    aborts: Vec<String>,
    /// The `[exception]` marker, if the unit ended with one.
    exception: Option<String>,
    /// Whether the harness said the unit was done.
    done: bool,
    /// How many `[ok]`, `[err]`, `[skip]`, `[ignore]`, `[exception]` lines it printed.
    records: usize,
}

impl Report {
    fn add(&mut self, name: &str, outcome: Outcome, detail: String) {
        if let Some(t) = self.tests.iter_mut().find(|t| t.name == name) {
            if outcome > t.outcome {
                t.outcome = outcome;
                t.detail = detail;
            }
        } else {
            self.tests.push(TestResult {
                name: name.to_string(),
                outcome,
                detail,
            });
        }
    }

    fn get(&self, name: &str) -> Option<&TestResult> {
        self.tests.iter().find(|t| t.name == name)
    }
}

/// Removes ANSI escape sequences (`ESC [ ... letter`), which the harness writes around its
/// status words when TERM names an xterm.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The line prefixes that start a record of the harness's output; any other line continues the
/// record before it (an error's details).
fn record_kind(line: &str) -> Option<(&'static str, &str)> {
    for kind in ["ok", "err", "skip", "ignore", "exception"] {
        if let Some(rest) = line
            .strip_prefix('[')
            .and_then(|l| l.strip_prefix(kind))
            .and_then(|l| l.strip_prefix("]: "))
        {
            return Some((kind, rest));
        }
    }
    // "[1/1 done]: unit/x (0 seconds)"
    if line.starts_with('[')
        && let Some((head, _)) = line.split_once("]: ")
        && head.ends_with(" done")
    {
        return Some(("done", ""));
    }
    None
}

/// The reasons the harness gives in an `[ignore]` line (`NAME: REASON`, or `REASON` alone for
/// a whole block), from `tags_acceptable` in tests/support/server.tcl.
fn split_ignore(rest: &str) -> (Option<&str>, &str) {
    const REASONS: &[&str] = &["Tag: ", "Not supported ", "large memory flag not provided"];
    for (i, _) in rest.match_indices(": ") {
        let reason = &rest[i + 2..];
        if REASONS.iter().any(|r| reason.starts_with(r)) {
            return (Some(&rest[..i]), reason);
        }
    }
    (None, rest)
}

/// Replaces the varying parts of an abort's message (Tcl channel names such as
/// `sock55d0c8a0f2b0`) so that a listed abort matches the next run's.
fn stable_message(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("sock") {
        out.push_str(&rest[..i + 4]);
        rest = &rest[i + 4..];
        let hex = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        if hex > 0 {
            out.push('*');
            rest = &rest[hex..];
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

fn parse_output(unit: &str, output: &str) -> Report {
    let mut records: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for line in output.lines() {
        let line = line.trim_end_matches('\r');
        match record_kind(line) {
            Some((kind, rest)) => records.push((kind, rest, Vec::new())),
            None => {
                if let Some(last) = records.last_mut() {
                    last.2.push(line);
                }
            }
        }
    }
    let in_file = format!(" in tests/{unit}.tcl");
    let mut report = Report::default();
    for (kind, rest, more) in records {
        match kind {
            "ok" => {
                // "NAME (12 ms)"
                let name = match rest.rsplit_once(" (") {
                    Some((name, ms))
                        if ms
                            .strip_suffix(" ms)")
                            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) =>
                    {
                        name
                    }
                    _ => rest,
                };
                report.add(name, Outcome::Pass, String::new());
            }
            "err" => {
                if let Some(name) = rest.strip_suffix(in_file.as_str()) {
                    report.add(name, Outcome::Fail, more.join("\n"));
                } else {
                    // An error outside any test, in a start_server block (caught by --durable):
                    // the rest of the block did not run. The harness drops the first 10
                    // characters of the message (as if it began with "assertion:"); the next
                    // line, the start of the error's trace, has it whole.
                    let message = more
                        .iter()
                        .find(|l| l.len() == rest.len() + 10 && l.ends_with(rest))
                        .copied()
                        .unwrap_or(rest);
                    report
                        .aborts
                        .push(format!("[error] {}", stable_message(message)));
                }
            }
            "skip" => report.add(rest, Outcome::Skip, "skipped".to_string()),
            "ignore" => {
                if let (Some(name), reason) = split_ignore(rest) {
                    report.add(name, Outcome::Skip, reason.to_string());
                }
            }
            "exception" => {
                let message = rest.strip_prefix("Executing test client: ").unwrap_or(rest);
                let marker = format!("[exception] {}", stable_message(message));
                report.aborts.push(marker.clone());
                report.exception = Some(marker);
            }
            "done" => report.done = true,
            _ => unreachable!("record kinds are the ones above"),
        }
        if kind != "done" {
            report.records += 1;
        }
    }
    report
}

// ---------------------------------------------------------------------------------------------
// The lists

/// Serializes reading and rewriting the lists among the units' tests.
static LISTS_LOCK: Mutex<()> = Mutex::new(());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Pass,
    Excluded,
    Pending,
}

impl ListKind {
    const ALL: [ListKind; 3] = [ListKind::Pass, ListKind::Excluded, ListKind::Pending];

    fn file(self) -> &'static str {
        match self {
            ListKind::Pass => "expected-pass.txt",
            ListKind::Excluded => "excluded.txt",
            ListKind::Pending => "pending.txt",
        }
    }

    fn header(self) -> &'static str {
        match self {
            ListKind::Pass => {
                "# Redis 7.0 test-suite tests gleaner-server must pass (tests/redis_suite.rs).\n\
                 # Lines: UNIT<TAB>test name. Rewritten by GLEANER_REDIS_SUITE_BLESS=1.\n"
            }
            ListKind::Excluded => {
                "# Redis 7.0 test-suite tests gleaner-server will never pass, by design\n\
                 # (tests/redis_suite.rs). Lines: UNIT<TAB>test name<TAB>reason; the reason starts\n\
                 # with a category: data type, replication, persistence, scripting, modules,\n\
                 # pub/sub, redis internal. An abort of the harness is named `[exception] MESSAGE`\n\
                 # or `[error] MESSAGE`.\n"
            }
            ListKind::Pending => {
                "# Redis 7.0 test-suite tests gleaner-server must pass one day but does not yet\n\
                 # (tests/redis_suite.rs); empty once the server is complete. Lines:\n\
                 # UNIT<TAB>test name<TAB>needs: what is missing (or `unclassified`, from\n\
                 # GLEANER_REDIS_SUITE_BLESS=1, to be classified). An abort of the harness is\n\
                 # named `[exception] MESSAGE` or `[error] MESSAGE`.\n"
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    unit: String,
    name: String,
    /// Empty in expected-pass.txt.
    reason: String,
    /// The line it was read from (0 for new entries).
    line: usize,
}

#[derive(Debug, Clone, Default)]
struct Lists {
    pass: Vec<Entry>,
    excluded: Vec<Entry>,
    pending: Vec<Entry>,
    /// Lines that could not be read, with why.
    unreadable: Vec<String>,
}

impl Lists {
    fn list(&self, kind: ListKind) -> &Vec<Entry> {
        match kind {
            ListKind::Pass => &self.pass,
            ListKind::Excluded => &self.excluded,
            ListKind::Pending => &self.pending,
        }
    }

    fn list_mut(&mut self, kind: ListKind) -> &mut Vec<Entry> {
        match kind {
            ListKind::Pass => &mut self.pass,
            ListKind::Excluded => &mut self.excluded,
            ListKind::Pending => &mut self.pending,
        }
    }

    fn load() -> Lists {
        let mut lists = Lists::default();
        for kind in ListKind::ALL {
            let path = Path::new(LISTS).join(kind.file());
            let text = match fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => panic!("read {}: {e}", path.display()),
            };
            for (i, line) in text.lines().enumerate() {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let fields: Vec<&str> = line.split('\t').collect();
                let want = if kind == ListKind::Pass { 2 } else { 3 };
                if fields.len() != want || fields.iter().any(|f| f.is_empty()) {
                    lists.unreadable.push(format!(
                        "{}:{}: expected {want} non-empty tab-separated fields: {line:?}",
                        kind.file(),
                        i + 1
                    ));
                    continue;
                }
                lists.list_mut(kind).push(Entry {
                    unit: fields[0].to_string(),
                    name: fields[1].to_string(),
                    reason: fields.get(2).unwrap_or(&"").to_string(),
                    line: i + 1,
                });
            }
        }
        lists
    }

    /// Unknown units, unknown reason categories, entries listed twice.
    fn format_problems(&self) -> Vec<String> {
        let mut problems = self.unreadable.clone();
        let mut seen: HashMap<(&str, &str), String> = HashMap::new();
        for kind in ListKind::ALL {
            for e in self.list(kind) {
                let at = format!("{}:{}", kind.file(), e.line);
                if !UNITS.contains(&e.unit.as_str()) {
                    problems.push(format!("{at}: unknown unit {:?}", e.unit));
                }
                let categories = match kind {
                    ListKind::Pass => &[][..],
                    ListKind::Excluded => EXCLUDED_CATEGORIES,
                    ListKind::Pending => PENDING_CATEGORIES,
                };
                if kind != ListKind::Pass {
                    let category = e.reason.split(':').next().unwrap_or_default();
                    if !categories.contains(&category) {
                        problems.push(format!(
                            "{at}: the reason {:?} does not start with one of {categories:?}",
                            e.reason
                        ));
                    }
                }
                if kind == ListKind::Pass && is_abort(&e.name) {
                    problems.push(format!(
                        "{at}: an abort cannot be expected to pass: {:?}",
                        e.name
                    ));
                }
                if let Some(first) = seen.insert((&e.unit, &e.name), at.clone()) {
                    problems.push(format!(
                        "{at}: {} {:?} is listed already at {first}",
                        e.unit, e.name
                    ));
                }
            }
        }
        problems
    }

    /// Where `unit`'s `name` is listed.
    fn find(&self, unit: &str, name: &str) -> Option<(ListKind, &Entry)> {
        ListKind::ALL.into_iter().find_map(|kind| {
            self.list(kind)
                .iter()
                .find(|e| e.unit == unit && e.name == name)
                .map(|e| (kind, e))
        })
    }

    fn save(&self) {
        fs::create_dir_all(LISTS).expect("create the lists' directory");
        for kind in ListKind::ALL {
            let mut entries: Vec<&Entry> = self.list(kind).iter().collect();
            // Grouped by unit in UNITS order; within a unit, the order given.
            entries.sort_by_key(|e| UNITS.iter().position(|u| *u == e.unit));
            let mut text = kind.header().to_string();
            for e in entries {
                if kind == ListKind::Pass {
                    let _ = writeln!(text, "{}\t{}", e.unit, e.name);
                } else {
                    let _ = writeln!(text, "{}\t{}\t{}", e.unit, e.name, e.reason);
                }
            }
            let path = Path::new(LISTS).join(kind.file());
            fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
    }
}

fn is_abort(name: &str) -> bool {
    name.starts_with("[exception] ") || name.starts_with("[error] ")
}

/// The lists are readable, name known units, use the reason categories, and list no test twice.
#[test]
fn lists_are_well_formed() {
    let _guard = LISTS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let problems = Lists::load().format_problems();
    assert!(
        problems.is_empty(),
        "the lists in {LISTS} are malformed:\n  {}",
        problems.join("\n  ")
    );
}

/// docs/server.md's table of excluded tests ("The excluded tests") lists exactly the tests of
/// excluded.txt, with the same reasons, so the documentation never drifts from what runs.
#[test]
fn the_excluded_tests_are_documented() {
    let _guard = LISTS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/server.md"))
            .expect("read docs/server.md");
    let section = docs
        .split("### The excluded tests")
        .nth(1)
        .expect("docs/server.md has a section \"The excluded tests\"");
    let mut documented: Vec<(String, String, String)> = section
        .lines()
        .skip_while(|l| !l.starts_with("| `"))
        .take_while(|l| l.starts_with("| `"))
        .map(|l| {
            // `| `unit` | name | reason |`, with `\|` for a bar inside a cell.
            let cells: Vec<String> = l
                .trim_matches('|')
                .replace("\\|", "\u{1}")
                .split('|')
                .map(|c| c.trim().replace('\u{1}', "|"))
                .collect();
            assert_eq!(cells.len(), 3, "a malformed row of the excluded tests: {l}");
            (
                cells[0].trim_matches('`').to_string(),
                cells[1].clone(),
                cells[2].clone(),
            )
        })
        .collect();
    let mut listed: Vec<(String, String, String)> = Lists::load()
        .list(ListKind::Excluded)
        .iter()
        .map(|e| (e.unit.clone(), e.name.clone(), e.reason.clone()))
        .collect();
    documented.sort();
    listed.sort();
    assert_eq!(
        documented, listed,
        "docs/server.md's excluded tests differ from excluded.txt: update the table"
    );
}

// ---------------------------------------------------------------------------------------------
// Comparing

/// A unit's results against the lists.
#[derive(Debug, Default)]
struct Check {
    problems: Vec<String>,
    passed: usize,
    excluded: usize,
    pending: usize,
    skipped: usize,
    not_reached: usize,
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(|l| format!("\n        {l}"))
        .collect()
}

fn compare(unit: &str, report: &Report, lists: &Lists) -> Check {
    let mut check = Check::default();
    let p = &mut check.problems;
    for t in &report.tests {
        let listed = lists.find(unit, &t.name);
        let name = &t.name;
        match (t.outcome, listed) {
            (Outcome::Pass, Some((ListKind::Pass, _))) => check.passed += 1,
            (Outcome::Pass, Some((kind, e))) => p.push(format!(
                "passed, but listed in {} ({}): move it to expected-pass.txt: {name:?}",
                kind.file(),
                e.reason
            )),
            (Outcome::Pass, None) => p.push(format!(
                "passed, and in no list: add it to expected-pass.txt: {name:?}"
            )),
            (Outcome::Fail, Some((ListKind::Pass, _))) => p.push(format!(
                "expected to pass, but failed: {name:?}{}",
                first_lines(&t.detail, 4)
            )),
            (Outcome::Fail, Some((ListKind::Excluded, _))) => check.excluded += 1,
            (Outcome::Fail, Some((ListKind::Pending, _))) => check.pending += 1,
            (Outcome::Fail, None) => p.push(format!(
                "failed, and in no list: add it to excluded.txt or pending.txt with a reason: \
                 {name:?}{}",
                first_lines(&t.detail, 4)
            )),
            // Excluded tests are skipped by the skip file.
            (Outcome::Skip, Some((ListKind::Excluded, _))) => check.excluded += 1,
            (Outcome::Skip, Some((kind, _))) => p.push(format!(
                "listed in {}, but the harness skipped it ({}): {name:?}",
                kind.file(),
                t.detail
            )),
            (Outcome::Skip, None) => check.skipped += 1,
        }
    }
    for abort in &report.aborts {
        match lists.find(unit, abort) {
            Some((ListKind::Excluded, _)) => check.excluded += 1,
            Some((ListKind::Pending, _)) => check.pending += 1,
            // Refused by format_problems.
            Some((ListKind::Pass, _)) => {}
            None => p.push(format!(
                "the harness stopped short, and this abort is in no list (the tests after it \
                 did not run): {abort:?}"
            )),
        }
    }
    let aborted = !report.aborts.is_empty();
    for kind in ListKind::ALL {
        for e in lists.list(kind).iter().filter(|e| e.unit == unit) {
            let reported = if is_abort(&e.name) {
                report.aborts.contains(&e.name)
            } else {
                report.get(&e.name).is_some()
            };
            if reported {
                continue;
            }
            match kind {
                ListKind::Pass => p.push(format!(
                    "expected to pass, but the harness never reported it{}: {:?}",
                    if aborted {
                        " (it stopped short, see the aborts)"
                    } else {
                        ""
                    },
                    e.name
                )),
                _ if aborted && !is_abort(&e.name) => check.not_reached += 1,
                _ => p.push(format!(
                    "listed in {} ({}), but the harness never reported it: a stale entry: {:?}",
                    kind.file(),
                    e.reason,
                    e.name
                )),
            }
        }
    }
    check
}

/// The lists with `unit`'s entries rewritten from `report`.
fn bless_unit(unit: &str, report: &Report, lists: &Lists) -> Lists {
    let mut out = lists.clone();
    for kind in ListKind::ALL {
        out.list_mut(kind).retain(|e| e.unit != unit);
    }
    let entry = |name: &str, reason: &str| Entry {
        unit: unit.to_string(),
        name: name.to_string(),
        reason: reason.to_string(),
        line: 0,
    };
    // Keeps a non-passing test's or abort's classification, else marks it unclassified.
    let keep = |out: &mut Lists, name: &str| match lists.find(unit, name) {
        Some((kind @ (ListKind::Excluded | ListKind::Pending), e)) => {
            out.list_mut(kind).push(entry(name, &e.reason));
        }
        _ => out.pending.push(entry(name, "unclassified")),
    };
    for t in &report.tests {
        match t.outcome {
            Outcome::Pass => out.pass.push(entry(&t.name, "")),
            Outcome::Fail => keep(&mut out, &t.name),
            // An excluded test stays excluded (the skip file skipped it); a test skipped by
            // its tags needs no entry.
            Outcome::Skip => {
                if let Some((ListKind::Excluded, e)) = lists.find(unit, &t.name) {
                    out.excluded.push(entry(&t.name, &e.reason));
                }
            }
        }
    }
    for abort in &report.aborts {
        keep(&mut out, abort);
    }
    if !report.aborts.is_empty() {
        // Entries the harness did not reach stay (an expected-pass one becomes pending: it did
        // not pass).
        for kind in ListKind::ALL {
            for e in lists.list(kind).iter().filter(|e| e.unit == unit) {
                if is_abort(&e.name) || report.get(&e.name).is_some() {
                    continue;
                }
                match kind {
                    ListKind::Pass => out.pending.push(entry(&e.name, "unclassified")),
                    _ => out.list_mut(kind).push(e.clone()),
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The parser and the comparison, on canned output

#[cfg(test)]
mod parsing {
    use super::*;

    const OUTPUT: &str = "Cleanup: may take some time... OK\n\
        Starting test server at port 21079\n\
        [ready]: 7012\n\
        \u{1b}[1;37;49mTesting unit/type/incr\u{1b}[0m\n\
        [\u{1b}[0;32;49mok\u{1b}[0m]: INCR fails against key with spaces (left) (4 ms)\n\
        [err]: INCR against non existing key in tests/unit/type/incr.tcl\n\
        n command 'incr', with args beginning with: 'novar'\n\
        ERR unknown command 'incr', with args beginning with: 'novar'\n\
        \x20   while executing\n\
        [ok]: Twice (1 ms)\n\
        [err]: Twice in tests/unit/type/incr.tcl\n\
        Expected 1\n\
        [ignore]: Slow one: Tag: slow denied\n\
        [ignore]: Not supported on external server\n\
        [err]: n command 'debug', with args beginning with: \n\
        ERR unknown command 'debug', with args beginning with: \n\
        [ok]: Name (with parentheses) (12 ms)\n\
        [1/1 \u{1b}[0;33;49mdone\u{1b}[0m]: unit/type/incr (1 seconds)\n";

    #[test]
    fn parses_results_skips_and_aborts() {
        let report = parse_output("unit/type/incr", &strip_ansi(OUTPUT));
        let outcome = |n: &str| report.get(n).map(|t| t.outcome);
        assert_eq!(
            outcome("INCR fails against key with spaces (left)"),
            Some(Outcome::Pass)
        );
        assert_eq!(
            outcome("INCR against non existing key"),
            Some(Outcome::Fail)
        );
        assert!(
            report.tests[1]
                .detail
                .contains("ERR unknown command 'incr'")
        );
        assert_eq!(outcome("Twice"), Some(Outcome::Fail));
        assert_eq!(outcome("Slow one"), Some(Outcome::Skip));
        assert_eq!(outcome("Name (with parentheses)"), Some(Outcome::Pass));
        assert_eq!(report.tests.len(), 5);
        assert_eq!(
            report.aborts,
            vec!["[error] ERR unknown command 'debug', with args beginning with:".to_string()]
        );
        assert!(report.done);
        assert!(report.exception.is_none());
    }

    #[test]
    fn an_exception_is_an_abort_with_a_stable_name() {
        let out = "[exception]: Executing test client: error reading \"sock55d0c8a0f2b0\": \
                   connection reset.\n    while executing\n";
        let report = parse_output("unit/quit", out);
        assert_eq!(
            report.exception.as_deref(),
            Some("[exception] error reading \"sock*\": connection reset.")
        );
        assert!(!report.done);
    }

    fn entry(unit: &str, name: &str, reason: &str) -> Entry {
        Entry {
            unit: unit.into(),
            name: name.into(),
            reason: reason.into(),
            line: 1,
        }
    }

    #[test]
    fn every_kind_of_drift_is_reported_and_bless_fixes_it() {
        let u = "unit/type/incr";
        let mut report = Report::default();
        report.add("passes", Outcome::Pass, String::new());
        report.add("passes but pending", Outcome::Pass, String::new());
        report.add("passes unlisted", Outcome::Pass, String::new());
        report.add("fails but expected", Outcome::Fail, "boom".into());
        report.add("fails unlisted", Outcome::Fail, String::new());
        report.add("fails excluded", Outcome::Fail, String::new());
        report.add(
            "skipped but listed",
            Outcome::Skip,
            "Tag: slow denied".into(),
        );
        report.done = true;
        let lists = Lists {
            pass: vec![
                entry(u, "passes", ""),
                entry(u, "fails but expected", ""),
                entry(u, "never ran", ""),
            ],
            excluded: vec![
                entry(u, "fails excluded", "data type: lists"),
                entry(u, "stale", "data type: lists"),
            ],
            pending: vec![
                entry(u, "passes but pending", "needs: INCR"),
                entry(u, "skipped but listed", "needs: INCR"),
                entry("unit/quit", "another unit's", "needs: INCR"),
            ],
            unreadable: Vec::new(),
        };
        assert!(lists.format_problems().is_empty());
        let check = compare(u, &report, &lists);
        let all = check.problems.join("\n");
        for want in [
            "passed, but listed in pending.txt (needs: INCR)",
            "passed, and in no list",
            "expected to pass, but failed: \"fails but expected\"",
            "failed, and in no list",
            "but the harness skipped it",
            "expected to pass, but the harness never reported it: \"never ran\"",
            "a stale entry: \"stale\"",
        ] {
            assert!(all.contains(want), "no {want:?} in:\n{all}");
        }
        assert_eq!(check.problems.len(), 7, "{all}");
        assert_eq!((check.passed, check.excluded), (1, 1));

        let blessed = bless_unit(u, &report, &lists);
        let check = compare(u, &report, &blessed);
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        assert_eq!(check.passed, 3);
        assert_eq!(
            blessed
                .find(u, "fails excluded")
                .map(|(k, e)| (k, e.reason.as_str())),
            Some((ListKind::Excluded, "data type: lists"))
        );
        assert_eq!(
            blessed
                .find(u, "fails but expected")
                .map(|(k, e)| (k, e.reason.as_str())),
            Some((ListKind::Pending, "unclassified"))
        );
        assert!(blessed.find("unit/quit", "another unit's").is_some());
        assert!(blessed.find(u, "stale").is_none());
    }

    #[test]
    fn after_a_listed_abort_unreached_entries_are_not_stale() {
        let u = "unit/scan";
        let mut report = Report::default();
        let abort = "[exception] ERR unknown command 'flushall'".to_string();
        report.aborts.push(abort.clone());
        report.exception = Some(abort.clone());
        let lists = Lists {
            pending: vec![
                entry(u, &abort, "needs: FLUSHALL"),
                entry(u, "SCAN basic", "needs: KEYS"),
            ],
            ..Lists::default()
        };
        let check = compare(u, &report, &lists);
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        assert_eq!((check.pending, check.not_reached), (1, 1));
        // Without its listing, the abort is a drift.
        let lists = Lists {
            pending: vec![entry(u, "SCAN basic", "needs: KEYS")],
            ..Lists::default()
        };
        assert_eq!(compare(u, &report, &lists).problems.len(), 1);
    }
}
