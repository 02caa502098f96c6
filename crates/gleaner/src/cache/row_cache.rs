//! The row cache: the newest value of recently read keys, by user key (option
//! `row_cache_size`; RocksDB's `row_cache`, Kvrocks's `rocksdb.row_cache_size`). A hit answers a
//! point read with one hash lookup: no memtable, filter, index or handle-block search, and no
//! value-table read. What it costs instead: memory for whole values (it is off by default), and
//! every write of a key removing the key's entry.
//!
//! An entry is the answer a read of the present (no snapshot) gives: a value and its expiry.
//! It stays true until the key is written again, so every write removes the key's entry after
//! it became visible ([`RowCache::invalidate`]), and a range deletion empties the cache (with
//! `prepopulate_row_cache` the write then puts its own value in, as a fill holding the ticket
//! its removal returned, so a later write of the key keeps it out). A
//! read may only put in what it found when no write of the key can have become visible during
//! the read: a read takes a [`Ticket`] — the generation of the key's slot — before it loads
//! the state it reads, and a write moves its keys' slots to the next generation before it
//! removes their entries. [`RowCache::fill`] inserts, then checks the generation again and
//! removes what it inserted if it moved. Why that is enough: a write the read did not see was
//! installed after the read loaded its state, so after the ticket, and it bumps the slot after
//! that. Either the fill's check sees the bump (and removes the entry), or the check came
//! first in the slot's order, so the insert did too, and the write's removal, which follows its
//! bump, removes the entry. A slot serves many keys: a write of any of them only costs a
//! concurrent read of another its fill.
//!
//! Expiry is judged at each hit against the read's time, as a read of the tables would judge
//! the version. Compaction and GC never change what a read of the present returns (they move
//! values, drop versions no read can see, and drop expired ones, which a hit judges expired
//! too), so they touch no entry.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// Generation slots: keys hash to one of these many. A write of any key of a slot makes a
/// concurrent read of another key of it skip its fill, so there are many; 4,096 × 8 bytes.
const SLOTS: usize = 4096;

/// Bytes an entry costs beyond its key and value, roughly (the map's slot, the key's and the
/// value's buffers' headers and reference counts).
const ENTRY_OVERHEAD: u64 = 96;

/// Assumed average entry size, only used to size the cache's initial tables.
const TYPICAL_ENTRY_SIZE: u64 = 4 << 10;

/// A cached answer: the value of the key's newest version and when that version expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The value, shared with every reader it is handed to.
    pub value: Bytes,
    /// When the version expires (milliseconds since the Unix epoch, by the database's clock),
    /// or `None`.
    pub expiry_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct RowWeighter;

impl Weighter<Bytes, Row> for RowWeighter {
    fn weight(&self, key: &Bytes, row: &Row) -> u64 {
        key.len() as u64 + row.value.len() as u64 + ENTRY_OVERHEAD
    }
}

/// What a read took before loading the state it reads: the generation of its key's slot.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    slot: usize,
    generation: u64,
}

/// The newest values of recently read keys, within a byte budget.
pub struct RowCache {
    cache: Cache<Bytes, Row, RowWeighter>,
    generations: Box<[AtomicU64]>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Fills undone because a write of the slot became visible during the read.
    raced_fills: AtomicU64,
}

impl std::fmt::Debug for RowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.cache.weight())
            .finish()
    }
}

impl RowCache {
    /// A cache of up to `capacity_bytes` (keys, values and a small per-entry overhead); at
    /// least one byte.
    pub fn new(capacity_bytes: u64) -> Self {
        let capacity = capacity_bytes.max(1);
        let items = (capacity / TYPICAL_ENTRY_SIZE).clamp(16, 1 << 22) as usize;
        RowCache {
            cache: Cache::with_weighter(items, capacity, RowWeighter),
            generations: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            raced_fills: AtomicU64::new(0),
        }
    }

    fn slot(key: &[u8]) -> usize {
        crate::checksum::crc32c(key) as usize % SLOTS
    }

