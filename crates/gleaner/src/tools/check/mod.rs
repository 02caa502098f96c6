//! Offline verification of a database directory (`gleaner check`).
//!
//! The checker reads every file the database needs and verifies it the way an open would use it,
//! but more strictly and without stopping at the first failure: it reports every damaged file it
//! can find. It takes a shared lock on LOCK first (so it runs beside read-only handles and other
//! checks, but not beside a writer) and never writes (no recovery, no WAL replay, no new
//! manifest, not even a LOCK file), so it is safe to run on a database that may be damaged and
//! must not be touched.
//!
//! What is verified:
//! - `CURRENT`: its checksum, and that it names a manifest that exists;
//! - the manifest: every record's framing and checksum, every edit decodes, the first carries the
//!   format version, every edit applies, the result satisfies the version invariants (the
//!   tables of each sorted run disjoint in keys, the runs of a level disjoint in sequence
//!   numbers; several runs per level, as tiered compaction keeps them, are fine), and the
//!   counters (log number, next file number, last sequence) are recorded;
//! - every live key table: it exists with exactly the recorded size, opens (footer, index,
//!   filter, properties), every entry is read (so every data block's checksum is verified),
//!   entries strictly increase in internal-key order, the first and last keys equal the
//!   manifest's bounds, the entry and deletion counts match the properties and the manifest,
//!   and the value handles it holds, per value table they name, match its recorded dependence;
//! - every live value table: it exists with exactly the recorded size, opens (footer, top
//!   index, properties), its properties agree with the manifest (records, record bytes, key and
//!   sequence ranges, class), its whole dense index walks cleanly (order, contiguity, counts),
//!   and every record is read, in chunks of consecutive records, and its CRC verified;
//! - every value handle in every live key table resolves, through inheritance records where its
//!   table was collected, to a record that is exactly that `(user key, sequence)`; or, when no
//!   record is left, a newer version of the key is in the key tables (GC reclaimed the shadowed
//!   record early). The checker runs offline, where no snapshot exists, so nothing can read such
//!   a version any more; it cannot tell whether a snapshot of the process that ran GC still read
//!   it. [`Db::recount_garbage`](crate::Db::recount_garbage) checks that online, against the
//!   live snapshots;
//! - garbage accounting: per live value table, the records and bytes the handles reference
//!   equal its records minus the garbage the manifest records;
//! - inheritance records: children's key ranges are disjoint, no cycles, every child is live
//!   or itself inherited (a warning otherwise: the engine leaves such a child behind when all
//!   its records became garbage, and the handle check proves no handle needs it), and every
//!   record is reachable from some handle (a warning otherwise: pruning would drop it);
//! - every WAL numbered at or above the manifest's log number: every record reads and decodes;
//!   a torn tail (what a crash mid-write leaves) is a warning, damage followed by intact records
//!   is a problem;
//! - in a partitioned index tree, every key of every key table is routed to the table's partition;
//! - `OPTIONS`: its checksum, and that every saved option is one this version understands.
//!
//! Files whose names Gleaner does not use are ignored. Files Gleaner would delete at the next
//! open (unreferenced key and value tables, obsolete WALs and manifests, temporary files) are
//! warnings.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::filename::{
    CURRENT, FileType, LOCK, OPTIONS, manifest_file_name, parse_file_name, table_file_name,
    value_table_file_name, wal_file_name,
};
use crate::io::{CountedReader, FileSystem, IoStats, PathKind, ReadFileOptions};
use crate::options::{GcPolicyKind, Options, parse_options_file};
use crate::value::segment::ScannedSegment;
use crate::version::routing::partition_of_level;
use crate::version::{FileMetaData, Version};

use handles::HandleCheck;
use table::Routed;

mod handles;
mod inheritance;
mod manifest;
mod table;
mod values;
mod wal;

/// One finding of the checker: a file, where in it (when known), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Name of the file within the database directory.
    pub file: String,
    /// Byte offset within the file where the bad data starts, when known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

impl Problem {
    fn new(file: impl Into<String>, offset: Option<u64>, detail: impl Into<String>) -> Self {
        Problem {
            file: file.into(),
            offset,
            detail: detail.into(),
        }
    }

