//! End-to-end tests of the `gleaner` binary: every subcommand, exit statuses, `--hex`,
//! `--option`, `load`'s batching and error handling, locking, and `check` on damage.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What one run of the binary produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

impl Run {
    fn out(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("utf-8 stdout")
    }

    fn lines(&self) -> Vec<String> {
        self.out().lines().map(str::to_string).collect()
    }

    /// Asserts success and returns stdout.
    fn ok(&self) -> String {
        assert_eq!(self.code, 0, "expected success: {self:#?}");
        self.out()
    }

    /// Asserts the error convention: status 2, one `gleaner: ` line on stderr, no panic.
    fn failed(&self) -> &str {
        assert_eq!(self.code, 2, "expected status 2: {self:#?}");
        assert!(self.stderr.starts_with("gleaner: "), "{self:#?}");
        assert_eq!(self.stderr.lines().count(), 1, "one line: {self:#?}");
        assert!(!self.stderr.contains("panicked"), "{self:#?}");
        &self.stderr
    }
}

fn run_with_input(args: &[&str], input: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gleaner"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gleaner");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code().expect("exit code (not a signal)"),
        stdout: out.stdout,
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

fn run(args: &[&str]) -> Run {
    run_with_input(args, b"")
}

/// A fresh directory for a database (the database itself is created by the first write).
fn db_dir() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp
        .path()
        .join("db")
        .to_str()
        .expect("utf-8 path")
        .to_string();
    (tmp, dir)
}

/// Options that make small memtables and tables, so a few hundred keys make several tables.
const SMALL: [&str; 4] = [
    "--option",
    "memtable_size=4096",
    "--option",
    "key_table_size=4096",
];

fn load(dir: &str, extra: &[&str], input: &str) -> Run {
    let mut args = vec!["load", dir];
    args.extend_from_slice(extra);
    run_with_input(&args, input.as_bytes())
}

/// `n` puts `key00000<TAB>value-0` ... in load format.
fn puts(n: usize) -> String {
    (0..n)
        .map(|i| format!("put\tkey{i:05}\tvalue-{i}\n"))
        .collect()
}

/// A database of 500 keys, compacted into key tables.
fn table_db() -> (tempfile::TempDir, String) {
    let (tmp, dir) = db_dir();
    let mut args = SMALL.to_vec();
    args.extend(["load", &dir]);
    run_with_input(&args, puts(500).as_bytes()).ok();
    run(&["compact", &dir]).ok();
    (tmp, dir)
}

fn files_ending(dir: &str, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .expect("name")
        .to_str()
        .expect("utf-8")
        .to_string()
}

