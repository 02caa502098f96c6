//! The DropCache: a sharded, byte-bounded LRU of recently overwritten or deleted user keys, each
//! with the newest sequence number known for it.
//!
//! Compaction calls [`DropCache::insert`]`(k, S)` for every drop event (a version of `k` shadowed
//! by a newer version with sequence number `S`, or a dropped tombstone). Keys that keep getting
//! overwritten stay near the MRU end; keys written once age out. Flush and GC call
//! [`DropCache::is_hot`] to choose a hot or a cold value table, and GC calls
//! [`DropCache::newest_seq`]: a cached `S` greater than a record's sequence number proves the
//! record is shadowed (the caller still checks snapshots), without touching the index tree.
//!
//! # Layout
//!
//! The cache is split into up to [`MAX_SHARDS`] shards by key hash, each behind its own
//! `parking_lot::Mutex`, so flush, compaction and GC threads rarely contend. A shard is
//!
//! - a slab `Vec<Entry>` whose entries are linked into an intrusive doubly linked LRU list by
//!   `u32` slot indices (free slots are chained through the same `next` field), and
//! - an open-addressing hash index (`Vec<u32>` of slot indices, linear probing, load ≤ 1/2,
//!   backward-shift deletion, so no tombstones accumulate), keyed by the entry's 64-bit hash and
//!   confirmed by comparing the key bytes, so hash collisions never produce a false hit.
//!
//! Insert, lookup and eviction are O(1) (expected). Each key is stored once, in its own
//! exact-length `Box<[u8]>`.
//!
//! # Memory accounting
//!
//! Every entry is charged [`entry_charge`]`(key.len())` bytes against its shard's budget:
//! `size_of::<Entry>()` (40 bytes on 64-bit targets: key pointer and length, hash, seq, two links),
//! plus 16 bytes of hash index (the index keeps at most 2 entries per 4 buckets of 4 bytes; right
//! after it doubles there are 4 buckets per entry, the worst case, which is what we charge), plus
//! the key's heap allocation estimated as glibc malloc does it (8-byte header, 16-byte granularity,
//! 32-byte minimum chunk). A 24-byte key costs 40 + 16 + 32 = 88 bytes, so the default 16 MiB
//! holds about 190 000 keys. Not charged: the fixed per-shard headers, and slack in the slab's
//! `Vec` capacity, which grows at most to the shard's maximum possible entry count. After every
//! insert the sum of the charges in each shard is at most that shard's budget; the shard budgets
//! sum to the capacity.

use std::fmt;
use std::mem::size_of;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Default capacity of the DropCache in bytes: option `drop_cache_bytes`'s default
/// ([`crate::options::DEFAULT_DROP_CACHE_BYTES`]).
pub const DEFAULT_DROP_CACHE_BYTES: usize = crate::options::DEFAULT_DROP_CACHE_BYTES as usize;

/// Most shards a cache is split into: enough to keep lock contention negligible with the engine's
/// few background threads.
pub const MAX_SHARDS: usize = 16;

/// Smallest budget a shard is given before we use fewer shards: a shard must hold a few keys of
/// the maximum size (64 KiB) and many typical keys, or its LRU order means little.
const MIN_SHARD_BYTES: usize = 256 << 10;

/// "No slot": the end of the LRU list or of the free list, and an empty index bucket.
const NIL: u32 = u32::MAX;

/// Bytes of hash index charged per entry: 4 buckets of 4 bytes, the most the index holds per
/// entry right after it doubles (it doubles when it would become more than half full).
const INDEX_BYTES_PER_ENTRY: usize = 4 * size_of::<u32>();

/// Smallest non-empty hash index, in buckets.
const MIN_BUCKETS: usize = 16;

/// The number of bytes one cached key of `key_len` bytes is charged against the cache's capacity:
/// the slab entry, its share of the hash index and an estimate of the key's heap allocation (see
/// the module documentation). A 24-byte key is charged 88 bytes.
pub fn entry_charge(key_len: usize) -> usize {
    size_of::<Entry>() + INDEX_BYTES_PER_ENTRY + key_alloc_bytes(key_len)
}

/// Estimated heap bytes behind a `Box<[u8]>` of `len` bytes, modelled on glibc malloc: an 8-byte
/// chunk header, 16-byte granularity, 32-byte minimum chunk. Saturates instead of overflowing so
/// an absurd length is simply too large to cache.
fn key_alloc_bytes(len: usize) -> usize {
    (len.saturating_add(8 + 15) & !15).max(32)
}

