//! Saving the hotness statistics across restarts (paper §4.3): a full snapshot, `HOTNESS`,
//! written whole and atomically now and then, and an incremental log, `HOTNESS.log`, to which
//! each tick appends the hot prefixes it found with their counts (docs/format.md, "Hotness
//! files").
//!
//! Both are advisory. Where the data of each key range lives is the manifest's to record, so a
//! lost, damaged or stale hotness file costs only what the statistics had learned: the open
//! goes on with what could be read (a snapshot refused, the log up to its first damage) and
//! counts the damage.
//!
//! Generations tie the log to its snapshot. Checkpoint `g` writes the snapshot of generation
//! `g`, then starts an empty log whose records carry `g`; a crash between the two leaves
//! the previous generation's log beside the new snapshot, whose records the snapshot already
//! holds, and the restore skips them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::trie::{HotnessConfig, HotnessTrie};
use super::trie_codec::{HotCount, decode_hot, encode_hot};
use crate::coding::{decode_fixed64, put_fixed64};
use crate::error::{Error, Result};
use crate::gc::policy_file::{decode_policy_file, encode_policy_file};
use crate::io::{
    CountedReader, CountedWriter, FileSystem, IoClass, IoStats, ReadFileOptions, WriteFileOptions,
    write_file_atomically,
};
use crate::options::WalRecoveryMode;
use crate::wal::{LogReader, LogWriter};

use crate::filename::{HOTNESS as SNAPSHOT_FILE, HOTNESS_LOG as LOG_FILE};

/// Most bytes of a snapshot file, checked before it is read (a trie of the largest
/// `dpkv_trie_bytes` encodes in about half of it).
pub const MAX_SNAPSHOT_BYTES: u64 = 64 << 20;
/// Most bytes of one log record.
const MAX_LOG_RECORD: usize = 16 << 20;
/// Log bytes after which the next tick writes a snapshot instead of a record (so the log, and
/// the replay at open, stay short).
pub const CHECKPOINT_LOG_BYTES: u64 = 4 << 20;

/// What the open found of the saved statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Restored {
    /// Whether a usable snapshot was read.
    pub snapshot: bool,
    /// Log records replayed after it.
    pub log_records: u64,
    /// Log records skipped as older than the snapshot.
    pub stale_records: u64,
    /// What was wrong with a file, for each one found damaged (the rest of it was not used).
    pub damage: Vec<String>,
}

/// The statistics the files in `dir` hold, under `config`: the snapshot, then the log records
/// of its generation. Never fails: what cannot be read is reported in [`Restored::damage`]
/// and learned again. Returns the trie, the generation to continue from, and the report.
pub fn restore(
    fs: &dyn FileSystem,
    dir: &Path,
    io: &Arc<IoStats>,
    config: &HotnessConfig,
) -> (HotnessTrie, u64, Restored) {
    let mut report = Restored::default();
    let (mut trie, snapshot_generation) = match read_snapshot(fs, dir, io, config) {
        Ok(Some((trie, generation))) => {
            report.snapshot = true;
            (trie, Some(generation))
        }
        Ok(None) => (HotnessTrie::new(config.clone()), None),
        Err(e) => {
            report.damage.push(format!("{SNAPSHOT_FILE}: {e}"));
            (HotnessTrie::new(config.clone()), None)
        }
    };
    let mut generation = snapshot_generation.unwrap_or(0);
    if let Err(e) = replay_log(fs, dir, io, config, snapshot_generation, |g, hot| {
        if snapshot_generation.is_some_and(|s| g < s) {
            report.stale_records += 1;
            return;
        }
        generation = generation.max(g);
        trie.restore_hot(hot);
        report.log_records += 1;
    }) {
        report.damage.push(format!("{LOG_FILE}: {e}"));
    }
    (trie, generation, report)
}

fn read_snapshot(
    fs: &dyn FileSystem,
    dir: &Path,
    io: &Arc<IoStats>,
    config: &HotnessConfig,
) -> Result<Option<(HotnessTrie, u64)>> {
    let path = dir.join(SNAPSHOT_FILE);
    if fs.path_kind(&path)?.is_none() {
        return Ok(None);
    }
    let size = fs.file_size(&path)?;
    if size > MAX_SNAPSHOT_BYTES {
        return Err(Error::corruption(
            SNAPSHOT_FILE,
            0,
            format!("{size} bytes, beyond the limit of {MAX_SNAPSHOT_BYTES}"),
        ));
    }
    let bytes = fs.read_all(&path)?;
    io.record_read(IoClass::Other, bytes.len() as u64);
    let data = decode_policy_file(SNAPSHOT_FILE, &bytes)?;
    if data.len() < 8 {
        return Err(Error::corruption(SNAPSHOT_FILE, 0, "no generation"));
    }
    let generation = decode_fixed64(&data[..8]);
    let trie = HotnessTrie::decode_snapshot(config.clone(), &data[8..])
        .map_err(|e| Error::corruption(SNAPSHOT_FILE, 8, e))?;
    Ok(Some((trie, generation)))
}