    /// The cached answer for `key`, if any (counted as a hit or a miss).
    pub fn get(&self, key: &[u8]) -> Option<Row> {
        let found = self.cache.get(key);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Taken by a read of `key` before it loads the state it reads; handed to
    /// [`RowCache::fill`] with what it found.
    pub fn ticket(&self, key: &[u8]) -> Ticket {
        let slot = Self::slot(key);
        Ticket {
            slot,
            generation: self.generations[slot].load(Ordering::SeqCst),
        }
    }

    /// Puts in `row`, what a read of the present holding `ticket` found for `key`, unless a
    /// write of `key`'s slot became visible since the ticket was taken.
    pub fn fill(&self, key: &[u8], ticket: Ticket, row: Row) {
        self.fill_racing(key, ticket, row, || {});
    }

    /// [`RowCache::fill`], running `between` after the first check of the generation and
    /// before the insert: where a test puts the write that races it.
    fn fill_racing(&self, key: &[u8], ticket: Ticket, row: Row, between: impl FnOnce()) {
        let generation = &self.generations[ticket.slot];
        if generation.load(Ordering::SeqCst) != ticket.generation {
            self.raced_fills.fetch_add(1, Ordering::Relaxed);
            return;
        }
        between();
        self.cache.insert(Bytes::copy_from_slice(key), row);
        if generation.load(Ordering::SeqCst) != ticket.generation {
            // A write raced the insert: the entry may predate it. (Removing a newer read's
            // entry for the same key only costs that read's next hit.)
            self.cache.remove(key);
            self.raced_fills.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Called for each key a write wrote, after the write became visible: moves the key's slot
    /// to the next generation, then removes the key's entry. Returns the ticket of the slot's
    /// new generation, with which the write may put its own value in ([`RowCache::fill`];
    /// option `prepopulate_row_cache`): a later write of the slot makes that put skip or undo
    /// itself, so it never replaces a newer value.
    pub fn invalidate(&self, key: &[u8]) -> Ticket {
        let slot = Self::slot(key);
        let generation = self.generations[slot].fetch_add(1, Ordering::SeqCst) + 1;
        self.cache.remove(key);
        Ticket { slot, generation }
    }

    /// Drops `key`'s entry, found expired: no read will take it again, and it would hold its
    /// memory until evicted. (Should a write have just replaced it, the next read misses.)
    pub fn forget(&self, key: &[u8]) {
        self.cache.remove(key);
    }

    /// Called after a write that may change many keys (a range deletion) became visible:
    /// every slot moves to the next generation, then the cache is emptied.
    pub fn invalidate_all(&self) {
        for generation in self.generations.iter() {
            generation.fetch_add(1, Ordering::SeqCst);
        }
        self.cache.clear();
    }

    /// The cache's budget in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Bytes the cached entries are counted as.
    pub fn usage_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// Reads the cache answered.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Reads the cache did not answer.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Fills skipped or undone because a write of the key's slot became visible during the
    /// read.
    pub fn raced_fills(&self) -> u64 {
        self.raced_fills.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &'static [u8]) -> Row {
        Row {
            value: Bytes::from_static(v),
            expiry_ms: None,
        }
    }

    #[test]
    fn a_fill_answers_until_the_key_is_written() {
        let c = RowCache::new(1 << 20);
        assert_eq!(c.get(b"k"), None);
        let t = c.ticket(b"k");
        c.fill(b"k", t, row(b"v"));
        assert_eq!(c.get(b"k"), Some(row(b"v")));
        c.invalidate(b"k");
        assert_eq!(c.get(b"k"), None);
        assert_eq!((c.hits(), c.misses()), (1, 2));
    }

    #[test]
    fn a_write_during_the_read_keeps_its_fill_out() {
        let c = RowCache::new(1 << 20);
        let t = c.ticket(b"k");
        // The write becomes visible while the read runs, after its ticket.
        c.invalidate(b"k");
        c.fill(b"k", t, row(b"old"));
        assert_eq!(c.get(b"k"), None);
        assert_eq!(c.raced_fills(), 1);
        // A read that starts after the write fills.
        let t = c.ticket(b"k");
        c.fill(b"k", t, row(b"new"));
        assert_eq!(c.get(b"k"), Some(row(b"new")));
    }

    #[test]
    fn a_write_between_the_check_and_the_insert_undoes_the_fill() {
        let c = RowCache::new(1 << 20);
        let t = c.ticket(b"k");
        c.fill_racing(b"k", t, row(b"old"), || {
            c.invalidate(b"k");
        });
        assert_eq!(c.get(b"k"), None);
        assert_eq!(c.raced_fills(), 1);
        // The same with a write that puts its value: the fill's undo may remove it, but never
        // leaves the older value.
        let t = c.ticket(b"k");
        c.fill_racing(b"k", t, row(b"old"), || {
            let w = c.invalidate(b"k");
            c.fill(b"k", w, row(b"new"));
        });
        assert_ne!(c.get(b"k"), Some(row(b"old")));
        // A write's put whose slot a later write moved on stays out.
        let first = c.invalidate(b"k");
        let second = c.invalidate(b"k");
        c.fill(b"k", second, row(b"newer"));
        c.fill(b"k", first, row(b"older"));
        assert_eq!(c.get(b"k"), Some(row(b"newer")));
    }

    #[test]
    fn a_range_deletion_empties_the_cache_and_stops_every_read_in_flight() {
        let c = RowCache::new(1 << 20);
        for k in [b"a", b"b"] {
            let t = c.ticket(k);
            c.fill(k, t, row(b"v"));
        }
        let t = c.ticket(b"c");
        c.invalidate_all();
        assert_eq!(c.get(b"a"), None);
        assert_eq!(c.get(b"b"), None);
        c.fill(b"c", t, row(b"v"));
        assert_eq!(c.get(b"c"), None);
    }

    #[test]
    fn entries_stay_within_the_budget() {
        let c = RowCache::new(64 << 10);
        for i in 0..1000u32 {
            let k = i.to_be_bytes();
            let t = c.ticket(&k);
            c.fill(&k, t, row(&[7; 1024]));
        }
        assert!(c.usage_bytes() <= 64 << 10, "{}", c.usage_bytes());
        assert!(c.usage_bytes() > 0);
    }
}