    /// A problem from an error met while verifying `file`. Corruption errors carry their own
    /// file and offset (which may name the file more precisely); other errors (I/O) are
    /// attributed to `file` without an offset.
    fn from_error(file: &str, e: Error) -> Self {
        match e {
            Error::Corruption {
                file,
                offset,
                detail,
            } => Problem::new(file, Some(offset), detail),
            other => Problem::new(file, None, other.to_string()),
        }
    }
}

impl fmt::Display for Problem {
    /// `FILE@OFFSET: DETAIL`, or `FILE: DETAIL` without an offset.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{}@{}: {}", self.file, o, self.detail),
            None => write!(f, "{}: {}", self.file, self.detail),
        }
    }
}

/// The result of [`check_db`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    /// Damage: the database (or part of it) cannot be read correctly.
    pub problems: Vec<Problem>,
    /// Findings that do not affect correctness: torn WAL or manifest tails (which recovery cuts
    /// off), files the next open deletes, a missing OPTIONS file.
    pub warnings: Vec<Problem>,
    /// Key tables verified entry by entry.
    pub tables_checked: usize,
    /// Entries read from those tables.
    pub entries_checked: u64,
    /// WAL records read and decoded.
    pub wal_records_checked: u64,
    /// Value tables verified record by record.
    pub value_tables_checked: usize,
    /// Records read (and their CRCs verified) from those tables.
    pub records_checked: u64,
    /// Value handles found in key tables (each resolved and its record read when the manifest
    /// is usable).
    pub handles_checked: u64,
    /// Of those, handles of shadowed versions (a newer version of the key exists) whose record
    /// GC reclaimed early: they are never read, so they are not problems. The check runs offline
    /// with no snapshots, so it does not ask whether a snapshot read them before the database
    /// was closed (the online recount, `Db::recount_garbage`, does).
    pub handles_reclaimed_early: u64,
    /// Of those, handles of versions expired (by the system clock, or the latest time the
    /// database recorded) whose record is gone: a table that expired whole, or a GC job that
    /// judged the record dead. Never read, so not problems.
    pub handles_expired: u64,
    /// Values written once (`separate_at=write`) into value segments a crash left open, named
    /// by logged writes and found whole there (the next read-write open seals the segments).
    pub open_segment_values: u64,
}