/// The hash that picks a key's shard and index bucket: FxHash's word-at-a-time multiply-rotate
/// (fast for the short keys we expect), seeded with the length so zero-padded tails do not
/// collide, then MurmurHash3's 64-bit finalizer because FxHash alone leaves the low bits (our
/// bucket index) and high bits (our shard) poorly mixed.
pub(crate) fn hash_key(key: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    fmix64(h)
}

/// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// A snapshot of a [`DropCache`]'s size and activity. Shards are read one after another, so the
/// fields are not one atomic snapshot while other threads use the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCacheStats {
    /// Keys cached now.
    pub entries: u64,
    /// Bytes charged for those keys (see [`entry_charge`]); never more than `capacity_bytes`.
    pub used_bytes: u64,
    /// The configured capacity in bytes (0: the cache is disabled).
    pub capacity_bytes: u64,
    /// Keys added to the cache.
    pub inserts: u64,
    /// Inserts of a key already cached (its sequence number raised, its recency refreshed).
    pub updates: u64,
    /// Keys evicted from the LRU end to make room.
    pub evictions: u64,
    /// Inserts ignored because one key's charge exceeds its shard's budget.
    pub rejected: u64,
    /// `newest_seq`/`is_hot` calls that found the key.
    pub hits: u64,
    /// `newest_seq`/`is_hot` calls that did not find the key (not counted while disabled).
    pub misses: u64,
}

/// A sharded, byte-bounded LRU of recently overwritten or deleted user keys with the newest
/// sequence number known for each (see the module documentation). `Send + Sync`: share it behind
/// an `Arc`.
pub struct DropCache {
    shards: Box<[Mutex<Shard>]>,
    capacity: usize,
    /// Tests substitute a deliberately bad hash to force collisions.
    #[cfg(test)]
    hash_fn: fn(&[u8]) -> u64,
}

impl DropCache {
    /// A cache charging at most `capacity_bytes` bytes (see [`entry_charge`]), split into up to
    /// [`MAX_SHARDS`] shards of at least 256 KiB each (one shard below 512 KiB). Capacity 0
    /// disables the cache: lookups miss without counting and inserts do nothing. The options layer
    /// validates the value; any capacity is accepted here.
    pub fn new(capacity_bytes: usize) -> Self {
        let shards = (capacity_bytes / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS);
        // Largest power of two not above `shards`, so the shard is a mask of hash bits.
        let shards = 1usize << shards.ilog2();
        Self::build(capacity_bytes, shards, hash_key)
    }

    /// A cache with exactly `shards` shards (a power of two, at most [`MAX_SHARDS`]) and the given
    /// hash function, for tests that need several shards with a small capacity or colliding
    /// hashes.
    #[cfg(test)]
    pub(super) fn with_shards_and_hash(
        capacity_bytes: usize,
        shards: usize,
        hash_fn: fn(&[u8]) -> u64,
    ) -> Self {
        assert!(shards.is_power_of_two() && shards <= MAX_SHARDS);
        Self::build(capacity_bytes, shards, hash_fn)
    }

    #[cfg_attr(not(test), allow(unused_variables))]
    fn build(capacity: usize, shards: usize, hash_fn: fn(&[u8]) -> u64) -> Self {
        let shards = if capacity == 0 {
            Vec::new()
        } else {
            // Spread the remainder so the budgets sum to exactly the capacity.
            (0..shards)
                .map(|i| {
                    let budget = capacity / shards + usize::from(i < capacity % shards);
                    Mutex::new(Shard::new(budget))
                })
                .collect()
        };
        DropCache {
            shards: shards.into_boxed_slice(),
            capacity,
            #[cfg(test)]
            hash_fn,
        }
    }

    /// The configured capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the cache is enabled (capacity > 0).
    pub fn is_enabled(&self) -> bool {
        !self.shards.is_empty()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        #[cfg(test)]
        {
            (self.hash_fn)(key)
        }
        #[cfg(not(test))]
        {
            hash_key(key)
        }
    }

    /// The shard holding keys with hash `hash`. Bits 48 and up pick the shard; the index uses the
    /// low bits, so the two choices are independent.
    fn shard(&self, hash: u64) -> Option<&Mutex<Shard>> {
        if self.shards.is_empty() {
            return None;
        }
        Some(&self.shards[(hash >> 48) as usize & (self.shards.len() - 1)])
    }

