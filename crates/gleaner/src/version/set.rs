//! The version set: the current version, the manifest that records how it came to be, and the
//! counters persisted with it (log number, next file number, last sequence).
//!
//! Every change to the set of live files goes through [`VersionSet::log_and_apply`]: the edit is
//! appended to the manifest and synced before the new version is installed, so a version that
//! readers can see is always recoverable.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::current::{read_current, set_current};
use super::edit::{
    MANIFEST_FORMAT_VERSION, MANIFEST_FORMAT_WITHOUT_POLICY_META, NewTable, VersionEdit,
    manifest_format,
};
use super::file_meta::ObsoleteFileSink;
use super::routing::{COLD, HOT};
use super::run::RunId;
use super::version::Version;
use crate::error::{Error, Result};
use crate::filename::manifest_file_name;
use crate::io::{
    CountedReader, CountedWriter, FileSystem, IoClass, IoStats, ReadFileOptions, WriteFileOptions,
};
use crate::key::SeqNo;
use crate::options::WalRecoveryMode;
use crate::wal::{LogReader, LogWriter};

/// Largest manifest record accepted on recovery: 256 MiB (a snapshot of about two million
/// tables).
pub const MAX_MANIFEST_RECORD: usize = 256 << 20;

/// What recovery of a manifest yields besides the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveredCounters {
    /// WALs numbered below this hold nothing that is not in key tables.
    pub log_number: u64,
    /// Next unused file number recorded in the manifest.
    pub next_file_number: u64,
    /// Last sequence number recorded in the manifest.
    pub last_sequence: SeqNo,
    /// Number of the manifest that was read.
    pub manifest_number: u64,
    /// Where the manifest's last record was cut off as a torn write, if it was. The caller
    /// must check that nothing the lost edit did is needed (see `db::open`).
    pub torn_tail_offset: Option<u64>,
    /// The latest database time an edit recorded (field 17; 0 when none did): the open starts
    /// its time no earlier.
    pub time_floor: u64,
}

/// The current version and its manifest.
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    stats: Arc<IoStats>,
    sink: Arc<dyn ObsoleteFileSink>,
    next_file_number: Arc<AtomicU64>,
    max_manifest_size: u64,
    manifest: Option<(u64, LogWriter)>,
    /// The format version the live manifest declares (see [`MANIFEST_FORMAT_VERSION`]).
    manifest_format: u64,
    log_number: u64,
    last_sequence: SeqNo,
    /// The latest time an edit recorded (carried into every new manifest's first edit).
    time_floor: u64,
    compact_pointers: Vec<Option<Vec<u8>>>,
    current: Arc<Version>,
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("manifest", &self.manifest.as_ref().map(|m| m.0))
            .field("log_number", &self.log_number)
            .field("last_sequence", &self.last_sequence)
            .finish()
    }
}

/// Shared parameters of a version set.
pub struct VersionSetConfig {
    /// File system.
    pub fs: Arc<dyn FileSystem>,
    /// Database directory.
    pub dir: PathBuf,
    /// I/O counters.
    pub stats: Arc<IoStats>,
    /// Receives tables that became unreferenced.
    pub sink: Arc<dyn ObsoleteFileSink>,
    /// The database's file-number counter.
    pub next_file_number: Arc<AtomicU64>,
    /// Manifest size at which it is rewritten.
    pub max_manifest_size: u64,
    /// Levels of a new database (of each partition's tree, when partitioned); a recovered one
    /// may have fewer populated.
    pub num_levels: usize,
    /// Whether the index tree has a hot and a cold partition (`version/routing.rs`).
    pub partitioned: bool,
}

/// The empty version of a new database under `cfg`.
fn empty_version(cfg: &VersionSetConfig) -> Version {
    if cfg.partitioned {
        Version::new_partitioned(cfg.num_levels)
    } else {
        Version::new(cfg.num_levels)
    }
}

impl VersionSet {
    /// An empty version set (new database); nothing is written until the first
    /// [`VersionSet::log_and_apply`].
    pub fn new_empty(cfg: VersionSetConfig) -> Self {
        let version = empty_version(&cfg);
        let pointers = vec![None; version.num_levels()];
        Self::from_parts(cfg, version, pointers, 0, 0)
    }

