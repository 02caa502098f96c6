//! The value cache: separated values of recent point reads, by byte budget (RocksDB's blob
//! cache), and with option `prepopulate_value_cache` every value a flush or a write separates
//! (a copy of the value alone, as it is written). A non-separating LSM keeps a hot key's value
//! in its block cache with the key's data block; a separated store reads it from a value table
//! every time unless it caches values too.
//! Under a skewed workload a small cache answers many reads: at Zipf 0.99 the hottest 1 % of
//! keys draw about 60 % of the reads.
//!
//! Entries are keyed by the value handle the index tree holds (file number, offset). File
//! numbers are never reused and records are immutable, so an entry stays true for as long as
//! any index entry names it, even after GC moved the record (the handle then resolves through
//! inheritance to the same key, sequence number and value). Each entry keeps the record's key
//! and sequence number, and a lookup that names another record misses, so a wrong handle is
//! still caught by the read from disk.
//!
//! It also remembers *places*: where a read found a record whose handle names a table GC
//! collected. Following table inheritance to such a record costs a dense-index search in each
//! table it may have moved to; a later read of the same handle that misses the value goes
//! straight to the place instead, while that table is live. Places get their own share of the
//! budget ([`PLACE_SHARE`]) rather than competing with values in one eviction order: a place
//! costs [`PLACE_ENTRY_BYTES`] against a value's kilobytes, and under a uniform workload over
//! more values than the cache holds a value entry is evicted before its key is read again, and
//! a place inserted beside it with it.
//!
//! A full cache that hardly answers is not worth filling: under uniform reads over ten times
//! more values than it holds, inserting the value of every miss (and evicting another for it)
//! was most of what the cache cost a read, for a hit rate of a few per cent. So the cache
//! watches its hit rate over windows of [`THRASH_WINDOW`] misses, and while it is full
//! (seven eighths of its value budget held) and answered fewer than one lookup in
//! [`THRASH_HIT_RATE`] over the last window, it is *thrashing*: a read's miss then inserts its
//! value only once in [`THRASH_ADMIT_ONE_IN`] misses. Under uniform reads that changes nothing
//! but the cost (any subset of the values hits as often); a value read again and again still
//! gets in after a few misses, and once hot values answer more reads the next window ends the
//! thrashing. Values put in as they are written (`prepopulate_value_cache`) are always taken.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::key::SeqNo;
use crate::value::ValueHandle;

/// Keys up to this many bytes are kept in the entry itself, so a hit compares the key without
/// following a pointer (another cache miss in a cache of many entries).
const INLINE_KEY: usize = 32;

/// A cached record's key, in the entry when it is short.
#[derive(Debug, Clone)]
enum CachedKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Arc<[u8]>),
}

impl CachedKey {
    fn new(key: &[u8]) -> Self {
        if key.len() > INLINE_KEY {
            return CachedKey::Heap(key.into());
        }
        let mut bytes = [0; INLINE_KEY];
        bytes[..key.len()].copy_from_slice(key);
        CachedKey::Inline {
            len: key.len() as u8,
            bytes,
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            CachedKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CachedKey::Heap(k) => k,
        }
    }
}

/// A cached record, held in the map's slot: a lookup clones it there (a short key's bytes, a
/// longer key's reference, and a reference to the value's buffer) rather than following a
/// pointer to a shared entry. The
/// value shares its buffer with the read that found it and with every reader it is handed to:
/// a hit copies no value.
#[derive(Debug, Clone)]
struct Entry {
    seq: SeqNo,
    key: CachedKey,
    value: Bytes,
}

/// Bytes an entry costs beyond its key and value, roughly (the entry in the map's slot, about
/// 80 bytes, the map's key, and the record header the value's buffer still holds; the buffer
/// holds the key too, so the key counts twice). A value put in as it was written has a buffer
/// of its own, without header and key: counted the same, a little above what it holds.
const ENTRY_OVERHEAD: u64 = 96;

#[derive(Debug, Clone, Copy)]
struct EntryWeighter;

