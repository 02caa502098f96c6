//! DP-KV's hotness detector as the engine runs it: every read and write of a key is recorded
//! in the prefix statistics (`trie.rs`), every `dpkv_decay_interval` a tick judges them, saves
//! what it found (`persist.rs`), and names the routing the index tree should have: the key
//! ranges of the hot prefixes. The engine then moves the keys (`db/migrate.rs`).
//!
//! Recording never waits: an access that finds the statistics locked by another thread is
//! skipped and counted (the statistics are a sample; a reader is never held up by them).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::persist::{self, HotnessStore, Restored};
use super::trie::{HotnessConfig, HotnessTrie};
use crate::error::Result;
use crate::io::{FileSystem, IoStats};
use crate::options::Options;
use crate::stats::PartitionStats;
use crate::version::routing::Routing;

/// Ticks between two full snapshots of the statistics (the log records each tick between).
pub const CHECKPOINT_TICKS: u64 = 16;

/// The detector of one database.
#[derive(Debug)]
pub struct HotnessDetector {
    trie: Mutex<HotnessTrie>,
    /// Where ticks are saved (a read-write open's; `None` read-only or after the files failed).
    store: Mutex<Option<HotnessStore>>,
    interval: Duration,
    next_tick: Mutex<Instant>,
    /// Above 0: tick after this many accesses instead of by time.
    tick_accesses: u64,
    /// Accesses since the last tick.
    since_tick: AtomicU64,
    restored: Restored,
    skipped: AtomicU64,
    ticks: AtomicU64,
    save_errors: AtomicU64,
}

impl HotnessDetector {
    /// The detector `opts` ask for, from the statistics the files in `dir` hold (a damaged or
    /// missing file costs what it had learned, logged). A read-write open then starts the
    /// files afresh (`persist.rs`); a read-only one writes nothing.
    ///
    /// Errors: a read-write open cannot write the files.
    pub fn open(
        opts: &Options,
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        io: &Arc<IoStats>,
        read_only: bool,
    ) -> Result<Self> {
        let config = HotnessConfig {
            hot_density: opts.dpkv_hot_density(),
            trie_bytes: opts.dpkv_trie_bytes() as usize,
            ..HotnessConfig::default()
        };
        let (trie, generation, restored) = persist::restore(fs.as_ref(), dir, io, &config);
        for damage in &restored.damage {
            log::warn!(
                "{}: hotness statistics unusable ({damage}); they are learned again",
                dir.display()
            );
        }
        let store = if read_only {
            None
        } else {
            Some(HotnessStore::start(
                Arc::clone(fs),
                dir,
                Arc::clone(io),
                &trie,
                generation,
            )?)
        };
        Ok(HotnessDetector::new(
            trie,
            restored,
            store,
            Duration::from_secs_f64(opts.dpkv_decay_interval()),
            opts.dpkv_tick_accesses(),
        ))
    }

    /// A detector starting from `trie` (what the open restored, as `restored` reports),
    /// saving into `store`, ticking every `interval`, or after every `tick_accesses` accesses
    /// when that is above 0.
    pub fn new(
        trie: HotnessTrie,
        restored: Restored,
        store: Option<HotnessStore>,
        interval: Duration,
        tick_accesses: u64,
    ) -> Self {
        HotnessDetector {
            trie: Mutex::new(trie),
            store: Mutex::new(store),
            interval,
            next_tick: Mutex::new(Instant::now() + interval),
            tick_accesses,
            since_tick: AtomicU64::new(0),
            restored,
            skipped: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            save_errors: AtomicU64::new(0),
        }
    }

    /// Records one access of `key`, unless another thread holds the statistics.
    pub fn record(&self, key: &[u8]) {
        self.since_tick.fetch_add(1, Ordering::Relaxed);
        match self.trie.try_lock() {
            Some(mut t) => t.record(key),
            None => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// How long until the next tick is due by time (zero when it is).
    pub fn until_tick(&self) -> Duration {
        self.next_tick
            .lock()
            .saturating_duration_since(Instant::now())
    }

    /// Whether ticks count accesses rather than time.
    pub fn counts_accesses(&self) -> bool {
        self.tick_accesses > 0
    }

    /// Whether a tick is due: by accesses when they are counted, else by time.
    pub fn tick_due(&self) -> bool {
        if self.counts_accesses() {
            self.since_tick.load(Ordering::Relaxed) >= self.tick_accesses
        } else {
            self.until_tick().is_zero()
        }
    }

    /// Runs a tick: decays and judges the statistics, saves them, and returns the routing the
    /// hot prefixes ask for, or `None` when the tick had too few accesses to judge (an idle
    /// spell is not a cooling one: the routing stays). Schedules the next tick.
    pub fn tick(&self) -> Option<Routing> {
        *self.next_tick.lock() = Instant::now() + self.interval;
        self.since_tick.store(0, Ordering::Relaxed);
        let (outcome, informed, trie_copy) = {
            let mut t = self.trie.lock();
            let informed = t.judged();
            let outcome = t.tick();
            (outcome, informed, t.clone())
        };
        let ticks = self.ticks.fetch_add(1, Ordering::Relaxed) + 1;
        if ticks.is_multiple_of(CHECKPOINT_TICKS) {
            drop(trie_copy);
            self.checkpoint();
        } else if let Some(store) = self.store.lock().as_mut()
            && let Err(e) = store.save_tick(&trie_copy)
        {
            self.save_errors.fetch_add(1, Ordering::Relaxed);
            log::warn!("hotness statistics not saved ({e}); they go on in memory");
        }
        informed.then(|| Routing::of_prefixes(outcome.hot.iter().map(Vec::as_slice)))
    }

    /// Saves the statistics whole (a snapshot, and a fresh log): at close, and every
    /// [`CHECKPOINT_TICKS`] ticks, so a restart replays few records over an exact trie. A
    /// failure is logged and counted.
    pub fn checkpoint(&self) {
        let trie = self.trie.lock().clone();
        if let Some(store) = self.store.lock().as_mut()
            && let Err(e) = store.checkpoint(&trie)
        {
            self.save_errors.fetch_add(1, Ordering::Relaxed);
            log::warn!("hotness statistics not saved ({e}); they go on in memory");
        }
    }

    /// Writes its figures into `stats` (`stats().partitions`: the trie's memory and finding,
    /// the accesses, the ticks, what the open restored).
    pub fn report(&self, stats: &mut PartitionStats) {
        let t = self.trie.lock();
        stats.trie_bytes = t.bytes() as u64;
        stats.trie_nodes = t.nodes() as u64;
        stats.sketch_bytes = t.sketch_bytes() as u64;
        stats.hot_prefixes = t.hot_prefixes().len() as u64;
        stats.accesses = t.accesses;
        stats.trie_accesses = t.trie_accesses;
        stats.accesses_skipped = self.skipped.load(Ordering::Relaxed);
        stats.ticks = self.ticks.load(Ordering::Relaxed);
        stats.save_errors = self.save_errors.load(Ordering::Relaxed);
        stats.restored_snapshot = self.restored.snapshot;
        stats.restored_records = self.restored.log_records;
        stats.damaged_files = self.restored.damage.len() as u64;
    }
}
