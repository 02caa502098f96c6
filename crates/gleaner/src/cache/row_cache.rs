//! The row cache: the newest value of recently read keys, by user key (option
//! `row_cache_size`; RocksDB's `row_cache`, Kvrocks's `rocksdb.row_cache_size`). A hit answers a
//! point read with one hash lookup: no memtable, filter, index or handle-block search, and no
//! value-table read. What it costs instead: memory for whole values (it is off by default), and
//! every write of a key removing the key's entry.
//!
//! An entry is the answer a read of the present (no snapshot) gives: a value and its expiry.
//! It must never be older than what any read could see since, so a write *brackets* its
//! publication. Before the write becomes visible, [`RowCache::begin_write`] marks the key's
//! slot written (its generation moves on and its count of writes in progress goes up) and
//! removes the key's entry; after, [`RowCache::end_write`] moves the generation on again and
//! takes the count back down. A range deletion does the same to every slot and empties the
//! cache. While a key's write is in progress no entry of it is cached, so a read answers from
//! the tables, as a read at a snapshot or a scan would: no read sees the old value after
//! another saw the new one.
//!
//! A read that misses may put in what it found only if no write of the key began while it
//! ran: it takes a [`Ticket`] — its key's slot generation — before it loads the state it
//! reads, and [`RowCache::fill`] inserts only if the slot is still at that generation with no
//! write in progress, checked and inserted holding the slot's lock, which `begin_write` takes
//! too. A write the read did not see was published after the read loaded its state, so it
//! ends after the ticket, and it began before it was published: either its `begin_write` came
//! after the fill in the slot's lock order, and removed the entry before the write became
//! visible, or before, and the fill finds the write still in progress or the slot moved on by
//! its end. With `prepopulate_row_cache` a write puts its
//! own value in the same way, with the ticket `end_write` returned: a later write of the key
//! moves the slot on and keeps that older value out. A slot serves many keys: a write of any
//! of them only costs a concurrent read of another its fill.
//!
//! Expiry is judged at each hit against the read's time, as a read of the tables would judge
//! the version. Compaction and GC never change what a read of the present returns (they move
//! values, drop versions no read can see, and drop expired ones, which a hit judges expired
//! too), so they touch no entry.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// Slots: keys hash to one of these many. A write of any key of a slot makes a concurrent read
/// of another key of it skip its fill, so there are many; 4,096 of 24 bytes or so.
const SLOTS: usize = 4096;