    /// Records that a version of `key` was dropped because a version with sequence number `seq`
    /// (or a tombstone with it) exists. A cached key keeps the larger of its old and the new
    /// sequence number and becomes the most recently used; a new key is added at the MRU end,
    /// evicting least recently used keys of its shard until the shard fits its budget. A key
    /// whose charge exceeds its shard's whole budget is not cached. No-op when disabled.
    pub fn insert(&self, key: &[u8], seq: u64) {
        let hash = self.hash(key);
        if let Some(shard) = self.shard(hash) {
            shard.lock().insert(hash, key, seq);
        }
    }

    /// The newest sequence number known for `key`, or `None` if it is not cached. Counts a hit or
    /// a miss; a hit makes the key the most recently used (a lookup refreshes its hotness).
    pub fn newest_seq(&self, key: &[u8]) -> Option<u64> {
        let hash = self.hash(key);
        self.shard(hash)?.lock().lookup(hash, key, true)
    }

    /// Whether `key` is hot, i.e. cached. Counts a hit or a miss; a hit makes the key the most
    /// recently used.
    pub fn is_hot(&self, key: &[u8]) -> bool {
        self.newest_seq(key).is_some()
    }

    /// Like [`DropCache::newest_seq`], but neither counts nor changes the LRU order: for tests and
    /// diagnostics.
    pub fn peek(&self, key: &[u8]) -> Option<u64> {
        let hash = self.hash(key);
        self.shard(hash)?.lock().lookup(hash, key, false)
    }

    /// The cache's size and counters, summed over the shards.
    pub fn stats(&self) -> DropCacheStats {
        let mut stats = DropCacheStats {
            capacity_bytes: self.capacity as u64,
            ..DropCacheStats::default()
        };
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let c = &shard.counters;
            stats.entries += shard.len as u64;
            stats.used_bytes += shard.used as u64;
            stats.inserts += c.inserts;
            stats.updates += c.updates;
            stats.evictions += c.evictions;
            stats.rejected += c.rejected;
            stats.hits += c.hits;
            stats.misses += c.misses;
        }
        stats
    }

    /// The keys of shard `shard` with their sequence numbers, most recently used first.
    #[cfg(test)]
    pub(super) fn shard_order(&self, shard: usize) -> Vec<(Vec<u8>, u64)> {
        let shard = self.shards[shard].lock();
        let mut out = Vec::with_capacity(shard.len);
        let mut s = shard.head;
        while s != NIL {
            let e = &shard.entries[s as usize];
            out.push((e.key.to_vec(), e.seq));
            s = e.next;
        }
        out
    }

    /// The number of shards (0 when disabled).
    #[cfg(test)]
    pub(super) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The byte budget of shard `shard`.
    #[cfg(test)]
    pub(super) fn shard_budget(&self, shard: usize) -> usize {
        self.shards[shard].lock().budget
    }

    /// Walks every shard's LRU list, free list and hash index and panics on any inconsistency.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let mut budgets = 0;
        for (i, shard) in self.shards.iter().enumerate() {
            let shard = shard.lock();
            budgets += shard.budget;
            shard.check_invariants();
            let mut s = shard.head;
            while s != NIL {
                let e = &shard.entries[s as usize];
                assert_eq!(e.hash, self.hash(&e.key), "stored hash is the key's hash");
                assert_eq!(
                    (e.hash >> 48) as usize & (self.shards.len() - 1),
                    i,
                    "key in the shard its hash picks"
                );
                s = e.next;
            }
        }
        assert_eq!(budgets, self.capacity, "shard budgets sum to the capacity");
    }
}

impl Default for DropCache {
    /// A cache of [`DEFAULT_DROP_CACHE_BYTES`].
    fn default() -> Self {
        DropCache::new(DEFAULT_DROP_CACHE_BYTES)
    }
}

impl fmt::Debug for DropCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DropCache")
            .field("shards", &self.shards.len())
            .field("stats", &self.stats())
            .finish()
    }
}

/// One cached key. Free slab slots keep an empty key (no allocation) and chain through `next`.
struct Entry {
    key: Box<[u8]>,
    /// The key's hash, kept so the index can be probed, grown and repaired after a removal
    /// without rehashing keys.
    hash: u64,
    /// Newest sequence number known for the key.
    seq: u64,
    /// Toward the MRU end (`NIL` at the head).
    prev: u32,
    /// Toward the LRU end (`NIL` at the tail); the next free slot for a free slot.
    next: u32,
}

/// Counters kept under the shard lock, which every counted operation holds anyway.
#[derive(Default)]
struct Counters {
    inserts: u64,
    updates: u64,
    evictions: u64,
    rejected: u64,
    hits: u64,
    misses: u64,
}