/// Calls `apply` with each intact record of the log (generation, hot list), in order, up to
/// the first damage, which is returned as the error.
fn replay_log(
    fs: &dyn FileSystem,
    dir: &Path,
    io: &Arc<IoStats>,
    config: &HotnessConfig,
    snapshot_generation: Option<u64>,
    mut apply: impl FnMut(u64, Vec<HotCount>),
) -> Result<()> {
    let path = dir.join(LOG_FILE);
    if fs.path_kind(&path)?.is_none() {
        return Ok(());
    }
    let file = fs.open_readable(&path, ReadFileOptions::default())?;
    let mut reader = LogReader::new(
        CountedReader::new(file, Arc::clone(io)),
        LOG_FILE.to_string(),
        IoClass::Other,
        WalRecoveryMode::TolerateCorruptedTail,
        MAX_LOG_RECORD,
    )?;
    let mut log_generation = None;
    while let Some((offset, record)) = reader.read_record()? {
        let bad = |what: String| Error::corruption(LOG_FILE, offset, what);
        if record.len() < 8 {
            return Err(bad("a record without its generation".into()));
        }
        let g = decode_fixed64(&record[..8]);
        // One log holds one generation; without a snapshot, the log's first record names it.
        if *log_generation.get_or_insert(g) != g {
            return Err(bad(format!("generation {g} in a log of another")));
        }
        if snapshot_generation.is_some_and(|s| g > s) {
            return Err(bad(format!(
                "generation {g}, newer than the snapshot's: the log outlived its snapshot"
            )));
        }
        let hot = decode_hot(config, &record[8..]).map_err(bad)?;
        apply(g, hot);
    }
    Ok(())
}

/// What a hotness file holds, for `gleaner dump`.
#[derive(Debug)]
pub enum HotnessFile {
    /// A snapshot: its generation and the trie.
    Snapshot(u64, HotnessTrie),
    /// A log: each record's generation and hot prefixes with their counts.
    Log(Vec<(u64, Vec<HotCount>)>),
}

/// Reads hotness file `path` (named `name`: the snapshot or the log) whole, under the widest
/// bounds.
///
/// Errors: the file cannot be read, or is damaged ([`Error::Corruption`]).
pub fn read_file(fs: &dyn FileSystem, path: &Path, name: &str) -> Result<HotnessFile> {
    let config = HotnessConfig::widest();
    let io = Arc::default();
    let dir = path.parent().unwrap_or(Path::new("."));
    if name == SNAPSHOT_FILE {
        let (trie, generation) = read_snapshot(fs, dir, &io, &config)?
            .ok_or_else(|| Error::invalid(format!("{}: no such file", path.display())))?;
        return Ok(HotnessFile::Snapshot(generation, trie));
    }
    let mut records = Vec::new();
    replay_log(fs, dir, &io, &config, None, |g, hot| records.push((g, hot)))?;
    Ok(HotnessFile::Log(records))
}

/// The files being written: where each tick goes.
#[derive(Debug)]
pub struct HotnessStore {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    io: Arc<IoStats>,
    generation: u64,
    log: LogWriter,
}

impl HotnessStore {
    /// Starts writing in `dir`: a checkpoint of `trie` as the generation after `generation`
    /// (what [`restore`] returned), so the open begins with a fresh log.
    ///
    /// Errors: writing or syncing the files fails.
    pub fn start(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        io: Arc<IoStats>,
        trie: &HotnessTrie,
        generation: u64,
    ) -> Result<Self> {
        let (generation, log) = checkpoint_files(fs.as_ref(), dir, &io, trie, generation + 1)?;
        Ok(HotnessStore {
            fs,
            dir: dir.to_path_buf(),
            io,
            generation,
            log,
        })
    }