/// A slot's state, under its lock.
#[derive(Debug, Default)]
struct Slot {
    /// Moves on as each write of one of the slot's keys begins and ends.
    generation: u64,
    /// Writes of the slot's keys begun and not yet ended.
    writing: u32,
}

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
    slots: Box<[Mutex<Slot>]>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Fills left out because a write of the slot began during the read, or was in progress.
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
            slots: (0..SLOTS).map(|_| Mutex::new(Slot::default())).collect(),
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
        let generation = self.slots[slot].lock().generation;
        Ticket { slot, generation }
    }

    /// Puts in `row`, what a read of the present holding `ticket` found for `key` (or a
    /// write's own value, with the ticket [`RowCache::end_write`] returned), unless a write
    /// of `key`'s slot began since the ticket was taken or is in progress.
    pub fn fill(&self, key: &[u8], ticket: Ticket, row: Row) {
        let slot = self.slots[ticket.slot].lock();
        if slot.generation != ticket.generation || slot.writing > 0 {
            self.raced_fills.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Under the slot's lock: no write of the key can begin between the check and the
        // insert.
        self.cache.insert(Bytes::copy_from_slice(key), row);
    }

    /// Called for each key a write writes, before the write becomes visible: marks the key's
    /// slot written and removes the key's entry. Each call is matched by one
    /// [`RowCache::end_write`] once the write is visible.
    pub fn begin_write(&self, key: &[u8]) {
        let mut slot = self.slots[Self::slot(key)].lock();
        slot.generation += 1;
        slot.writing += 1;
        self.cache.remove(key);
    }

    /// Called for each key a write wrote, after the write became visible: ends the write
    /// [`RowCache::begin_write`] began. Returns the ticket of the slot's new generation, with
    /// which the write may put its own value in ([`RowCache::fill`]; option
    /// `prepopulate_row_cache`): a later write of the slot keeps that put out.
    pub fn end_write(&self, key: &[u8]) -> Ticket {
        let index = Self::slot(key);
        let mut slot = self.slots[index].lock();
        debug_assert!(slot.writing > 0, "end_write without begin_write");
        slot.generation += 1;
        slot.writing -= 1;
        Ticket {
            slot: index,
            generation: slot.generation,
        }
    }

    /// [`RowCache::begin_write`] for a write that may change many keys (a range deletion):
    /// every slot is marked written, then the cache is emptied (no fill can insert while
    /// every slot is).
    pub fn begin_write_all(&self) {
        for slot in self.slots.iter() {
            let mut slot = slot.lock();
            slot.generation += 1;
            slot.writing += 1;
        }
        self.cache.clear();
    }

    /// Ends what [`RowCache::begin_write_all`] began, after the write became visible.
    pub fn end_write_all(&self) {
        for slot in self.slots.iter() {
            let mut slot = slot.lock();
            debug_assert!(slot.writing > 0, "end_write_all without begin_write_all");
            slot.generation += 1;
            slot.writing -= 1;
        }
    }

    /// Drops `key`'s entry, found expired: no read will take it again, and it would hold its
    /// memory until evicted. (Should a write have just replaced it, the next read misses.)
    pub fn forget(&self, key: &[u8]) {
        self.cache.remove(key);
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

    /// A read that misses and fills at once, with no write in between.
    fn read(c: &RowCache, key: &[u8], found: Row) {
        let t = c.ticket(key);
        c.fill(key, t, found);
    }

    /// A write as the write queue brackets it: begun before it is visible, ended after.
    fn write(c: &RowCache, key: &[u8]) -> Ticket {
        c.begin_write(key);
        c.end_write(key)
    }

    #[test]
    fn a_fill_answers_until_the_key_is_written() {
        let c = RowCache::new(1 << 20);
        assert_eq!(c.get(b"k"), None);
        read(&c, b"k", row(b"v"));
        assert_eq!(c.get(b"k"), Some(row(b"v")));
        write(&c, b"k");
        assert_eq!(c.get(b"k"), None);
        assert_eq!((c.hits(), c.misses()), (1, 2));
    }

    #[test]
    fn a_write_during_the_read_keeps_its_fill_out() {
        let c = RowCache::new(1 << 20);
        let t = c.ticket(b"k");
        // The write begins and ends while the read runs, after its ticket.
        write(&c, b"k");
        c.fill(b"k", t, row(b"old"));
        assert_eq!(c.get(b"k"), None);
        assert_eq!(c.raced_fills(), 1);
        // A read that starts after the write fills.
        read(&c, b"k", row(b"new"));
        assert_eq!(c.get(b"k"), Some(row(b"new")));
    }

    #[test]
    fn while_a_write_is_in_progress_its_key_is_neither_answered_nor_filled() {
        let c = RowCache::new(1 << 20);
        read(&c, b"k", row(b"old"));
        let before = c.ticket(b"k");
        c.begin_write(b"k");
        // Between begin and end the write is being published: reads answer from the tables,
        // and whatever they found stays out, whenever their ticket was taken.
        assert_eq!(c.get(b"k"), None, "the old value went at begin");
        let during = c.ticket(b"k");
        c.fill(b"k", before, row(b"old"));
        c.fill(b"k", during, row(b"old or new"));
        assert_eq!(c.get(b"k"), None);
        let after = c.end_write(b"k");
        c.fill(b"k", during, row(b"old or new"));
        assert_eq!(c.get(b"k"), None, "a ticket taken during the write is stale");
        c.fill(b"k", after, row(b"new"));
        assert_eq!(c.get(b"k"), Some(row(b"new")));
        assert_eq!(c.raced_fills(), 3);
    }

    #[test]
    fn a_writes_put_behind_a_later_write_stays_out() {
        let c = RowCache::new(1 << 20);
        let first = write(&c, b"k");
        let second = write(&c, b"k");
        c.fill(b"k", second, row(b"newer"));
        c.fill(b"k", first, row(b"older"));
        assert_eq!(c.get(b"k"), Some(row(b"newer")));
        // One group writing the key twice: both begin, the group is published, both end. The
        // first put is left out (its ticket is stale at once); the last one's value stays.
        c.begin_write(b"k");
        c.begin_write(b"k");
        assert_eq!(c.get(b"k"), None);
        let earlier = c.end_write(b"k");
        let last = c.end_write(b"k");
        c.fill(b"k", last, row(b"last"));
        c.fill(b"k", earlier, row(b"earlier"));
        assert_eq!(c.get(b"k"), Some(row(b"last")));
    }

    #[test]
    fn a_range_deletion_empties_the_cache_and_stops_every_read_in_flight() {
        let c = RowCache::new(1 << 20);
        for k in [b"a", b"b"] {
            read(&c, k, row(b"v"));
        }
        let t = c.ticket(b"c");
        c.begin_write_all();
        assert_eq!(c.get(b"a"), None);
        assert_eq!(c.get(b"b"), None);
        let during = c.ticket(b"d");
        c.fill(b"d", during, row(b"v"));
        assert_eq!(c.get(b"d"), None, "no fill while the deletion is in progress");
        c.end_write_all();
        c.fill(b"c", t, row(b"v"));
        assert_eq!(c.get(b"c"), None);
        read(&c, b"c", row(b"v"));
        assert_eq!(c.get(b"c"), Some(row(b"v")));
    }

    #[test]
    fn entries_stay_within_the_budget() {
        let c = RowCache::new(64 << 10);
        for i in 0..1000u32 {
            let k = i.to_be_bytes();
            read(&c, &k, row(&[7; 1024]));
        }
        assert!(c.usage_bytes() <= 64 << 10, "{}", c.usage_bytes());
        assert!(c.usage_bytes() > 0);
    }
}