/// One shard: a slab of entries, an intrusive LRU list through it and an open-addressing index.
struct Shard {
    entries: Vec<Entry>,
    /// Slot indices by `hash & (len - 1)`, linear probing, `NIL` = empty; length 0 or a power of
    /// two, never more than half full.
    buckets: Vec<u32>,
    /// Most recently used entry.
    head: u32,
    /// Least recently used entry, the next to be evicted.
    tail: u32,
    /// First free slab slot.
    free: u32,
    /// Live entries.
    len: usize,
    /// Sum of `entry_charge` over live entries.
    used: usize,
    budget: usize,
    /// Most live entries the budget can pay for (and that `u32` slots can name): caps the slab's
    /// growth so its capacity slack stays bounded.
    max_entries: usize,
    counters: Counters,
}

impl Shard {
    fn new(budget: usize) -> Self {
        let max_entries = (budget / entry_charge(0)).min(NIL as usize - 1);
        Shard {
            entries: Vec::new(),
            buckets: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
            len: 0,
            used: 0,
            budget,
            max_entries,
            counters: Counters::default(),
        }
    }

    /// The slot of `key`, if cached.
    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.buckets.len() - 1;
        let mut i = hash as usize & mask;
        // Terminates: the index is never more than half full, so an empty bucket is reached.
        loop {
            let s = self.buckets[i];
            if s == NIL {
                return None;
            }
            let e = &self.entries[s as usize];
            if e.hash == hash && *e.key == *key {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    fn lookup(&mut self, hash: u64, key: &[u8], promote: bool) -> Option<u64> {
        let found = self.find(hash, key);
        if promote {
            match found {
                Some(s) => {
                    self.counters.hits += 1;
                    self.move_to_front(s);
                }
                None => self.counters.misses += 1,
            }
        }
        found.map(|s| self.entries[s as usize].seq)
    }

    fn insert(&mut self, hash: u64, key: &[u8], seq: u64) {
        if let Some(s) = self.find(hash, key) {
            let e = &mut self.entries[s as usize];
            e.seq = e.seq.max(seq);
            self.counters.updates += 1;
            self.move_to_front(s);
            return;
        }
        let charge = entry_charge(key.len());
        if charge > self.budget {
            self.counters.rejected += 1;
            return;
        }
        // Evict before adding, so the budget holds at every moment. The loop ends: once the shard
        // is empty, `used` is 0 and `charge <= budget`, and `max_entries >= 1`.
        while self.used.saturating_add(charge) > self.budget || self.len >= self.max_entries {
            self.evict_lru();
        }
        self.grow_index_if_needed();
        let s = self.alloc_slot(Entry {
            key: key.into(),
            hash,
            seq,
            prev: NIL,
            next: NIL,
        });
        self.index_insert(hash, s);
        self.push_front(s);
        self.len += 1;
        self.used += charge;
        self.counters.inserts += 1;
    }

    fn evict_lru(&mut self) {
        let s = self.tail;
        debug_assert_ne!(s, NIL, "evicting from an empty shard");
        self.unlink(s);
        let hash = self.entries[s as usize].hash;
        self.index_remove(hash, s);
        let e = &mut self.entries[s as usize];
        self.used -= entry_charge(e.key.len());
        // Free the key's heap memory now; an empty boxed slice allocates nothing.
        e.key = Box::default();
        e.next = self.free;
        self.free = s;
        self.len -= 1;
        self.counters.evictions += 1;
    }

    fn alloc_slot(&mut self, entry: Entry) -> u32 {
        if self.free != NIL {
            let s = self.free;
            self.free = self.entries[s as usize].next;
            self.entries[s as usize] = entry;
            return s;
        }
        if self.entries.len() == self.entries.capacity() {
            // Double, but never past the most entries the budget can pay for, so the slack the
            // byte accounting does not see stays bounded. With no free slot every slot is live,
            // and `insert` evicted until fewer than `max_entries` are, so `room >= 1`.
            let room = self.max_entries - self.entries.len();
            self.entries
                .reserve_exact(self.entries.len().max(4).min(room));
        }
        self.entries.push(entry);
        (self.entries.len() - 1) as u32
    }

    /// Doubles the index if one more entry would make it more than half full, keeping probe
    /// sequences short for misses (the common case for cold keys).
    fn grow_index_if_needed(&mut self) {
        if (self.len + 1) * 2 <= self.buckets.len() {
            return;
        }
        let new_len = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let old = std::mem::replace(&mut self.buckets, vec![NIL; new_len]);
        for s in old.into_iter().filter(|&s| s != NIL) {
            let hash = self.entries[s as usize].hash;
            self.index_insert(hash, s);
        }
    }

    fn index_insert(&mut self, hash: u64, s: u32) {
        let mask = self.buckets.len() - 1;
        let mut i = hash as usize & mask;
        while self.buckets[i] != NIL {
            i = (i + 1) & mask;
        }
        self.buckets[i] = s;
    }

    /// Removes slot `s` from the index by backward-shift deletion: later entries of the same probe
    /// run move back into the hole, so lookups never need tombstones.
    fn index_remove(&mut self, hash: u64, s: u32) {
        let mask = self.buckets.len() - 1;
        let mut hole = hash as usize & mask;
        while self.buckets[hole] != s {
            debug_assert_ne!(self.buckets[hole], NIL, "slot missing from the index");
            hole = (hole + 1) & mask;
        }
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let t = self.buckets[j];
            if t == NIL {
                break;
            }
            let home = self.entries[t as usize].hash as usize & mask;
            // The entry at j may fill the hole unless its home lies cyclically in (hole, j]:
            // then moving it before its home would hide it from lookups.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = t;
                hole = j;
            }
        }
        self.buckets[hole] = NIL;
    }

