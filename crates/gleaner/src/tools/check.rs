//! Offline verification of a database directory (`gleaner check`).
//!
//! The checker reads every file the database needs and verifies it the way an open would use it,
//! but more strictly and without stopping at the first failure: it reports every damaged file it
//! can find. It takes the LOCK first and never writes (no recovery, no WAL replay, no new
//! manifest), so it is safe to run on a database that may be damaged and must not be touched.
//!
//! What is verified:
//! - `CURRENT`: its checksum, and that it names a manifest that exists;
//! - the manifest: every record's framing and checksum, every edit decodes, the first carries the
//!   format version, every edit applies, the result satisfies the version invariants, and the
//!   counters (log number, next file number, last sequence) are recorded;
//! - every live key table: it exists with exactly the recorded size, opens (footer, index,
//!   filter, properties), every entry is read (so every data block's checksum is verified),
//!   entries strictly increase in internal-key order, the first and last keys equal the
//!   manifest's bounds, and the entry and deletion counts match the properties and the manifest;
//! - every WAL numbered at or above the manifest's log number: every record reads and decodes;
//!   a torn tail (what a crash mid-write leaves) is a warning, damage followed by intact records
//!   is a problem;
//! - `OPTIONS`: its checksum, and that every saved option is one this version understands.
//!
//! Files whose names Gleaner does not use are ignored. Files Gleaner would delete at the next
//! open (unreferenced key tables, obsolete WALs and manifests, temporary files) are warnings.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{
    CURRENT, FileType, LOCK, OPTIONS, manifest_file_name, parse_file_name, table_file_name,
    wal_file_name,
};
use crate::io::{CountedReader, FileSystem, IoClass, IoStats, PathKind, ReadFileOptions};
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQUENCE, ParsedKey, ValueKind, compare_internal};
use crate::options::{MAX_BATCH_SIZE_LIMIT, Options, WalRecoveryMode, parse_options_file};
use crate::table::{ReadCtx, Table};
use crate::version::edit::MANIFEST_FORMAT_VERSION;
use crate::version::set::MAX_MANIFEST_RECORD;
use crate::version::{FileMetaData, MAX_LEVELS, Version, VersionEdit, read_current};
use crate::wal::LogReader;

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
/// (missing, a file, or without `CURRENT`), [`Error::Locked`] when a process has the database
/// open, [`Error::Io`] when the directory cannot be listed.
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
    // Without CURRENT this is not a database; refuse before taking the lock so that checking a
    // wrong directory does not leave a LOCK file in it.
    if fs.path_kind(&path.join(CURRENT))?.is_none() {
        return Err(Error::invalid(format!(
            "no database at {} (no CURRENT file)",
            path.display()
        )));
    }
    let _lock = fs.lock(&path.join(LOCK))?;
    let names = fs.list_dir(path)?;
    let mut checker = Checker {
        fs,
        dir: path.to_path_buf(),
        io: Arc::new(IoStats::default()),
        report: CheckReport::default(),
    };
    checker.run(&names);
    Ok(checker.report)
}

/// What a successful manifest replay yields.
struct Recovered {
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
}