#[test]
fn put_get_delete_round_trip() {
    let (_tmp, dir) = db_dir();
    run(&["put", &dir, "alpha", "one two"]).ok();
    run(&["put", &dir, "-dash", "-1"]).ok();
    assert_eq!(run(&["get", &dir, "alpha"]).ok(), "one two\n");
    assert_eq!(run(&["get", &dir, "-dash"]).ok(), "-1\n");
    run(&["delete", &dir, "alpha"]).ok();
    let r = run(&["get", &dir, "alpha"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert_eq!(r.stderr, "not found\n");
    assert!(r.stdout.is_empty());
}

#[test]
fn reads_do_not_create_a_database() {
    let (tmp, dir) = db_dir();
    for args in [
        vec!["get", &dir, "k"],
        vec!["scan", &dir],
        vec!["stats", &dir],
        vec!["compact", &dir],
        vec!["delete", &dir, "k"],
        vec!["check", &dir],
    ] {
        run(&args).failed();
    }
    assert!(!tmp.path().join("db").exists(), "nothing created by reads");
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let (_tmp, dir) = db_dir();
    run(&[]).failed();
    run(&["frobnicate", &dir]).failed();
    assert!(run(&["get", &dir]).failed().contains("<KEY>"));
    assert!(
        run(&["scan", &dir, "--limit", "many"])
            .failed()
            .contains("--limit")
    );
    assert!(
        run(&["load", &dir, "--batch", "0"])
            .failed()
            .contains("--batch")
    );
    assert!(
        run(&["put", &dir, "k", "v", "extra"])
            .failed()
            .contains("extra")
    );
    // Help and version are not errors.
    assert!(run(&["--help"]).ok().contains("Usage"));
    assert!(run(&["--version"]).ok().starts_with("gleaner "));
}

#[test]
fn bad_options_name_the_option() {
    let (_tmp, dir) = db_dir();
    let e = run(&["--option", "no_such_option=1", "put", &dir, "k", "v"])
        .failed()
        .to_string();
    assert!(e.contains("no_such_option"), "{e}");
    let e = run(&["put", &dir, "k", "v", "--option", "memtable_size=big"])
        .failed()
        .to_string();
    assert!(e.contains("memtable_size") && e.contains("big"), "{e}");
    let e = run(&["--option", "memtable_size=10", "put", &dir, "k", "v"])
        .failed()
        .to_string();
    assert!(
        e.contains("memtable_size"),
        "out of range is caught at open: {e}"
    );
    let e = run(&["--option", "memtable_size", "put", &dir, "k", "v"])
        .failed()
        .to_string();
    assert!(e.contains("NAME=VALUE"), "{e}");
    // A valid option works, and the global flag goes anywhere.
    run(&["put", &dir, "k", "v", "--option", "compression=none"]).ok();
    assert_eq!(run(&["get", &dir, "k"]).ok(), "v\n");
}

#[test]
fn hex_round_trips_binary_keys_and_values() {
    let (_tmp, dir) = db_dir();
    run(&["--hex", "put", &dir, "00ff00", "ff00"]).ok();
    assert_eq!(run(&["--hex", "get", &dir, "00FF00"]).ok(), "ff00\n");
    load(&dir, &["--hex"], "put\t00\tFF\nput\tFFFF\t\ndel\t00ff00\n").ok();
    assert_eq!(
        run(&["scan", &dir, "--hex"]).ok(),
        "00\tff\nffff\t\n",
        "sorted bytewise, lower-case, deletion applied"
    );
    assert_eq!(
        run(&["scan", &dir, "--hex", "--keys-only", "--from", "01"]).ok(),
        "ffff\n"
    );
    // Without --hex, values are written as the raw bytes.
    run(&["--hex", "put", &dir, "6b", "00ff0a"]).ok();
    assert_eq!(run(&["get", &dir, "k"]).stdout, b"\x00\xff\n\n");
    let e = run(&["--hex", "get", &dir, "0g"]).failed().to_string();
    assert!(e.contains("hex"), "{e}");
}

#[test]
fn load_commits_in_batches_and_reports_progress() {
    let (_tmp, dir) = db_dir();
    let mut input = puts(5);
    input.insert(0, '\n'); // an empty line is skipped but counted
    input.push_str("del\tkey00001\r\n");
    let r = load(&dir, &["--batch", "2", "--sync"], &input);
    assert_eq!(
        r.lines(),
        ["committed 3", "committed 5", "committed 7"],
        "{r:#?}"
    );
    assert_eq!(
        run(&["scan", &dir, "--keys-only"]).ok(),
        "key00000\nkey00002\nkey00003\nkey00004\n"
    );
    // The default batch is 1000 lines; a partial batch is committed at EOF.
    let r = load(&dir, &[], &puts(1500));
    assert_eq!(r.lines(), ["committed 1000", "committed 1500"], "{r:#?}");
}

#[test]
fn malformed_load_lines_stop_the_load_and_lose_only_their_batch() {
    let cases: [(&[&str], &str, &str); 7] = [
        (&[], "frob\tkey\n", "unknown operation"),
        (&[], "put\tkey\n", "3 tab-separated fields"),
        (&[], "put\tkey\tv\textra\n", "3 tab-separated fields"),
        (&[], "del\tkey\tvalue\n", "2 tab-separated fields"),
        (&["--hex"], "put\t6b\tzz\n", "value is not valid hex"),
        (
            &["--option", "max_value_size=8"],
            "put\tkey\t123456789\n",
            "max_value_size",
        ),
        (&[], "BIGKEY", "key size limit"),
    ];
    for (flags, bad, why) in cases {
        let (_tmp, dir) = db_dir();
        let bad = if bad == "BIGKEY" {
            format!("put\t{}\tv\n", "k".repeat(70_000))
        } else {
            bad.to_string()
        };
        // Lines 1-2 form a committed batch; line 3 is in the batch line 4 spoils.
        let line = |i: usize| {
            if flags.contains(&"--hex") {
                format!("put\t{:02x}\t76\n", i)
            } else {
                format!("put\tk{i}\tv\n")
            }
        };
        let input = format!("{}{}{}{bad}{}", line(1), line(2), line(3), line(5));
        let mut args = flags.to_vec();
        args.extend(["load", &dir, "--batch", "2"]);
        let r = run_with_input(&args, input.as_bytes());
        let e = r.failed();
        assert!(e.contains("line 4") && e.contains(why), "{why}: {e}");
        assert_eq!(r.lines(), ["committed 2"], "{r:#?}");
        let keys = run(&["scan", &dir, "--keys-only"]).ok();
        let expect = if flags.contains(&"--hex") {
            "\u{1}\n\u{2}\n"
        } else {
            "k1\nk2\n"
        };
        assert_eq!(keys, expect, "{why}: only the first batch is written");
    }
}

#[test]
fn scan_ranges_limits_and_directions() {
    let (_tmp, dir) = db_dir();
    let input: String = ('a'..='j').map(|c| format!("put\t{c}\t{c}{c}\n")).collect();
    load(&dir, &[], &input).ok();
    let scan = |extra: &[&str]| {
        let mut args = vec!["scan", dir.as_str()];
        args.extend_from_slice(extra);
        run(&args).ok()
    };
    assert_eq!(scan(&["--from", "c", "--to", "f"]), "c\tcc\nd\tdd\ne\tee\n");
    assert_eq!(scan(&["--limit", "2"]), "a\taa\nb\tbb\n");
    assert_eq!(
        scan(&["--reverse", "--limit", "2", "--keys-only"]),
        "j\ni\n"
    );
    assert_eq!(
        scan(&["--reverse", "--from", "c", "--to", "f", "--keys-only"]),
        "e\nd\nc\n"
    );
    assert_eq!(scan(&["--from", "i"]), "i\tii\nj\tjj\n");
    assert_eq!(scan(&["--to", "b"]), "a\taa\n");
    assert_eq!(scan(&["--from", "f", "--to", "c"]), "", "empty range");
    assert_eq!(scan(&["--limit", "0"]), "");
    assert_eq!(scan(&["--keys-only"]).lines().count(), 10);
}

#[test]
fn a_second_open_is_refused_with_the_lock_error() {
    let (_tmp, dir) = db_dir();
    run(&["put", &dir, "k", "v"]).ok();
    let db = gleaner::Db::open(&dir, gleaner::Options::default()).expect("open in the test");
    let e = run(&["get", &dir, "k"]).failed().to_string();
    assert!(e.contains("locked"), "{e}");
    let e = run(&["check", &dir]).failed().to_string();
    assert!(e.contains("locked"), "{e}");
    db.close().expect("close");
    assert_eq!(run(&["get", &dir, "k"]).ok(), "v\n");
}

#[test]
fn check_passes_a_clean_database_and_names_a_damaged_table() {
    let (_tmp, dir) = table_db();
    let r = run(&["check", &dir]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.stdout.is_empty(), "{r:#?}");
    assert!(r.stderr.contains("ok:"), "{r:#?}");

    let tables = files_ending(&dir, ".sst");
    assert!(!tables.is_empty());
    let victim = &tables[0];
    let mut bytes = std::fs::read(victim).expect("read");
    bytes[10] ^= 0x55;
    std::fs::write(victim, bytes).expect("write");
    let r = run(&["check", &dir]);
    assert_eq!(r.code, 1, "{r:#?}");
    let out = r.out();
    let name = file_name(victim);
    assert!(
        out.lines().any(|l| l.starts_with(&format!("{name}@"))),
        "a FILE@OFFSET line names {name}: {r:#?}"
    );
    assert!(r.stderr.contains("problem"), "{r:#?}");
}

#[test]
fn check_refuses_a_directory_that_is_not_a_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_str().expect("utf-8");
    assert!(run(&["check", dir]).failed().contains("no database"));
    assert!(
        std::fs::read_dir(dir).expect("read_dir").next().is_none(),
        "check left nothing behind"
    );
}

#[test]
fn dump_shows_tables_and_rejects_paths() {
    let (_tmp, dir) = table_db();
    let mut all = String::new();
    for t in files_ending(&dir, ".sst") {
        all.push_str(&run(&["dump", &dir, &file_name(&t)]).ok());
    }
    assert!(all.contains("num_entries: "), "{all}");
    for i in [0, 123, 499] {
        let entry = format!("key{i:05}\tseq=");
        assert!(all.contains(&entry), "{entry} missing");
    }
    assert!(all.contains("\tkind=put\tvalue-123\n"));
    let t = file_name(&files_ending(&dir, ".sst")[0]);
    let hex = run(&["--hex", "dump", &dir, &t]).ok();
    assert!(hex.contains("6b6579"), "keys in hex: {hex}");
    assert!(
        run(&["dump", &dir, "MANIFEST-999999"])
            .failed()
            .contains("MANIFEST-999999")
    );
    assert!(run(&["dump", &dir, "LOCK"]).failed().contains("LOCK"));
    run(&["dump", &dir, "../db/CURRENT"]).failed();
    assert!(
        run(&["dump", &dir, "CURRENT"])
            .ok()
            .starts_with("manifest: MANIFEST-")
    );
}

#[test]
fn stats_print_a_summary_or_json() {
    let (_tmp, dir) = table_db();
    let json = run(&["stats", &dir, "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats --json is JSON");
    let levels = v.get("levels").and_then(|l| l.as_array()).expect("levels");
    assert!(!levels.is_empty());
    let files: u64 = levels
        .iter()
        .map(|l| l["files"].as_u64().expect("files"))
        .sum();
    assert!(files > 0, "{json}");
    let text = run(&["stats", &dir]).ok();
    for topic in [
        "levels (leveled compaction):",
        "  L0: ",
        "io (read / written):",
        "compactions:",
    ] {
        assert!(text.contains(topic), "{topic} missing: {text}");
    }
}

#[test]
fn compact_keeps_every_value_readable() {
    let (_tmp, dir) = table_db();
    run(&["delete", &dir, "key00007"]).ok();
    run(&["compact", &dir]).ok();
    assert_eq!(run(&["get", &dir, "key00042"]).ok(), "value-42\n");
    assert_eq!(run(&["get", &dir, "key00007"]).code, 1);
    assert_eq!(run(&["scan", &dir, "--keys-only"]).lines().len(), 499);
    assert_eq!(run(&["check", &dir]).code, 0);
}

/// Options under which every value of [`big_value`] is separated into small value tables, GC
/// runs only when asked (so `gleaner gc` sees all the garbage), and a table is worth collecting
/// at 10% garbage. They are saved in OPTIONS, so later commands use them too.
const SEPARATE: [&str; 10] = [
    "--option",
    "min_separated_value_size=100",
    "--option",
    "memtable_size=65536",
    "--option",
    "value_table_size=32768",
    "--option",
    "gc_threads=0",
    "--option",
    "gc_garbage_ratio=0.1",
];

const VALUE_KEYS: usize = 400;

/// A value of 500 bytes, different per key and round.
fn big_value(i: usize, round: usize) -> String {
    let mut v = format!("value-{i}-round-{round}-");
    let fill = char::from(b'a' + (i % 26) as u8);
    while v.len() < 500 {
        v.push(fill);
    }
    v
}

/// The round of the newest value of key `i` in [`value_db`].
fn round_of(i: usize) -> usize {
    usize::from(i.is_multiple_of(2))
}

/// A database whose values live in value tables, with garbage: 400 keys loaded, every other
/// one overwritten, and compacted so that the overwritten records count as garbage.
fn value_db() -> (tempfile::TempDir, String) {
    let (tmp, dir) = db_dir();
    let first: String = (0..VALUE_KEYS)
        .map(|i| format!("put\tkey{i:05}\t{}\n", big_value(i, 0)))
        .collect();
    let mut args = SEPARATE.to_vec();
    args.extend(["load", &dir]);
    run_with_input(&args, first.as_bytes()).ok();
    let second: String = (0..VALUE_KEYS)
        .step_by(2)
        .map(|i| format!("put\tkey{i:05}\t{}\n", big_value(i, 1)))
        .collect();
    load(&dir, &[], &second).ok();
    run(&["compact", &dir]).ok();
    (tmp, dir)
}

/// What `scan` prints for [`value_db`].
fn expected_scan() -> String {
    (0..VALUE_KEYS)
        .map(|i| format!("key{i:05}\t{}\n", big_value(i, round_of(i))))
        .collect()
}

/// The numbers in a line, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().expect("number"))
        .collect()
}

#[test]
fn gc_collects_garbage_and_keeps_every_value() {
    let (_tmp, dir) = value_db();
    assert!(files_ending(&dir, ".vst").len() > 1, "values are separated");
    let out = run(&["gc", &dir]).ok();
    assert_eq!(out.lines().count(), 1, "{out}");
    let line = out.trim_end();
    assert!(
        line.starts_with("gc: ")
            && line.contains(" jobs, ")
            && line.contains(" victims, ")
            && line.contains(" records read, ")
            && line.contains(" dropped, ")
            && line.contains(" written, ")
            && line.ends_with(" bytes written"),
        "{line}"
    );
    let n = numbers(line);
    let (jobs, victims, read, dropped, written) = (n[0], n[1], n[2], n[3], n[4]);
    assert!(jobs > 0 && victims > 0, "{line}");
    assert!(dropped > 0, "the overwritten records were garbage: {line}");
    assert_eq!(read, dropped + written, "{line}");

    assert_eq!(run(&["scan", &dir]).ok(), expected_scan());
    for i in [0, 1, 199, 399] {
        assert_eq!(
            run(&["get", &dir, &format!("key{i:05}")]).ok(),
            format!("{}\n", big_value(i, round_of(i)))
        );
    }
    let r = run(&["check", &dir]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.stderr.contains("value tables"), "{r:#?}");

    // Nothing is left to collect; the JSON form carries the same figures.
    let json = run(&["gc", &dir, "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&json).expect("gc --json is JSON");
    for key in [
        "jobs",
        "victims",
        "records_read",
        "records_dropped",
        "records_written",
        "bytes_read",
        "bytes_written",
        "read_micros",
        "lookup_micros",
        "write_micros",
    ] {
        assert!(v[key].is_u64(), "{key} missing: {json}");
    }
    assert_eq!(v["jobs"], 0, "{json}");
}

#[test]
fn gc_on_a_missing_database_fails_without_creating_it() {
    let (tmp, dir) = db_dir();
    run(&["gc", &dir]).failed();
    assert!(!tmp.path().join("db").exists());
}

#[test]
fn stats_show_value_tables_gc_and_space() {
    let (_tmp, dir) = value_db();
    let text = run(&["stats", &dir]).ok();
    for topic in [
        "value tables: ",
        ".vst: ",
        "% garbage",
        "gc: policy ",
        "space: ",
    ] {
        assert!(text.contains(topic), "{topic} missing: {text}");
    }
    let json = run(&["stats", &dir, "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats --json is JSON");
    for key in ["values", "gc", "space"] {
        assert!(v[key].is_object(), "{key} missing: {json}");
    }
    assert!(
        v["values"]["tables"].as_u64().expect("tables") > 0,
        "{json}"
    );
    assert!(
        v["values"]["garbage_bytes"].as_u64().expect("garbage") > 0,
        "overwrites left garbage: {json}"
    );
    assert!(v["space"]["space_amplification"].is_f64(), "{json}");
}

#[test]
fn check_names_a_damaged_value_table_and_dump_lists_its_records() {
    let (_tmp, dir) = value_db();
    let r = run(&["check", &dir]);
    assert_eq!(r.code, 0, "{r:#?}");

    let tables = files_ending(&dir, ".vst");
    let mut all = String::new();
    for t in &tables {
        let text = run(&["dump", &dir, &file_name(t)]).ok();
        assert!(text.starts_with("num_records: "), "{text}");
        all.push_str(&text);
    }
    for i in [0, 1, 200, 399] {
        let line = format!("key{i:05}\tseq=");
        assert!(all.contains(&line), "{line} missing");
    }
    assert!(all.contains(&format!("\t{}\n", big_value(3, 0))));
    let hex = run(&["--hex", "dump", &dir, &file_name(&tables[0])]).ok();
    assert!(hex.contains("6b6579303030"), "keys in hex: {hex}");

    let victim = &tables[0];
    let mut bytes = std::fs::read(victim).expect("read");
    // Inside the first record (records start at offset 0).
    bytes[20] ^= 0x55;
    std::fs::write(victim, bytes).expect("write");
    let r = run(&["check", &dir]);
    assert_eq!(r.code, 1, "{r:#?}");
    let name = file_name(victim);
    assert!(
        r.out().lines().any(|l| l.starts_with(&format!("{name}@"))),
        "a FILE@OFFSET line names {name}: {r:#?}"
    );
    let e = run(&["dump", &dir, &name]).failed().to_string();
    assert!(e.contains(&name), "{e}");
}

/// Every file of a directory: size, modification time and a digest of the contents, by name.
type Listing = std::collections::BTreeMap<String, (u64, std::time::SystemTime, u64)>;

/// A digest of a file's contents (FNV-1a), so a changed listing prints briefly.
fn content_digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn listing(dir: &str) -> Listing {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("entry");
            let meta = e.metadata().expect("metadata");
            let digest = content_digest(&std::fs::read(e.path()).expect("read"));
            (
                e.file_name().into_string().expect("utf-8 name"),
                (meta.len(), meta.modified().expect("mtime"), digest),
            )
        })
        .collect()
}

/// L0 tables at which the database made by [`busy_db`] is due for compaction.
const BUSY_L0_TRIGGER: u32 = 4;

/// A database on which a read-write open has work to do at once: its WAL holds writes never
/// flushed, L0 holds more tables than `l0_compaction_trigger`, and value tables hold more
/// garbage than `gc_garbage_ratio`, with GC on. It is written with compaction and GC held
/// off, then its OPTIONS file is replaced by the settings that make them due (every open merges
/// them). Returns the directory and the key-value pairs it holds.
fn busy_db() -> (tempfile::TempDir, String, Vec<(String, String)>) {
    use gleaner::{Db, Options};
    let (tmp, dir) = db_dir();
    let due = Options::default()
        .with_memtable_size(16 << 10)
        .with_key_table_size(8 << 10)
        .with_level_base_size(16 << 20)
        .with_min_separated_value_size(200)
        .with_value_table_size(32 << 10)
        .with_l0_compaction_trigger(BUSY_L0_TRIGGER)
        .with_gc_threads(1)
        .with_gc_garbage_ratio(0.1);
    let held_off = due
        .clone()
        .with_l0_compaction_trigger(100)
        .with_l0_slowdown_trigger(200)
        .with_l0_stop_trigger(300)
        .with_gc_threads(0)
        .with_inline_background_work(true);
    let mut model = std::collections::BTreeMap::new();
    let db = Db::open(&dir, held_off).expect("open");
    let mut put = |k: String, v: String| {
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    };
    for i in 0..200 {
        put(format!("key{i:05}"), big_value(i, 0));
    }
    db.flush().expect("flush");
    for i in (0..200).step_by(2) {
        put(format!("key{i:05}"), big_value(i, 1));
    }
    db.flush().expect("flush");
    db.compact_range(None, None)
        .expect("compact: the overwritten values become garbage");
    for round in 0..=BUSY_L0_TRIGGER {
        for i in 0..20 {
            put(format!("small{round}-{i:02}"), format!("s{round}.{i}"));
        }
        db.flush().expect("flush");
    }
    for i in 0..30 {
        put(format!("wal{i:02}"), big_value(i, 9));
    }
    let s = db.stats();
    assert!(
        s.levels[0].files > BUSY_L0_TRIGGER as usize,
        "{:?}",
        s.levels
    );
    assert!(s.values.garbage_bytes > 0, "{:?}", s.values);
    assert!(s.memtable_bytes > 0, "writes left in the WAL");
    db.close().expect("close");
    drop(db);
    let options = Path::new(&dir).join("OPTIONS");
    std::fs::write(&options, gleaner::options::render_options_file(&due)).expect("OPTIONS");
    (tmp, dir, model.into_iter().collect())
}

/// The read commands change nothing in the directory (names, sizes, modification times,
/// contents), on a database where a read-write open would flush the WAL, compact L0 and run
/// GC at once, and they run beside a read-only handle (shared lock) while a writer is refused.
#[test]
fn read_commands_leave_the_directory_untouched() {
    let (_tmp, dir, model) = busy_db();
    let before = listing(&dir);
    let one = |kind: &str| -> String {
        before
            .keys()
            .find(|n| n.ends_with(kind) || n.starts_with(kind))
            .unwrap_or_else(|| panic!("a {kind} file"))
            .clone()
    };
    let expected_scan: String = model.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect();
    let dumps = [
        one(".sst"),
        one(".vst"),
        one(".log"),
        one("MANIFEST-"),
        "CURRENT".to_string(),
        "OPTIONS".to_string(),
    ];
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["get", &dir, "wal07"],
        vec!["get", &dir, "key00004"],
        vec!["get", &dir, "absent"],
        vec!["scan", &dir],
        vec!["scan", &dir, "--reverse", "--limit", "5"],
        vec!["stats", &dir],
        vec!["stats", &dir, "--json"],
        vec!["check", &dir],
    ];
    for d in &dumps {
        commands.push(vec!["dump", &dir, d]);
    }
    // Alone, and again beside a read-only handle of this process (the lock is shared).
    for beside_a_reader in [false, true] {
        let reader = beside_a_reader
            .then(|| gleaner::Db::open_read_only(&dir, gleaner::Options::default()).expect("ro"));
        for args in &commands {
            let r = run(args);
            let expected_code = if args.get(2) == Some(&"absent") { 1 } else { 0 };
            assert_eq!(r.code, expected_code, "{args:?}: {r:#?}");
            assert_eq!(listing(&dir), before, "{args:?} changed the directory");
        }
        if let Some(reader) = reader {
            // A writer is refused while a reader holds the lock.
            let e = run(&["put", &dir, "k", "v"]).failed().to_string();
            assert!(e.contains("locked"), "{e}");
            reader.close().expect("close");
        }
    }
    // What they printed is the recovered state, the WAL's unflushed writes included.
    assert_eq!(
        run(&["get", &dir, "wal07"]).ok(),
        format!("{}\n", big_value(7, 9))
    );
    assert_eq!(run(&["scan", &dir]).ok(), expected_scan);
    let json = run(&["stats", &dir, "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats --json is JSON");
    assert!(
        v["memtable_bytes"].as_u64().expect("memtable") > 0,
        "{json}"
    );
    assert!(
        v["levels"][0]["files"].as_u64().expect("L0 files") > u64::from(BUSY_L0_TRIGGER),
        "{json}"
    );
    assert_eq!(v["gc"]["jobs"], 0, "{json}");
    assert_eq!(listing(&dir), before);

    // The premise: on a copy, a command that opens read-write changes the directory at once
    // (WAL flushed, L0 compacted, GC run), before doing anything itself.
    let copy = tempfile::tempdir().expect("tempdir");
    let copy_dir = copy.path().to_str().expect("utf-8").to_string();
    for name in before.keys() {
        std::fs::copy(Path::new(&dir).join(name), copy.path().join(name)).expect("copy");
    }
    let copied = listing(&copy_dir);
    run(&["compact", &copy_dir]).ok();
    let after = listing(&copy_dir);
    assert!(
        copied.keys().any(|n| !after.contains_key(n)),
        "the read-write open deleted files: {:?} -> {:?}",
        copied.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    assert_eq!(run(&["scan", &copy_dir]).ok(), expected_scan);
}

/// Keys a `scan --keys-only` prints.
fn scanned_keys(dir: &str) -> Vec<String> {
    run(&["scan", dir, "--keys-only"])
        .ok()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn delete_range_removes_a_key_range_durably_and_refuses_an_empty_one() {
    let (_tmp, dir) = table_db();
    run(&["delete-range", &dir, "key00100", "key00400"]).ok();
    let keys = scanned_keys(&dir);
    assert_eq!(keys.len(), 200, "300 of the 500 keys deleted");
    assert_eq!(keys[99], "key00099");
    assert_eq!(keys[100], "key00400", "the end is exclusive");
    assert_eq!(run(&["get", &dir, "key00250"]).code, 1);
    // Through a compaction, and with --hex ("key0045" .. "key0046").
    run(&[
        "--hex",
        "delete-range",
        &dir,
        "6b657930303435",
        "6b657930303436",
    ])
    .ok();
    run(&["compact", &dir]).ok();
    assert_eq!(scanned_keys(&dir).len(), 190);
    run(&["check", &dir]).ok();
    for (start, end) in [("b", "a"), ("a", "a")] {
        let err = run(&["delete-range", &dir, start, end])
            .failed()
            .to_string();
        assert!(
            err.contains("start key must sort before the end key"),
            "{err}"
        );
    }
    assert_eq!(scanned_keys(&dir).len(), 190, "nothing written");
    let (tmp, missing) = db_dir();
    run(&["delete-range", &missing, "a", "b"]).failed();
    assert!(!tmp.path().join("db").exists(), "no database created");
}

#[test]
fn load_applies_delrange_lines_in_order_and_names_a_bad_one() {
    let (_tmp, dir) = db_dir();
    let input = format!(
        "{}delrange\tkey00002\tkey00005\nput\tkey00003\tback\n",
        puts(8)
    );
    load(&dir, &["--batch", "3"], &input).ok();
    assert_eq!(
        scanned_keys(&dir),
        [
            "key00000", "key00001", "key00003", "key00005", "key00006", "key00007"
        ]
    );
    assert_eq!(run(&["get", &dir, "key00003"]).ok(), "back\n");
    let err = load(&dir, &[], "delrange\tb\ta\n").failed().to_string();
    assert!(
        err.contains("line 1") && err.contains("start key must sort"),
        "{err}"
    );
    let err = load(&dir, &[], "put\tx\ty\ndelrange\ta\n")
        .failed()
        .to_string();
    assert!(
        err.contains("line 2") && err.contains("`delrange` takes"),
        "{err}"
    );
    assert_eq!(
        run(&["get", &dir, "x"]).code,
        1,
        "the bad line's batch is not written"
    );
}

#[test]
fn put_and_load_write_expiring_keys_and_refuse_bad_ttls() {
    let (_tmp, dir) = db_dir();
    let hour = "3600000";
    run(&["put", &dir, "live", "v", "--ttl-ms", hour]).ok();
    run(&["put", &dir, "gone", "v", "--ttl-ms", "0"]).ok();
    assert_eq!(run(&["get", &dir, "live"]).ok(), "v\n");
    assert_eq!(
        run(&["get", &dir, "gone"]).code,
        1,
        "a TTL of 0 reads as deleted"
    );
    let e = run(&["put", &dir, "k", "v", "--ttl-ms", "-5"])
        .failed()
        .to_string();
    assert!(e.contains("at least 0"), "{e}");
    let e = run(&["put", &dir, "k", "v", "--ttl-ms", &i64::MAX.to_string()])
        .failed()
        .to_string();
    assert!(e.contains("overflows"), "{e}");
    assert_eq!(run(&["get", &dir, "k"]).code, 1, "nothing was written");
    let input = format!("putttl\tl1\tx\t{hour}\nputttl\tg1\tx\t0\nput\tp\ty\n");
    assert_eq!(load(&dir, &[], &input).lines(), ["committed 3"]);
    let keys = run(&["scan", &dir, "--keys-only"]).ok();
    assert_eq!(keys, "l1\nlive\np\n");
    for (bad, why) in [
        ("putttl\tk\tv\t-1\n", "at least 0"),
        ("putttl\tk\tv\tsoon\n", "whole number"),
        ("putttl\tk\tv\n", "4 tab-separated fields"),
        ("putttl\tk\tv\t9223372036854775807\n", "overflows"),
    ] {
        let err = load(&dir, &[], &format!("put\ta\tb\n{bad}"))
            .failed()
            .to_string();
        assert!(err.contains("line 2") && err.contains(why), "{why}: {err}");
    }
    // The key tables (each open flushes the WAL it replays) show the expiries.
    run(&["compact", &dir]).ok();
    let mut tables = String::new();
    for t in files_ending(&dir, ".sst") {
        tables.push_str(&run(&["dump", &dir, &file_name(&t)]).ok());
    }
    assert!(tables.contains("\tkind=put\tx\texpiry="), "{tables}");
    assert!(
        !tables.contains("g1\t"),
        "the compaction dropped the expired key: {tables}"
    );
    run(&["check", &dir]).ok();
}