impl CheckReport {
    /// True when no problem was found (warnings allowed).
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies the database in directory `path` without modifying it. `opts` supplies the file
/// system (other options do not affect checking).
///
/// Damage is reported in the returned [`CheckReport`], not as an error. Errors are reserved for
/// what prevents checking: [`Error::InvalidArgument`] when `path` is not a database directory
/// (missing, a file, or without `CURRENT`), [`Error::Locked`] when a read-write handle (in
/// this process or another) has the database open, [`Error::Io`] when the directory cannot be
/// listed.
///
/// Locking: a shared lock on the LOCK file, like [`Db::open_read_only`](crate::Db::open_read_only)'s,
/// so checks and read-only handles run side by side, and a read-write open waits for neither
/// but fails with [`Error::Locked`] while one runs. A directory without a LOCK file is checked
/// unlocked (the file is never created).
pub fn check_db(path: &Path, opts: &Options) -> Result<CheckReport> {
    let fs = Arc::clone(opts.file_system());
    match fs.path_kind(path)? {
        Some(PathKind::Dir) => {}
        Some(PathKind::File) => {
            return Err(Error::invalid(format!(
                "{} is a file; a database is a directory",
                path.display()
            )));
        }
        None => {
            return Err(Error::invalid(format!(
                "no database at {}: no such directory",
                path.display()
            )));
        }
    }
    // Without CURRENT this is not a database.
    if fs.path_kind(&path.join(CURRENT))?.is_none() {
        return Err(Error::invalid(format!(
            "no database at {} (no CURRENT file)",
            path.display()
        )));
    }
    let _lock = fs.lock_shared(&path.join(LOCK))?;
    let names = fs.list_dir(path)?;
    let custom_policy = opts.custom_policy().map(|f| f.name().to_string());
    let mut checker = Checker::new(fs, path, custom_policy);
    checker.run(&names);
    Ok(checker.report)
}

/// What a successful manifest replay yields.
struct Recovered {
    /// The latest database time an edit recorded (manifest field 17).
    time_floor: u64,
    manifest_number: u64,
    version: Version,
    log_number: u64,
}

/// The files of the directory Gleaner knows, by kind.
#[derive(Default)]
struct Listing {
    tables: BTreeSet<u64>,
    wals: BTreeSet<u64>,
    manifests: BTreeSet<u64>,
    temps: Vec<String>,
    options: bool,
    value_tables: BTreeSet<u64>,
    drop_files: BTreeSet<u64>,
    policy_files: Vec<String>,
}

impl Listing {
    fn new(names: &[String]) -> Self {
        let mut l = Listing::default();
        for name in names {
            match parse_file_name(name) {
                Some(FileType::KeyTable(n)) => {
                    l.tables.insert(n);
                }
                Some(FileType::ValueTable(n)) => {
                    l.value_tables.insert(n);
                }
                Some(FileType::DropFile(n)) => {
                    l.drop_files.insert(n);
                }
                Some(FileType::Wal(n)) => {
                    l.wals.insert(n);
                }
                Some(FileType::Manifest(n)) => {
                    l.manifests.insert(n);
                }
                Some(FileType::Temp) => l.temps.push(name.clone()),
                Some(FileType::PolicyFile) => l.policy_files.push(name.clone()),
                Some(FileType::Options) => l.options = true,
                Some(FileType::Current | FileType::Lock | FileType::Hotness) | None => {}
            }
        }
        l.temps.sort();
        l
    }
}

struct Checker {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    io: Arc<IoStats>,
    report: CheckReport,
    /// The custom policy the options register: its table metadata is known too.
    custom_policy: Option<String>,
    /// The value segments a crash left open that the logs name, as scanned (`None`: the scan
    /// failed, a problem reported).
    open_segments: BTreeMap<u64, Option<ScannedSegment>>,
    /// Where recovery would cut the replay (a logged write's value found torn, or a log that
    /// lost writes at its unsynced tail): it replays nothing after it (and fails if a later
    /// record shows the lost writes were synced).
    log_cut: Option<crate::wal::Cut>,
    /// The sequence numbers from log to log, as recovery follows them.
    log_chain: crate::wal::LogChain,
}

impl Checker {
    /// A checker of the database in `dir`, read through `fs`, knowing the metadata of
    /// `custom_policy` too.
    fn new(fs: Arc<dyn FileSystem>, dir: &Path, custom_policy: Option<String>) -> Self {
        Checker {
            fs,
            dir: dir.to_path_buf(),
            io: Arc::new(IoStats::default()),
            report: CheckReport::default(),
            custom_policy,
            open_segments: BTreeMap::new(),
            log_cut: None,
            log_chain: Default::default(),
        }
    }

    fn problem(&mut self, p: Problem) {
        self.report.problems.push(p);
    }

    /// Reads every drop block the live value tables list: each must be intact
    /// and hold the number of keys the manifest records. Drop files no table lists are
    /// orphans.
    fn check_drop_files(&mut self, values: &crate::version::ValueSet, listing: &Listing) {
        for &n in values.drop_files().keys() {
            let name = crate::filename::drop_file_name(n);
            let reader = match crate::value::DropFileReader::open(
                self.fs.as_ref(),
                &self.dir.join(&name),
                &name,
                Arc::clone(&self.io),
            ) {
                Ok(r) => r,
                Err(e) => {
                    self.problem(Problem::from_error(&name, e));
                    continue;
                }
            };
            let blocks: Vec<crate::version::DropBlock> = values
                .all_drop_blocks()
                .flat_map(|(_, blocks)| blocks)
                .filter(|b| b.block.file == n)
                .map(|b| b.block)
                .collect();
            for b in blocks {
                if let Err(e) =
                    reader.read_block(&b.expected(), crate::io::IoClass::Other, |_, _| {})
                {
                    self.problem(Problem::from_error(&name, e));
                }
            }
        }
        for &n in listing
            .drop_files
            .iter()
            .filter(|n| !values.drop_files().contains_key(n))
        {
            self.warning(
                crate::filename::drop_file_name(n),
                None,
                "drop file not referenced by the manifest (orphan, removed at next open)",
            );
        }
    }

