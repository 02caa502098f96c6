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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Values of separated records by the handle that names them, within a byte budget.
pub struct ValueCache {
    cache: Cache<(u64, u64), Entry, EntryWeighter>,
    /// Where records moved, by the stale handle naming them: the record's sequence number and
    /// its place.
    places: Cache<(u64, u64), (SeqNo, ValueHandle)>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    place_hits: AtomicU64,
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
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            place_hits: AtomicU64::new(0),
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
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found.map(|e| e.value)
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