    /// Saves the tick that just ran: a log record of its hot prefixes and their counts, or a
    /// full snapshot once the log has grown past [`CHECKPOINT_LOG_BYTES`]. Synced: a crash
    /// loses at most the tick being written.
    ///
    /// Errors: writing or syncing fails (the caller logs it and goes on: the files are
    /// advisory).
    pub fn save_tick(&mut self, trie: &HotnessTrie) -> Result<()> {
        if self.log.file_size() >= CHECKPOINT_LOG_BYTES {
            return self.checkpoint(trie);
        }
        let mut record = Vec::new();
        put_fixed64(&mut record, self.generation);
        encode_hot(&trie.hot_counts(), &mut record);
        self.log.add_record(&record)?;
        self.log.sync()
    }

    /// Writes a full snapshot and starts a new log.
    ///
    /// Errors: writing or syncing fails; the previous snapshot and log then still hold.
    pub fn checkpoint(&mut self, trie: &HotnessTrie) -> Result<()> {
        let (generation, log) = checkpoint_files(
            self.fs.as_ref(),
            &self.dir,
            &self.io,
            trie,
            self.generation + 1,
        )?;
        self.generation = generation;
        self.log = log;
        Ok(())
    }

    /// The generation being written.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// Snapshot `generation` of `trie`, then an empty log for it.
fn checkpoint_files(
    fs: &dyn FileSystem,
    dir: &Path,
    io: &Arc<IoStats>,
    trie: &HotnessTrie,
    generation: u64,
) -> Result<(u64, LogWriter)> {
    let mut data = Vec::new();
    put_fixed64(&mut data, generation);
    trie.encode_snapshot(&mut data);
    write_file_atomically(
        fs,
        dir,
        SNAPSHOT_FILE,
        &encode_policy_file(&data),
        io,
        IoClass::Other,
    )?;
    let file = fs.new_writable(&dir.join(LOG_FILE), WriteFileOptions::default())?;
    let mut log = LogWriter::new(Box::new(CountedWriter::new(
        file,
        IoClass::Other,
        Arc::clone(io),
    )));
    log.sync()?;
    fs.sync_dir(dir)?;
    Ok((generation, log))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultFs, TornMode};

    const DIR: &str = "/db";

    fn fault_fs() -> FaultFs {
        let fs = FaultFs::new(17);
        fs.create_dir_all(Path::new(DIR)).expect("dir");
        fs.sync_dir(Path::new("/")).expect("sync");
        fs
    }

    fn hot(list: &[(&str, f64)]) -> Vec<(Vec<u8>, f64)> {
        list.iter().map(|(p, c)| (p.as_bytes().to_vec(), *c)).collect()
    }

    /// A trie whose last tick found `list`.
    fn trie_with(list: &[(&str, f64)]) -> HotnessTrie {
        let mut t = HotnessTrie::new(HotnessConfig::default());
        t.restore_hot(hot(list));
        t
    }

    fn open(fs: &FaultFs) -> (HotnessTrie, u64, Restored) {
        restore(fs, Path::new(DIR), &Arc::default(), &HotnessConfig::default())
    }

    fn store(fs: &FaultFs, trie: &HotnessTrie, generation: u64) -> HotnessStore {
        HotnessStore::start(
            Arc::new(fs.clone()),
            Path::new(DIR),
            Arc::default(),
            trie,
            generation,
        )
        .expect("start")
    }

    #[test]
    fn ticks_survive_a_crash_through_the_snapshot_and_the_log() {
        let fs = fault_fs();
        let (t, g, report) = open(&fs);
        assert_eq!(report, Restored::default(), "nothing saved yet");
        let mut s = store(&fs, &t, g);
        s.save_tick(&trie_with(&[("user3", 100.0)])).expect("tick");
        s.save_tick(&trie_with(&[("user3", 60.0), ("user5", 80.0)]))
            .expect("tick");
        fs.crash(TornMode::None);
        let (back, g2, report) = open(&fs);
        assert!(report.snapshot);
        assert_eq!(report.log_records, 2);
        assert!(report.damage.is_empty(), "{:?}", report.damage);
        assert_eq!(back.hot_counts(), hot(&[("user3", 60.0), ("user5", 80.0)]));
        // The next open checkpoints it: a new generation whose log starts empty.
        let mut s = store(&fs, &back, g2);
        assert_eq!(s.generation(), g2 + 1);
        s.save_tick(&trie_with(&[("user7", 30.0)])).expect("tick");
        let (again, _, report) = open(&fs);
        assert_eq!(report.log_records, 1);
        assert_eq!(again.hot_prefixes(), &[b"user7".to_vec()]);
    }