    fn warning(&mut self, file: impl Into<String>, offset: Option<u64>, detail: impl Into<String>) {
        self.report
            .warnings
            .push(Problem::new(file, offset, detail));
    }

    fn reader(&self, name: &str) -> Result<CountedReader> {
        let file = self
            .fs
            .open_readable(&self.dir.join(name), ReadFileOptions::default())?;
        Ok(CountedReader::new(file, Arc::clone(&self.io)))
    }

    fn run(&mut self, names: &[String]) {
        let listing = Listing::new(names);
        let recovered = self.check_current_and_manifest(&listing);
        match &recovered {
            Some(r) => {
                self.check_live_files(r, &listing);
                // The WAL the log number names exists from the edit that names it until a later
                // edit moves past it (an open requires it too): without it, an edit was lost.
                if !listing.wals.contains(&r.log_number) {
                    self.problem(Problem::new(
                        manifest_file_name(r.manifest_number),
                        None,
                        format!(
                            "records log number {}, but {} is missing: an edit that moved the \
                             log number past it is lost (the open refuses this database)",
                            r.log_number,
                            wal_file_name(r.log_number)
                        ),
                    ));
                }
                for &n in &listing.wals {
                    if n >= r.log_number {
                        self.check_wal(n);
                    } else {
                        self.warning(
                            wal_file_name(n),
                            None,
                            format!(
                                "WAL older than the manifest's log number {} (already in key \
                                 tables; removed at next open)",
                                r.log_number
                            ),
                        );
                    }
                }
                for &n in listing
                    .manifests
                    .iter()
                    .filter(|&&n| n != r.manifest_number)
                {
                    self.warning(
                        manifest_file_name(n),
                        None,
                        "manifest not named by CURRENT (obsolete, removed at next open)",
                    );
                }
            }
            None => {
                // Without a usable manifest the live set is unknown: still verify every key
                // table on its own and every WAL, so the report shows all the damage there is.
                for &n in &listing.tables {
                    self.check_table_file(n);
                }
                for &n in &listing.value_tables {
                    self.check_value_table_file(n, None);
                }
                for &n in &listing.wals {
                    self.check_wal(n);
                }
            }
        }
        for name in &listing.temps {
            self.warning(
                name.clone(),
                None,
                "temporary file of an interrupted update (removed at next open)",
            );
        }
        // A policy's own files: damage costs the policy what it learned, never the database.
        for name in &listing.policy_files {
            let read = self
                .fs
                .read_all(&self.dir.join(name))
                .and_then(|bytes| crate::gc::policy_file::decode_policy_file(name, &bytes));
            // Its checksum holds; the policy may check what it wrote (a model, say).
            let described = read.as_ref().ok().and_then(|data| {
                let (policy, slot) = crate::filename::parse_policy_file_name(name)?;
                crate::gc::registry::describe_policy_file(policy, slot, data)
            });
            let problem = match (read, described) {
                (Err(e), _) => Some(e.to_string()),
                (Ok(_), Some(Err(e))) => Some(e),
                _ => None,
            };
            if let Some(e) = problem {
                self.warning(
                    name.clone(),
                    None,
                    format!("policy file unusable ({e}): the policy starts over without it"),
                );
            }
        }
        if listing.options {
            self.check_options();
        } else {
            self.warning(
                OPTIONS,
                None,
                "missing (the next open writes it from the options it is given)",
            );
        }
    }
    /// Verifies the files the recovered version lists, value tables first (so that handles
    /// into a damaged one are known not to count), then key tables with the handles they hold,
    /// then what needs them all: garbage accounting and inheritance. Orphans are warnings.
    fn check_live_files(&mut self, r: &Recovered, listing: &Listing) {
        let values = r.version.values();
        let mut damaged: BTreeSet<u64> = BTreeSet::new();
        // Retired tables (write-back commits) are still read by the versions that name them.
        for v in values
            .tables()
            .chain(values.retired().values().map(|t| &t.file))
        {
            if !self.check_live_value_table(r.manifest_number, v) {
                damaged.insert(v.number);
            }
            // The manifest checked the metadata's form; what it means is the policy's.
            if let Some(m) = &v.policy_meta
                && !GcPolicyKind::ALL.iter().any(|p| p.name() == m.tag)
                && self.custom_policy.as_deref() != Some(m.tag.as_str())
            {
                self.warning(
                    value_table_file_name(v.number),
                    None,
                    format!(
                        "carries metadata of GC policy `{}`, neither a built-in one nor the \
                         one registered: a read-write open needs it registered \
                         (Options::with_custom_policy)",
                        m.tag
                    ),
                );
            }
        }
        self.check_drop_files(values, listing);
        let live: BTreeMap<u64, (usize, Arc<FileMetaData>)> = r
            .version
            .all_files()
            .map(|(level, f)| (f.number, (level, Arc::clone(f))))
            .collect();
        // Offline, no snapshot exists: a version is expired for every reader once it is by the
        // system clock, or by the latest time the database recorded (a clock of its own).
        let now = crate::expiry::Clock::now_ms(&crate::expiry::SystemClock).max(r.time_floor);
        let mut handles = HandleCheck::new(self, &r.version, now);
        for (level, meta) in live.values() {
            // In a partitioned tree every key of a table is routed to the table's partition.
            let routed = r.version.is_partitioned().then(|| Routed {
                routing: r.version.routing(),
                partition: partition_of_level(*level),
            });
            self.check_live_table(r.manifest_number, *level, meta, routed, &mut handles);
        }
        for &n in listing.tables.iter().filter(|n| !live.contains_key(n)) {
            self.warning(
                table_file_name(n),
                None,
                "key table not referenced by the manifest (orphan, removed at next open)",
            );
        }
        // Handles a GC wrote back (write-back commits) that no flush has put in a key table yet are
        // in the WALs recovery replays; they reference records as key-table handles do.
        for &n in listing.wals.iter().filter(|&&n| n >= r.log_number) {
            self.count_wal_handles(n, &mut handles);
        }
        for &n in listing
            .value_tables
            .iter()
            .filter(|&&n| values.live(n).is_none() && values.retired_table(n).is_none())
        {
            let detail = if self.open_segments.contains_key(&n) {
                "value segment left open by a crash, named by logged writes (the next \
                 read-write open seals it)"
            } else {
                "value table not referenced by the manifest (orphan, removed at next open)"
            };
            self.warning(value_table_file_name(n), None, detail);
        }
        self.report.handles_reclaimed_early += handles.reclaimed_early;
        self.report.handles_expired += handles.expired;
        self.check_garbage(r.manifest_number, values, &handles, &damaged);
        let named = handles.complete.then_some(&handles.named);
        self.check_inheritance(r.manifest_number, values, named);
    }