impl Weighter<(u64, u64), Entry> for EntryWeighter {
    fn weight(&self, _key: &(u64, u64), e: &Entry) -> u64 {
        2 * e.key.as_slice().len() as u64 + e.value.len() as u64 + ENTRY_OVERHEAD
    }
}

/// Assumed average entry size, only used to size the cache's initial tables.
const TYPICAL_ENTRY_SIZE: u64 = 8 << 10;

/// Share of the cache's budget that holds places.
pub const PLACE_SHARE: f64 = 0.125;

/// Bytes a place is counted as: the handle it is under, the record's sequence number, the
/// place, and the map's slot.
pub const PLACE_ENTRY_BYTES: u64 = 96;

/// Misses between two checks of whether the cache is thrashing: 4,096.
pub const THRASH_WINDOW: u64 = 4096;

/// A full cache answering fewer than one lookup in this many over a window is thrashing: 16.
pub const THRASH_HIT_RATE: u64 = 16;

/// While the cache is thrashing, one read miss in this many inserts its value: 8.
pub const THRASH_ADMIT_ONE_IN: u64 = 8;

/// A 64-bit mixing function (splitmix64's finalizer): every input bit moves every output bit.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Values of separated records by the handle that names them, within a byte budget.
pub struct ValueCache {
    cache: Cache<(u64, u64), Entry, EntryWeighter>,
    /// Where records moved, by the stale handle naming them: the record's sequence number and
    /// its place.
    places: Cache<(u64, u64), (SeqNo, ValueHandle)>,
    capacity: u64,
    /// The share of `capacity` that holds values.
    value_capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Read misses whose value was not inserted because the cache was thrashing.
    skipped_inserts: AtomicU64,
    place_hits: AtomicU64,
    /// `hits` when the last window ended.
    window_hits: AtomicU64,
    /// Whether the last window found the cache full and hardly answering.
    thrashing: AtomicBool,
}

impl std::fmt::Debug for ValueCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.cache.weight())
            .finish()
    }
}

impl ValueCache {
    /// A cache of up to `capacity_bytes` (keys, values and a small per-entry overhead, and
    /// [`PLACE_SHARE`] of it places); at least one byte.
    pub fn new(capacity_bytes: u64) -> Self {
        let capacity = capacity_bytes.max(1);
        let place_bytes = (capacity as f64 * PLACE_SHARE) as u64;
        let value_bytes = (capacity - place_bytes).max(1);
        let items = (value_bytes / TYPICAL_ENTRY_SIZE).clamp(16, 1 << 20) as usize;
        let places = (place_bytes / PLACE_ENTRY_BYTES).max(1) as usize;
        ValueCache {
            cache: Cache::with_weighter(items, value_bytes, EntryWeighter),
            places: Cache::new(places),
            capacity,
            value_capacity: value_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            skipped_inserts: AtomicU64::new(0),
            place_hits: AtomicU64::new(0),
            window_hits: AtomicU64::new(0),
            thrashing: AtomicBool::new(false),
        }
    }