    fn from_parts(
        cfg: VersionSetConfig,
        current: Version,
        compact_pointers: Vec<Option<Vec<u8>>>,
        log_number: u64,
        last_sequence: SeqNo,
    ) -> Self {
        VersionSet {
            current: Arc::new(current),
            compact_pointers,
            fs: cfg.fs,
            dir: cfg.dir,
            stats: cfg.stats,
            sink: cfg.sink,
            next_file_number: cfg.next_file_number,
            max_manifest_size: cfg.max_manifest_size,
            manifest: None,
            manifest_format: MANIFEST_FORMAT_WITHOUT_POLICY_META,
            log_number,
            last_sequence,
            time_floor: 0,
        }
    }

    /// Recovers the version named by CURRENT. The manifest's torn tail (an edit whose write was
    /// interrupted, hence never installed) is ignored; any other damage is corruption.
    /// `num_levels` may exceed the recorded shape; a populated level at or beyond it is an
    /// error naming the `num_levels` option. An unpartitioned open of a partitioned tree is
    /// exact when its hot partition is empty (the routing is dropped) and an error naming the
    /// `partitioning` option otherwise; a partitioned open of an unpartitioned tree finds every
    /// key in the cold partition, where its tables are.
    pub fn recover(cfg: VersionSetConfig) -> Result<(Self, RecoveredCounters)> {
        let manifest_number = read_current(cfg.fs.as_ref(), &cfg.dir, &cfg.stats)?;
        let name = manifest_file_name(manifest_number);
        let file = cfg
            .fs
            .open_readable(&cfg.dir.join(&name), ReadFileOptions::default())?;
        let mut reader = LogReader::new(
            CountedReader::new(file, Arc::clone(&cfg.stats)),
            name.clone(),
            IoClass::Manifest,
            WalRecoveryMode::TolerateCorruptedTail,
            MAX_MANIFEST_RECORD,
        )?;
        // Decode with the maximum level count, partitioned; the shape is checked against
        // `num_levels` and the partitioning after.
        let mut version = Version::new_partitioned(crate::version::MAX_LEVELS);
        let mut log_number = None;
        let mut next_file = None;
        let mut last_seq = None;
        let mut time_floor = 0u64;
        let mut pointers: Vec<Option<Vec<u8>>> = vec![None; version.num_levels()];
        let mut format = None;
        while let Some((offset, record)) = reader.read_record()? {
            let mut edit = VersionEdit::decode(&record, &name, offset)?;
            let f = match format {
                Some(f) => f,
                None => *format.insert(manifest_format(&edit, &name, offset)?),
            };
            edit.check_format(f)
                .map_err(|why| Error::corruption(&name, offset, why))?;
            edit.upgrade(f);
            version = version.apply(&edit, &name, offset)?;
            log_number = edit.log_number.or(log_number);
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            time_floor = time_floor.max(edit.time_floor.unwrap_or(0));
            for (level, key) in edit.compact_pointers {
                if let Some(slot) = pointers.get_mut(level as usize) {
                    *slot = Some(key);
                }
            }
        }
        let missing =
            |what: &str| Error::corruption(&name, 0, format!("manifest records no {what}"));
        let torn_tail_offset = reader.dropped().first().map(|d| d.offset);
        let counters = RecoveredCounters {
            log_number: log_number.ok_or_else(|| missing("log number"))?,
            next_file_number: next_file.ok_or_else(|| missing("next file number"))?,
            last_sequence: last_seq.ok_or_else(|| missing("last sequence"))?,
            manifest_number,
            torn_tail_offset,
            time_floor,
        };
        let hot_tables: usize = version
            .partition_levels(HOT)
            .map(|l| version.table_count(l))
            .sum();
        if !cfg.partitioned && hot_tables > 0 {
            return Err(Error::invalid(format!(
                "the database's index tree is partitioned, with {hot_tables} tables in its hot \
                 partition: open it with option `partitioning` as it was written (OPTIONS \
                 records it), or move every key to the cold partition first"
            )));
        }
        for p in [COLD, HOT] {
            let levels = version.partition_levels(p);
            let first = levels.start;
            if let Some(deepest) = levels.rev().find(|&l| version.table_count(l) > 0)
                && deepest - first >= cfg.num_levels
            {
                return Err(Error::invalid(format!(
                    "option `num_levels` is {}, but the database has tables in level {}{}; \
                     use num_levels of at least {}",
                    cfg.num_levels,
                    deepest - first,
                    if p == HOT { " of its hot partition" } else { "" },
                    deepest - first + 1
                )));
            }
        }
        let mut snapshot = version.snapshot_edit();
        if !cfg.partitioned {
            // No hot table: the routing names keys the cold partition holds.
            snapshot.routing = None;
        }
        let levels = empty_version(&cfg).apply(&snapshot, &name, 0)?;
        let pointers: Vec<Option<Vec<u8>>> = (0..levels.num_levels())
            .map(|l| pointers.get(l).cloned().flatten())
            .collect();
        let max_number = version
            .all_files()
            .map(|(_, f)| f.number)
            .max()
            .unwrap_or(0);
        let next = counters
            .next_file_number
            .max(max_number + 1)
            .max(manifest_number + 1);
        cfg.next_file_number.fetch_max(next, Ordering::SeqCst);
        let (log_number, last_sequence) = (counters.log_number, counters.last_sequence);
        let mut set = Self::from_parts(cfg, levels, pointers, log_number, last_sequence);
        set.time_floor = time_floor;
        Ok((set, counters))
    }