    fn unlink(&mut self, s: u32) {
        let (prev, next) = {
            let e = &self.entries[s as usize];
            (e.prev, e.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, s: u32) {
        let old_head = self.head;
        {
            let e = &mut self.entries[s as usize];
            e.prev = NIL;
            e.next = old_head;
        }
        if old_head == NIL {
            self.tail = s;
        } else {
            self.entries[old_head as usize].prev = s;
        }
        self.head = s;
    }

    fn move_to_front(&mut self, s: u32) {
        if self.head != s {
            self.unlink(s);
            self.push_front(s);
        }
    }

    /// Panics unless the LRU list, the free list, the index and the byte accounting agree.
    #[cfg(test)]
    fn check_invariants(&self) {
        let slots = self.entries.len();
        let mut live = vec![false; slots];

        // LRU list: doubly linked, head to tail, no cycles.
        let mut count = 0;
        let mut used = 0;
        let mut prev = NIL;
        let mut s = self.head;
        while s != NIL {
            assert!((s as usize) < slots, "list slot out of range");
            assert!(!live[s as usize], "cycle in the LRU list");
            live[s as usize] = true;
            let e = &self.entries[s as usize];
            assert_eq!(e.prev, prev, "prev link");
            used += entry_charge(e.key.len());
            assert_eq!(
                self.find(e.hash, &e.key),
                Some(s),
                "listed key found by index"
            );
            count += 1;
            prev = s;
            s = e.next;
        }
        assert_eq!(self.tail, prev, "tail is the last listed entry");
        assert_eq!(count, self.len, "len counts the listed entries");
        assert_eq!(used, self.used, "used is the sum of the charges");
        assert!(self.used <= self.budget, "shard over budget");
        assert!(
            self.len <= self.max_entries,
            "more entries than max_entries"
        );

        // Free list: every slab slot is either listed or free, exactly once.
        let mut free = 0;
        let mut s = self.free;
        while s != NIL {
            assert!(
                !live[s as usize],
                "slot both live and free (or a free-list cycle)"
            );
            live[s as usize] = true;
            assert!(
                self.entries[s as usize].key.is_empty(),
                "free slot keeps no key"
            );
            free += 1;
            s = self.entries[s as usize].next;
        }
        assert_eq!(count + free, slots, "slots leaked from both lists");
        assert!(
            self.entries.capacity() <= self.max_entries,
            "slab grew past max_entries"
        );

        // Index: at most half full; each live slot appears once, reachable from its home bucket
        // without crossing an empty bucket.
        assert!(self.buckets.is_empty() || self.buckets.len().is_power_of_two());
        assert!(self.len * 2 <= self.buckets.len() || self.len == 0);
        let mask = self.buckets.len().wrapping_sub(1);
        let mut indexed = 0;
        for (i, &t) in self.buckets.iter().enumerate() {
            if t == NIL {
                continue;
            }
            indexed += 1;
            let e = &self.entries[t as usize];
            let mut j = e.hash as usize & mask;
            while j != i {
                assert_ne!(self.buckets[j], NIL, "empty bucket inside a probe run");
                j = (j + 1) & mask;
            }
        }
        assert_eq!(indexed, self.len, "index holds exactly the live entries");
    }
}