    /// The value of the record `(key, seq)` that `handle` names, if cached. An entry under the
    /// handle for another record is a miss (the caller's read from disk then reports the
    /// mismatch as corruption).
    pub fn get(&self, handle: &ValueHandle, key: &[u8], seq: SeqNo) -> Option<Bytes> {
        let found = self
            .cache
            .get(&(handle.file_number, handle.offset))
            .filter(|e| e.seq == seq && e.key.as_slice() == key);
        match found {
            Some(e) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(e.value)
            }
            None => {
                let misses = self.misses.fetch_add(1, Ordering::Relaxed) + 1;
                if misses.is_multiple_of(THRASH_WINDOW) {
                    self.end_window();
                }
                None
            }
        }
    }

    /// Ends a window of [`THRASH_WINDOW`] misses: the cache is thrashing from now on if it is
    /// full and the window's hits were fewer than one lookup in [`THRASH_HIT_RATE`].
    fn end_window(&self) {
        let hits = self.hits.load(Ordering::Relaxed);
        let window_hits = hits.saturating_sub(self.window_hits.swap(hits, Ordering::Relaxed));
        let full = self.cache.weight() >= self.value_capacity - self.value_capacity / 8;
        let rare = window_hits.saturating_mul(THRASH_HIT_RATE) < THRASH_WINDOW + window_hits;
        self.thrashing.store(full && rare, Ordering::Relaxed);
    }

    /// Whether the cache is thrashing (the module's doc): full, and the last window of misses
    /// found it answering fewer than one lookup in [`THRASH_HIT_RATE`].
    pub fn thrashing(&self) -> bool {
        self.thrashing.load(Ordering::Relaxed)
    }

    /// Caches the value a read found after [`get`](Self::get) missed, as
    /// [`insert`](Self::insert) does, unless the cache is thrashing: then only one such value
    /// in [`THRASH_ADMIT_ONE_IN`] is inserted. Which ones is decided by a hash of the handle
    /// and the count of misses so far, so each miss of a value is as likely to insert it,
    /// whatever its key and whatever order the reads come in (a decision by the count alone
    /// would, under reads that cycle through a fixed set, skip the same keys every time).
    /// `value` is shared (a reference count) only when it is inserted.
    pub fn insert_read(&self, handle: &ValueHandle, key: &[u8], seq: SeqNo, value: &Bytes) {
        if self.thrashing() && !self.admits_while_thrashing(handle) {
            self.skipped_inserts.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.insert(handle, key, seq, value.clone());
    }

    /// Caches `value` as the value of the record `(key, seq)` that `handle` names (a value
    /// larger than a shard of the cache is not kept). The entry shares `value`'s buffer, which
    /// must be the record's own (as a value read by
    /// [`ValueTable::read_record`](crate::value::ValueTable::read_record) is): a view of a larger
    /// buffer would keep all of it alive while the cache counts only the value.
    pub fn insert(&self, handle: &ValueHandle, key: &[u8], seq: SeqNo, value: Bytes) {
        let entry = Entry {
            seq,
            key: CachedKey::new(key),
            value,
        };
        self.cache.insert((handle.file_number, handle.offset), entry);
    }

    /// Where a read last found the record written at `seq` that `handle` names, when that was
    /// not at the handle (GC had moved it), if remembered. A place is a hint: the caller uses it
    /// only while its table is live and checks that the record read there is the one named.
    pub fn place(&self, handle: &ValueHandle, seq: SeqNo) -> Option<ValueHandle> {
        let (s, place) = self.places.get(&(handle.file_number, handle.offset))?;
        (s == seq).then(|| {
            self.place_hits.fetch_add(1, Ordering::Relaxed);
            place
        })
    }

    /// Remembers that the record written at `seq` that `handle` names is at `place`.
    pub fn insert_place(&self, handle: &ValueHandle, seq: SeqNo, place: ValueHandle) {
        debug_assert_ne!(handle.file_number, place.file_number, "a place is elsewhere");
        self.places
            .insert((handle.file_number, handle.offset), (seq, place));
    }

    /// Place lookups that found a remembered place.
    pub fn place_hits(&self) -> u64 {
        self.place_hits.load(Ordering::Relaxed)
    }

    /// Lookups that found their value.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that missed.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Whether a read miss of `handle` is the one in [`THRASH_ADMIT_ONE_IN`] that inserts
    /// while the cache thrashes.
    fn admits_while_thrashing(&self, handle: &ValueHandle) -> bool {
        let at = mix(handle.file_number.rotate_left(32) ^ handle.offset);
        mix(self.misses.load(Ordering::Relaxed).wrapping_add(at)).is_multiple_of(THRASH_ADMIT_ONE_IN)
    }

    /// Values of read misses not inserted because the cache was thrashing.
    pub fn skipped_inserts(&self) -> u64 {
        self.skipped_inserts.load(Ordering::Relaxed)
    }

    /// Bytes held now (places counted at [`PLACE_ENTRY_BYTES`] each).
    pub fn usage_bytes(&self) -> u64 {
        self.cache.weight() + self.places.len() as u64 * PLACE_ENTRY_BYTES
    }

    /// Most bytes held.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(file_number: u64, offset: u64) -> ValueHandle {
        ValueHandle {
            file_number,
            offset,
            len: 100,
        }
    }

    #[test]
    fn a_hit_needs_the_same_handle_key_and_sequence() {
        let c = ValueCache::new(1 << 20);
        c.insert(&handle(7, 100), b"k", 5, Bytes::from_static(b"value"));
        assert_eq!(c.get(&handle(7, 100), b"k", 5).as_deref(), Some(&b"value"[..]));
        assert_eq!(c.get(&handle(7, 100), b"k", 6), None, "another version");
        assert_eq!(c.get(&handle(7, 100), b"j", 5), None, "another key");
        assert_eq!(c.get(&handle(8, 100), b"k", 5), None, "another table");
        assert_eq!(c.get(&handle(7, 101), b"k", 5), None, "another offset");
        assert_eq!((c.hits(), c.misses()), (1, 4));
    }

    /// Keys kept in the entry and keys kept apart answer alike, at and around the boundary.
    #[test]
    fn short_and_long_keys_are_compared_whole() {
        let c = ValueCache::new(1 << 20);
        for len in [0, 1, INLINE_KEY - 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let key = vec![b'k'; len];
            let h = handle(9, len as u64);
            c.insert(&h, &key, 3, Bytes::from(vec![len as u8; 10]));
            assert_eq!(c.get(&h, &key, 3).as_deref(), Some(&[len as u8; 10][..]), "{len}");
            let mut other = key.clone();
            other.push(b'k');
            assert_eq!(c.get(&h, &other, 3), None, "a longer key, {len}");
            if let Some(last) = other.get_mut(len.saturating_sub(1)) {
                *last = b'j';
            }
            other.truncate(len);
            if len > 0 {
                assert_eq!(c.get(&h, &other, 3), None, "a different last byte, {len}");
            }
        }
    }

    #[test]
    fn the_budget_bounds_the_bytes_held() {
        let c = ValueCache::new(64 << 10);
        for i in 0..100u64 {
            c.insert(&handle(1, i * 1000), &i.to_be_bytes(), i, Bytes::from(vec![0u8; 4000]));
        }
        assert!(c.usage_bytes() <= 64 << 10, "{}", c.usage_bytes());
        let kept = (0..100u64)
            .filter(|&i| c.get(&handle(1, i * 1000), &i.to_be_bytes(), i).is_some())
            .count();
        assert!(kept > 0 && kept < 100, "{kept}");
    }

    /// Reads one value per handle named, each missing and then inserting as a read does.
    fn read_through(c: &ValueCache, handles: impl IntoIterator<Item = u64>) {
        for i in handles {
            let h = handle(1, i);
            if c.get(&h, &i.to_be_bytes(), i).is_none() {
                c.insert_read(&h, &i.to_be_bytes(), i, &Bytes::from(vec![0u8; 1000]));
            }
        }
    }

    /// Until a window ends the cache takes every value; once a window found it full and
    /// hardly answering, about one miss in eight inserts, and the rest are counted.
    #[test]
    fn a_full_cache_that_hardly_answers_takes_one_miss_in_eight() {
        let c = ValueCache::new(1 << 20);
        read_through(&c, 0..THRASH_WINDOW - 1);
        assert!(!c.thrashing());
        assert_eq!(c.skipped_inserts(), 0, "every value taken before the window ends");
        read_through(&c, THRASH_WINDOW - 1..3 * THRASH_WINDOW);
        assert!(c.thrashing());
        assert_eq!(c.hits(), 0);
        // Misses THRASH_WINDOW + 1 ..= 3 * THRASH_WINDOW came while thrashing: about an
        // eighth of them inserted (a binomial's standard deviation here is 30).
        let thrashing_misses = 2 * THRASH_WINDOW;
        let inserted = thrashing_misses - c.skipped_inserts();
        let expected = thrashing_misses / THRASH_ADMIT_ONE_IN;
        assert!(
            inserted.abs_diff(expected) < 150,
            "{inserted} inserted of {thrashing_misses}, expected about {expected}"
        );
        assert!(c.usage_bytes() <= 1 << 20);
    }

    /// The same misses into a cache with room for all of them insert every value.
    #[test]
    fn a_cache_with_room_takes_every_value() {
        let c = ValueCache::new(64 << 20);
        read_through(&c, 0..3 * THRASH_WINDOW);
        assert!(!c.thrashing());
        assert_eq!(c.skipped_inserts(), 0);
        let kept = (0..3 * THRASH_WINDOW)
            .filter(|&i| c.get(&handle(1, i), &i.to_be_bytes(), i).is_some())
            .count() as u64;
        assert_eq!(kept, 3 * THRASH_WINDOW);
    }

    /// Values read again and again get in while the cache thrashes, their hits end the
    /// thrashing at the next window, and from then on they are answered from the cache.
    #[test]
    fn values_read_again_and_again_get_in_and_end_the_thrashing() {
        let c = ValueCache::new(1 << 20);
        read_through(&c, 1_000_000..1_000_000 + 2 * THRASH_WINDOW);
        assert!(c.thrashing());
        let hot = 0..64u64;
        let mut cold = 2_000_000u64..;
        let mut last_round_hits = 0;
        for round in 0..200 {
            let hits_before = c.hits();
            for i in hot.clone() {
                read_through(&c, [i]);
                read_through(&c, cold.by_ref().take(1));
            }
            if round == 199 {
                last_round_hits = c.hits() - hits_before;
            }
        }
        assert!(!c.thrashing(), "half the reads hit");
        assert_eq!(last_round_hits, 64, "every hot value answered from the cache");
    }

    /// Values put in as they are written are taken while the cache thrashes.
    #[test]
    fn values_put_in_as_written_are_taken_while_thrashing() {
        let c = ValueCache::new(1 << 20);
        read_through(&c, 0..2 * THRASH_WINDOW);
        assert!(c.thrashing());
        let skipped = c.skipped_inserts();
        for i in 0..16u64 {
            let h = handle(2, i);
            c.insert(&h, b"w", i, Bytes::from_static(b"written"));
            assert_eq!(c.get(&h, b"w", i).as_deref(), Some(&b"written"[..]));
        }
        assert_eq!(c.skipped_inserts(), skipped);
    }

    #[test]
    fn a_place_needs_the_same_handle_and_sequence() {
        let c = ValueCache::new(1 << 20);
        let to = handle(9, 4000);
        assert_eq!(c.place(&handle(7, 100), 5), None);
        c.insert_place(&handle(7, 100), 5, to);
        assert_eq!(c.get(&handle(7, 100), b"k", 5), None, "a place is not a value");
        assert_eq!(c.place(&handle(7, 100), 5), Some(to));
        assert_eq!(c.place(&handle(7, 100), 6), None, "another version");
        assert_eq!(c.place(&handle(7, 101), 5), None, "another offset");
        assert_eq!(c.place(&handle(8, 100), 5), None, "another table");
        assert_eq!(c.place_hits(), 1);
    }

    #[test]
    fn places_have_their_own_share_of_the_budget() {
        let c = ValueCache::new(64 << 10);
        for i in 0..10_000u64 {
            c.insert_place(&handle(1, i), i, handle(2, i));
        }
        for i in 0..100u64 {
            c.insert(&handle(3, i * 1000), &i.to_be_bytes(), i, Bytes::from(vec![0u8; 4000]));
        }
        assert!(c.usage_bytes() <= 64 << 10, "{}", c.usage_bytes());
        let places = (0..10_000u64)
            .filter(|&i| c.place(&handle(1, i), i).is_some())
            .count() as u64;
        let share = (64 << 10) as f64 * PLACE_SHARE / PLACE_ENTRY_BYTES as f64;
        // The map rounds its capacity per shard, so allow it a little over.
        assert!(places > 0 && places as f64 <= share * 1.1, "{places} of {share}");
        let values = (0..100u64)
            .filter(|&i| c.get(&handle(3, i * 1000), &i.to_be_bytes(), i).is_some())
            .count();
        assert!(values > 0, "the places did not push every value out");
    }
}