impl Listing {
    fn new(names: &[String]) -> Self {
        let mut l = Listing::default();
        for name in names {
            match parse_file_name(name) {
                Some(FileType::KeyTable(n)) => {
                    l.tables.insert(n);
                }
                Some(FileType::Wal(n)) => {
                    l.wals.insert(n);
                }
                Some(FileType::Manifest(n)) => {
                    l.manifests.insert(n);
                }
                Some(FileType::Temp) => l.temps.push(name.clone()),
                Some(FileType::Options) => l.options = true,
                Some(FileType::Current | FileType::Lock) | None => {}
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
}

impl Checker {
    fn problem(&mut self, p: Problem) {
        self.report.problems.push(p);
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
                let live: BTreeMap<u64, (usize, Arc<FileMetaData>)> = r
                    .version
                    .all_files()
                    .map(|(level, f)| (f.number, (level, Arc::clone(f))))
                    .collect();
                for (level, meta) in live.values() {
                    self.check_live_table(r.manifest_number, *level, meta);
                }
                for &n in listing.tables.iter().filter(|n| !live.contains_key(n)) {
                    self.warning(
                        table_file_name(n),
                        None,
                        "key table not referenced by the manifest (orphan, removed at next open)",
                    );
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
                    self.check_table_file(n, None);
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

    /// Verifies CURRENT and replays the manifest it names; `None` (with problems recorded) when
    /// either is unusable.
    fn check_current_and_manifest(&mut self, listing: &Listing) -> Option<Recovered> {
        let number = match read_current(self.fs.as_ref(), &self.dir, &self.io) {
            Ok(n) => n,
            Err(e) => {
                self.problem(Problem::from_error(CURRENT, e));
                return None;
            }
        };
        if !listing.manifests.contains(&number) {
            self.problem(Problem::new(
                CURRENT,
                None,
                format!("names {}, which does not exist", manifest_file_name(number)),
            ));
            return None;
        }
        let name = manifest_file_name(number);
        match self.replay_manifest(number, &name) {
            Ok(r) => Some(r),
            Err(e) => {
                self.problem(Problem::from_error(&name, e));
                None
            }
        }
    }

    /// Replays the manifest the way recovery does (`VersionSet::recover`), but reads with
    /// [`IoClass::Other`], reports a torn tail as a warning, and attributes a failed edit to the
    /// offset of its record.
    fn replay_manifest(&mut self, number: u64, name: &str) -> Result<Recovered> {
        let mut reader = LogReader::new(
            self.reader(name)?,
            name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
            MAX_MANIFEST_RECORD,
        )?;
        // Apply with the most levels any database may have: the level count an open uses is an
        // option, not a property of the files.
        let mut version = Version::new(MAX_LEVELS);
        let (mut log_number, mut next_file, mut last_seq) = (None, None, None);
        let mut records = 0u64;
        while let Some((offset, record)) = reader.read_record()? {
            let edit = VersionEdit::decode(&record, name, offset)?;
            if records == 0 && edit.format_version != Some(MANIFEST_FORMAT_VERSION) {
                let detail = match edit.format_version {
                    Some(v) => format!("unknown manifest format version {v}"),
                    None => "first edit lacks the format version".to_string(),
                };
                return Err(Error::corruption(name, offset, detail));
            }
            // Version::apply cannot know where the edit came from; place its complaint at the
            // record that caused it.
            version = version.apply(&edit, name).map_err(|e| match e {
                Error::Corruption { detail, .. } => Error::corruption(name, offset, detail),
                other => other,
            })?;
            log_number = edit.log_number.or(log_number);
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            records += 1;
        }
        for region in reader.dropped() {
            self.warning(
                name,
                Some(region.offset),
                format!(
                    "torn tail of {} bytes ({}); recovery ignores it",
                    region.len, region.reason
                ),
            );
        }
        let missing =
            |what: &str| Error::corruption(name, 0, format!("manifest records no {what}"));
        let log_number = log_number.ok_or_else(|| missing("log number"))?;
        next_file.ok_or_else(|| missing("next file number"))?;
        last_seq.ok_or_else(|| missing("last sequence"))?;
        version
            .check_invariants()
            .map_err(|why| Error::corruption(name, 0, why))?;
        Ok(Recovered {
            manifest_number: number,
            version,
            log_number,
        })
    }

    /// Verifies a table the manifest lists: presence and size first, then its contents.
    fn check_live_table(&mut self, manifest: u64, level: usize, meta: &FileMetaData) {
        let name = table_file_name(meta.number);
        match self.fs.path_kind(&self.dir.join(&name)) {
            Ok(Some(PathKind::File)) => {}
            Ok(_) => {
                self.problem(Problem::new(
                    name,
                    None,
                    format!(
                        "missing, but {} lists it in level {level}",
                        manifest_file_name(manifest)
                    ),
                ));
                return;
            }
            Err(e) => {
                self.problem(Problem::from_error(&name, e));
                return;
            }
        }
        match self.fs.file_size(&self.dir.join(&name)) {
            Ok(size) if size == meta.file_size => self.check_table_file(meta.number, Some(meta)),
            Ok(size) => self.problem(Problem::new(
                name,
                None,
                format!(
                    "file is {size} bytes, but {} records {} (truncated or replaced)",
                    manifest_file_name(manifest),
                    meta.file_size
                ),
            )),
            Err(e) => self.problem(Problem::from_error(&name, e)),
        }
    }

    /// Reads key table `number` completely; with `meta`, also compares it with the manifest.
    fn check_table_file(&mut self, number: u64, meta: Option<&FileMetaData>) {
        let name = table_file_name(number);
        if let Err(e) = self.verify_table(&name, number, meta) {
            self.problem(Problem::from_error(&name, e));
        }
    }

    fn verify_table(&mut self, name: &str, number: u64, meta: Option<&FileMetaData>) -> Result<()> {
        let reader = self.reader(name)?;
        let size = match meta {
            Some(m) => m.file_size,
            None => reader.size()?,
        };
        let table = Arc::new(Table::open(
            reader,
            name.to_string(),
            number,
            size,
            None,
            IoClass::Other,
        )?);
        let mut it = table.iter(ReadCtx {
            class: IoClass::Other,
            fill_cache: false,
        });
        let mut first: Option<Vec<u8>> = None;
        let mut prev: Vec<u8> = Vec::new();
        let mut entries = 0u64;
        let mut deletions = 0u64;
        it.seek_to_first()?;
        while it.valid() {
            let key = it.key();
            let Some(parsed) = ParsedKey::parse(key) else {
                self.problem(Problem::new(
                    name,
                    None,
                    format!("entry {entries} has a malformed internal key"),
                ));
                return Ok(());
            };
            if entries > 0 && compare_internal(&prev, key).is_ge() {
                self.problem(Problem::new(
                    name,
                    None,
                    format!("entry {entries} is not after the entry before it"),
                ));
                return Ok(());
            }
            if parsed.kind == ValueKind::Deletion {
                deletions += 1;
            }
            if first.is_none() {
                first = Some(key.to_vec());
            }
            prev.clear();
            prev.extend_from_slice(key);
            entries += 1;
            it.next()?;
        }
        self.report.tables_checked += 1;
        self.report.entries_checked += entries;

        let last = (entries > 0).then_some(prev);
        let props = table.properties();
        let mut mismatch = |what: String| self.report.problems.push(Problem::new(name, None, what));
        if entries != props.num_entries {
            mismatch(format!(
                "holds {entries} entries, its properties say {}",
                props.num_entries
            ));
        }
        if deletions != props.num_deletions {
            mismatch(format!(
                "holds {deletions} deletions, its properties say {}",
                props.num_deletions
            ));
        }
        if first.as_deref().unwrap_or_default() != props.smallest_key.as_slice()
            || last.as_deref().unwrap_or_default() != props.largest_key.as_slice()
        {
            mismatch("first or last key differs from its properties".to_string());
        }
        if let Some(m) = meta {
            if first.as_deref() != Some(m.smallest.as_slice()) {
                mismatch("first key differs from the manifest's smallest key".to_string());
            }
            if last.as_deref() != Some(m.largest.as_slice()) {
                mismatch("last key differs from the manifest's largest key".to_string());
            }
            if entries != m.num_entries || deletions != m.num_deletions {
                mismatch(format!(
                    "holds {entries} entries ({deletions} deletions), the manifest says {} ({})",
                    m.num_entries, m.num_deletions
                ));
            }
        }
        Ok(())
    }

    fn check_wal(&mut self, number: u64) {
        let name = wal_file_name(number);
        if let Err(e) = self.verify_wal(&name) {
            self.problem(Problem::from_error(&name, e));
        }
    }

    /// Reads every record of a WAL as recovery would (tolerating only a torn tail) and decodes
    /// its batch.
    fn verify_wal(&mut self, name: &str) -> Result<()> {
        let mut reader = LogReader::new(
            self.reader(name)?,
            name.to_string(),
            IoClass::Other,
            WalRecoveryMode::TolerateCorruptedTail,
            MAX_BATCH_SIZE_LIMIT as usize,
        )?;
        let result = (|| {
            while let Some((offset, record)) = reader.read_record()? {
                let batch = WriteBatch::decode(record, name, offset)?;
                let first = batch.sequence();
                if first == 0 || first.saturating_add(u64::from(batch.count())) > MAX_SEQUENCE {
                    return Err(Error::corruption(
                        name,
                        offset,
                        format!("batch sequence {first} out of range"),
                    ));
                }
                self.report.wal_records_checked += 1;
            }
            Ok(())
        })();
        // Regions cut before a failure are still worth reporting.
        for region in reader.dropped() {
            self.report.warnings.push(Problem::new(
                name,
                Some(region.offset),
                format!(
                    "torn tail of {} bytes ({}); recovery drops it",
                    region.len, region.reason
                ),
            ));
        }
        result
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