    /// The current version.
    pub fn current(&self) -> &Arc<Version> {
        &self.current
    }

    /// The log number recorded by the last edit.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The last sequence recorded by the last edit.
    pub fn last_sequence(&self) -> SeqNo {
        self.last_sequence
    }

    /// The latest database time an edit recorded (field 17; 0 when none did).
    pub fn time_floor(&self) -> u64 {
        self.time_floor
    }

    /// Number of the live manifest, if one was written by this process.
    pub fn manifest_number(&self) -> Option<u64> {
        self.manifest.as_ref().map(|m| m.0)
    }

    /// Round-robin compaction cursor of `level`.
    pub fn compact_pointer(&self, level: usize) -> Option<&[u8]> {
        self.compact_pointers.get(level).and_then(|p| p.as_deref())
    }

    /// Appends `edit` to the manifest (starting a new manifest with a full snapshot when there
    /// is none yet or the current one is too large), syncs it, then installs the resulting
    /// version and marks the tables it removed as obsolete. On error nothing is installed and
    /// the manifest is abandoned; the caller must stop writing (the database becomes read-only).
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        let file_label = self
            .manifest
            .as_ref()
            .map(|m| manifest_file_name(m.0))
            .unwrap_or_else(|| "new manifest".to_string());
        let next = self.current.apply(&edit, &file_label, 0)?;
        edit.next_file_number = Some(self.next_file_number.load(Ordering::SeqCst));
        if edit.log_number.is_none() {
            edit.log_number = Some(self.log_number);
        }
        if edit.last_sequence.is_none() {
            edit.last_sequence = Some(self.last_sequence);
        }
        let result = self.write_edit(&edit, &next);
        if let Err(e) = result {
            self.manifest = None;
            return Err(e);
        }
        self.log_number = edit.log_number.unwrap_or(self.log_number);
        self.last_sequence = edit.last_sequence.unwrap_or(self.last_sequence);
        self.time_floor = self.time_floor.max(edit.time_floor.unwrap_or(0));
        for (level, key) in &edit.compact_pointers {
            if let Some(slot) = self.compact_pointers.get_mut(*level as usize) {
                *slot = Some(key.clone());
            }
        }
        for &(level, number) in &edit.deleted_files {
            let readded = edit.new_tables.iter().any(|t| t.meta.number == number);
            if !readded && let Some((_, f)) = self.current.find_table(level as usize, number) {
                f.mark_obsolete(Arc::clone(&self.sink));
            }
        }
        for number in &edit.deleted_value_tables {
            if let Some(v) = self.current.values().live(*number) {
                v.mark_obsolete(Arc::clone(&self.sink));
            }
        }
        for number in &edit.released_value_tables {
            if let Some(v) = self.current.values().retired_table(*number) {
                v.mark_obsolete(Arc::clone(&self.sink));
            }
        }
        // Drop files no live table lists a block of any more (their tables were collected or
        // freed): deleted once no older version holds them.
        for (n, f) in self.current.values().drop_files() {
            if !next.values().drop_files().contains_key(n) {
                f.mark_obsolete(Arc::clone(&self.sink));
            }
        }
        self.current = Arc::new(next);
        Ok(Arc::clone(&self.current))
    }

    fn write_edit(&mut self, edit: &VersionEdit, next: &Version) -> Result<()> {
        let too_big = self
            .manifest
            .as_ref()
            .is_some_and(|(_, w)| w.file_size() >= self.max_manifest_size);
        // The first policy metadata or sorted run beyond run 0 goes into a manifest that declares
        // the format holding it, so an older build refuses the manifest by its version.
        let needs_newer = self.manifest_format < edit.needed_format();
        if self.manifest.is_none() || too_big || needs_newer {
            let old = self.manifest.take().map(|m| m.0);
            self.start_manifest(edit, next)?;
            if let Some(old) = old {
                // The old manifest is unreachable once CURRENT names the new one; failing to
                // delete it only leaves an orphan that the next open removes.
                let _ = self.fs.remove_file(&self.dir.join(manifest_file_name(old)));
            }
            return Ok(());
        }
        let (_, writer) = self.manifest.as_mut().expect("manifest checked above");
        writer.add_record(&edit.encode())?;
        writer.sync()
    }

    /// Writes a new manifest holding a snapshot of `next` and the counters of `edit`, then points
    /// CURRENT at it.
    fn start_manifest(&mut self, edit: &VersionEdit, next: &Version) -> Result<()> {
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        let mut snapshot = VersionEdit {
            format_version: None,
            log_number: edit.log_number,
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_sequence: edit.last_sequence,
            // The latest time recorded so far, this edit's included.
            time_floor: Some(self.time_floor.max(edit.time_floor.unwrap_or(0))).filter(|t| *t > 0),
            ..Default::default()
        };
        for (level, slot) in self.compact_pointers.iter().enumerate() {
            let updated = edit
                .compact_pointers
                .iter()
                .rev()
                .find(|(l, _)| *l as usize == level);
            if let Some((_, key)) = updated {
                snapshot.compact_pointers.push((level as u32, key.clone()));
            } else if let Some(key) = slot {
                snapshot.compact_pointers.push((level as u32, key.clone()));
            }
        }
        // Every field named, none left to `..`: a field added to the snapshot must be carried
        // into the new manifest (a forgotten one is lost at the next open).
        let VersionEdit {
            format_version: _,
            log_number: _,
            next_file_number: _,
            last_sequence: _,
            compact_pointers: _,
            deleted_files: _,
            new_tables,
            new_value_tables,
            deleted_value_tables: _,
            value_garbage,
            inheritance,
            retired_value_tables,
            released_value_tables: _,
            write_back,
            drop_blocks,
            time_floor: _,
            routing,
        } = next.snapshot_edit();
        snapshot.routing = routing;
        snapshot.new_tables = new_tables;
        snapshot.new_value_tables = new_value_tables;
        snapshot.value_garbage = value_garbage;
        snapshot.inheritance = inheritance;
        snapshot.retired_value_tables = retired_value_tables;
        snapshot.write_back = write_back;
        snapshot.drop_blocks = drop_blocks;
        let format = snapshot.needed_format();
        debug_assert!(format <= MANIFEST_FORMAT_VERSION);
        snapshot.format_version = Some(format);
        let path = self.dir.join(manifest_file_name(number));
        let file = self.fs.new_writable(
            &path,
            WriteFileOptions {
                direct: false,
                buffer_size: 64 << 10,
            },
        )?;
        let mut writer = LogWriter::new(Box::new(CountedWriter::new(
            file,
            IoClass::Manifest,
            Arc::clone(&self.stats),
        )));
        writer.add_record(&snapshot.encode())?;
        writer.sync()?;
        self.fs.sync_dir(&self.dir)?;
        set_current(self.fs.as_ref(), &self.dir, &self.stats, number)?;
        self.manifest = Some((number, writer));
        self.manifest_format = format;
        Ok(())
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The edit entry that re-adds `f` at `level`, in run `run` (ignored for L0, where each table
/// is a run of its own).
pub fn new_table(level: usize, run: RunId, f: &super::file_meta::FileMetaData) -> NewTable {
    NewTable {
        level: level as u32,
        run: if super::routing::is_l0(level) { 0 } else { run },
        meta: f.meta().clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultFs;
    use crate::version::routing::{KeyRange, Routing, level_in};
    use crate::version::{FileKind, test_table};

    struct Ignore;
    impl ObsoleteFileSink for Ignore {
        fn file_unreferenced(&self, _kind: FileKind, _number: u64) {}
    }

    fn cfg(fs: &FaultFs, partitioned: bool) -> VersionSetConfig {
        VersionSetConfig {
            fs: Arc::new(fs.clone()),
            dir: PathBuf::from("/db"),
            stats: Arc::default(),
            sink: Arc::new(Ignore),
            next_file_number: Arc::new(AtomicU64::new(100)),
            max_manifest_size: 1 << 20,
            num_levels: 4,
            partitioned,
        }
    }

    fn fault_fs() -> FaultFs {
        let fs = FaultFs::new(1);
        fs.create_dir_all(Path::new("/db")).expect("dir");
        fs
    }

    #[test]
    fn switching_partitioning_off_is_exact_with_an_empty_hot_partition_and_refused_otherwise() {
        let fs = fault_fs();
        let mut set = VersionSet::new_empty(cfg(&fs, true));
        set.log_and_apply(VersionEdit {
            log_number: Some(1),
            last_sequence: Some(60),
            new_tables: vec![
                test_table(0, 0, 7, ("user1", "user9"), 100, 50..=50),
                test_table(level_in(HOT, 1) as u32, 0, 8, ("user30", "user39"), 100, 40..=40),
            ],
            routing: Some(Routing::new(vec![KeyRange::of_prefix(b"user3")])),
            ..Default::default()
        })
        .expect("apply");
        drop(set);
        // Reopened partitioned: the same trees and routing.
        let (set, _) = VersionSet::recover(cfg(&fs, true)).expect("recover");
        let v = set.current();
        assert_eq!(v.table_count(level_in(HOT, 1)), 1);
        assert_eq!(v.partition_of(b"user35"), HOT);
        drop(set);
        // Unpartitioned, while the hot partition holds a table: refused, naming the option.
        let e = VersionSet::recover(cfg(&fs, false))
            .expect_err("hot tables")
            .to_string();
        assert!(e.contains("`partitioning`") && e.contains("1 tables"), "{e}");
        // Once the hot partition is empty, the unpartitioned open is exact: every table, and no
        // routing.
        let (mut set, _) = VersionSet::recover(cfg(&fs, true)).expect("recover");
        set.log_and_apply(VersionEdit {
            deleted_files: vec![(level_in(HOT, 1) as u32, 8)],
            ..Default::default()
        })
        .expect("apply");
        drop(set);
        let (mut set, _) = VersionSet::recover(cfg(&fs, false)).expect("recover");
        let v = set.current();
        assert!(!v.is_partitioned());
        assert!(v.routing().is_empty());
        assert_eq!(v.all_files().map(|(_, f)| f.number).collect::<Vec<_>>(), [7]);
        // Its first edit starts a new manifest from the unpartitioned version: the routing is
        // gone for good, so keys written now (a user3 key among them) stay where a partitioned
        // open looks for them. (No table joins without an edit; until one, the WAL replays
        // under whatever routing the next open finds.)
        set.log_and_apply(VersionEdit {
            new_tables: vec![test_table(0, 0, 9, ("user35", "user35"), 100, 70..=70)],
            last_sequence: Some(70),
            ..Default::default()
        })
        .expect("apply");
        drop(set);
        // And back on: the cold tree holds them, nothing is hot.
        let (set, _) = VersionSet::recover(cfg(&fs, true)).expect("recover");
        assert_eq!(set.current().table_count(0), 2);
        assert_eq!(set.current().partition_of(b"user35"), COLD);
    }

    #[test]
    fn a_level_too_deep_for_num_levels_names_the_partition() {
        let fs = fault_fs();
        let mut set = VersionSet::new_empty(VersionSetConfig {
            num_levels: 6,
            ..cfg(&fs, true)
        });
        set.log_and_apply(VersionEdit {
            log_number: Some(1),
            last_sequence: Some(60),
            new_tables: vec![test_table(
                level_in(HOT, 5) as u32,
                0,
                8,
                ("user30", "user39"),
                100,
                40..=40,
            )],
            ..Default::default()
        })
        .expect("apply");
        drop(set);
        let e = VersionSet::recover(cfg(&fs, true))
            .expect_err("num_levels 4")
            .to_string();
        assert!(e.contains("level 5 of its hot partition"), "{e}");
    }
}