    #[test]
    fn a_torn_tick_costs_that_tick_only() {
        for seed in 0..20 {
            let fs = FaultFs::new(seed);
            fs.create_dir_all(Path::new(DIR)).expect("dir");
            fs.sync_dir(Path::new("/")).expect("sync");
            let mut s = store(&fs, &HotnessTrie::new(HotnessConfig::default()), 0);
            s.save_tick(&trie_with(&[("a", 50.0)])).expect("tick");
            // The second tick's record reaches the file but is never synced.
            let mut record = Vec::new();
            put_fixed64(&mut record, s.generation());
            encode_hot(&hot(&[("b", 70.0)]), &mut record);
            s.log.add_record(&record).expect("append");
            s.log.flush().expect("flush");
            fs.crash(TornMode::KeepPrefixWithGarbage);
            let (back, _, report) = open(&fs);
            let p = back.hot_prefixes();
            assert!(
                p == [b"a".to_vec()] || p == [b"b".to_vec()],
                "seed {seed}: {p:?}"
            );
            assert!(report.log_records >= 1, "seed {seed}");
        }
    }

    #[test]
    fn a_damaged_snapshot_or_log_is_learned_again_and_reported() {
        let fs = fault_fs();
        let dir = Path::new(DIR);
        let mut s = store(&fs, &trie_with(&[("user1", 40.0)]), 0);
        s.save_tick(&trie_with(&[("user2", 40.0)])).expect("tick");
        s.save_tick(&trie_with(&[("user3", 40.0)])).expect("tick");
        // A flipped byte in the snapshot: refused; the log alone still restores the last tick.
        fs.corrupt_byte(&dir.join(SNAPSHOT_FILE), 10, 0x20)
            .expect("corrupt");
        let (back, _, report) = open(&fs);
        assert!(!report.snapshot);
        assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
        assert!(report.damage[0].starts_with(SNAPSHOT_FILE));
        assert_eq!(back.hot_prefixes(), &[b"user3".to_vec()]);
        // A flipped byte in the log's first record (past its 7-byte header): the log is
        // refused from there, as the damage is followed by intact data.
        fs.corrupt_byte(&dir.join(LOG_FILE), 12, 0x20)
            .expect("corrupt");
        let (back, _, report) = open(&fs);
        assert_eq!(report.damage.len(), 2, "{:?}", report.damage);
        assert_eq!(report.log_records, 0);
        assert!(back.hot_prefixes().is_empty());
        // A snapshot that is too large is not read at all.
        fs.set_file_bytes(
            &dir.join(SNAPSHOT_FILE),
            vec![0; MAX_SNAPSHOT_BYTES as usize + 1],
        )
        .expect("grow");
        let (_, _, report) = open(&fs);
        assert!(report.damage[0].contains("beyond the limit"), "{report:?}");
    }

    #[test]
    fn a_log_left_beside_a_newer_snapshot_is_skipped() {
        let fs = fault_fs();
        let dir = Path::new(DIR);
        let mut s = store(&fs, &HotnessTrie::new(HotnessConfig::default()), 0);
        s.save_tick(&trie_with(&[("old", 40.0)])).expect("tick");
        let old_log = fs.file_bytes(&dir.join(LOG_FILE)).expect("log");
        // A checkpoint whose snapshot landed but whose new log did not (put the old one back).
        s.checkpoint(&trie_with(&[("new", 40.0)])).expect("checkpoint");
        fs.set_file_bytes(&dir.join(LOG_FILE), old_log).expect("restore old log");
        let (back, g, report) = open(&fs);
        assert_eq!(report.stale_records, 1);
        assert_eq!(report.log_records, 0);
        assert_eq!(back.hot_prefixes(), &[b"new".to_vec()]);
        assert_eq!(g, s.generation());
    }

    #[test]
    fn the_log_is_checkpointed_once_it_grows() {
        let fs = fault_fs();
        let mut s = store(&fs, &HotnessTrie::new(HotnessConfig::default()), 0);
        let first = s.generation();
        // A hot list of about 64 KiB a record: the log passes its bound within 70 ticks.
        let list: Vec<(String, f64)> = (0..4000).map(|i| (format!("k{i:08}"), 20.0)).collect();
        let list: Vec<(&str, f64)> = list.iter().map(|(p, c)| (p.as_str(), *c)).collect();
        let t = trie_with(&list);
        for _ in 0..70 {
            s.save_tick(&t).expect("tick");
        }
        assert!(s.generation() > first);
        assert!(s.log.file_size() < CHECKPOINT_LOG_BYTES);
        let (back, _, report) = open(&fs);
        assert!(report.snapshot && report.damage.is_empty(), "{report:?}");
        assert_eq!(back.hot_prefixes().len(), 4000);
    }
}