    /// True when file `name` exists with exactly `size` bytes, as the manifest (`listed` says
    /// how) records it; otherwise reports the problem.
    fn present_with_size(&mut self, name: &str, size: u64, manifest: u64, listed: &str) -> bool {
        let path = self.dir.join(name);
        match self.fs.path_kind(&path) {
            Ok(Some(PathKind::File)) => {}
            Ok(_) => {
                self.problem(Problem::new(name, None, format!("missing, but {listed}")));
                return false;
            }
            Err(e) => {
                self.problem(Problem::from_error(name, e));
                return false;
            }
        }
        match self.fs.file_size(&path) {
            Ok(actual) if actual == size => true,
            Ok(actual) => {
                // A short file's damage starts where it ends; a long one's is not located.
                self.problem(Problem::new(
                    name,
                    (actual < size).then_some(actual),
                    format!(
                        "file is {actual} bytes, but {} records {size} (truncated or replaced)",
                        manifest_file_name(manifest)
                    ),
                ));
                false
            }
            Err(e) => {
                self.problem(Problem::from_error(name, e));
                false
            }
        }
    }

    fn check_options(&mut self) {
        let bytes = match self.fs.read_all(&self.dir.join(OPTIONS)) {
            Ok(b) => b,
            Err(e) => {
                self.problem(Problem::from_error(OPTIONS, e));
                return;
            }
        };
        match parse_options_file(OPTIONS, &bytes) {
            Ok(pairs) => {
                let mut scratch = Options::default();
                for (name, value) in pairs {
                    if let Err(e) = scratch.apply_saved(&name, &value) {
                        self.problem(Problem::from_error(OPTIONS, e));
                    }
                }
            }
            Err(e) => self.problem(Problem::from_error(OPTIONS, e)),
        }
    }
}
