//! The block cache: decoded key-table and value-table blocks shared by every table of a
//! database, bounded by bytes, with a high-priority pool that low-priority blocks cannot evict.
//!
//! Two quick_cache instances back it. The high-priority pool holds at most
//! `high_priority_ratio × capacity` bytes (handle blocks of index-decoupled key tables, which GC
//! validity lookups read over and over). The low-priority pool (data blocks) gets the rest of the
//! capacity *including whatever the high pool does not use*: its capacity is re-set to
//! `capacity − (high usage rounded up to the next step)` whenever the high pool's usage moves by
//! a step (1/32 of the high pool's capacity). So a database that never inserts high-priority
//! blocks keeps (almost) the whole cache for data blocks, the two pools together never exceed the
//! capacity by more than one block, and a flood of data blocks never evicts a handle block.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::error::{Error, Result};
use crate::table::Block;

/// Cache key: (file number, block offset). File numbers are never reused, so a key names one
/// block for the life of the database.
type Key = (u64, u64);

type Pool = Cache<Key, Arc<Block>, BlockWeighter>;

/// Weighs a block by its size in bytes (at least 1: quick_cache never evicts weight-0 items).
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<Key, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &Key, block: &Arc<Block>) -> u64 {
        (block.charge() as u64).max(1)
    }
}

/// Assumed average block size, only used to size the cache's initial tables.
const TYPICAL_BLOCK_SIZE: usize = 4096;
/// Cap on the initial item estimate, so a huge budget does not preallocate huge tables.
const MAX_INITIAL_ITEMS: usize = 1 << 20;
/// The low pool is resized when the high pool's usage has moved by 1/RESIZE_STEPS of the high
/// pool's capacity: often enough to lend nearly all unused high capacity to data blocks, rarely
/// enough that resizing (which write-locks every shard of the low pool) costs nothing measurable.
const RESIZE_STEPS: u64 = 32;

/// Default share of the capacity the high-priority pool may hold (0.5).
pub const DEFAULT_HIGH_PRIORITY_RATIO: f64 = 0.5;

/// Which pool a block lives in. A block is looked up in the pool it is inserted into, so every
/// caller must use one priority per kind of block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CachePriority {
    /// Metadata read over and over (handle blocks of index-decoupled key tables): evicted only
    /// by other high-priority blocks.
    High,
    /// Everything else (data blocks, value-table dense index blocks).
    Low,
}

impl CachePriority {
    fn index(self) -> usize {
        match self {
            CachePriority::High => 0,
            CachePriority::Low => 1,
        }
    }
}

/// Decoded blocks keyed by (file number, block offset), in two pools evicted independently by
/// quick_cache's CLOCK-Pro-like policy (see the module documentation for how the capacity is
/// shared). Blocks larger than one of a pool's internal shards are not kept.
pub struct BlockCache {
    high: Option<Pool>,
    low: Option<Pool>,
    capacity: u64,
    high_capacity: u64,
    high_ratio: f64,
    /// How far the high pool's usage may move before the low pool is resized (at least 1).
    step: u64,
    /// The high-pool usage, rounded up to a step, that the low pool's capacity was last set
    /// for. Locked only to resize; a contended lock means another thread is resizing.
    reserved_for_high: Mutex<u64>,
    hits: [AtomicU64; 2],
    misses: [AtomicU64; 2],
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` bytes of blocks, of which the high-priority pool
    /// may hold up to [`DEFAULT_HIGH_PRIORITY_RATIO`]. Capacity 0 disables it: `get` always
    /// misses and `insert` does nothing.
    pub fn new(capacity_bytes: usize) -> Self {
        Self::build(capacity_bytes as u64, DEFAULT_HIGH_PRIORITY_RATIO)
    }

    /// A cache holding up to `capacity_bytes` bytes, of which the high-priority pool may hold up
    /// to `high_priority_ratio × capacity_bytes` (low-priority blocks use whatever it leaves).
    /// A ratio outside `0..=1` (or not a number) is `Error::InvalidArgument` naming
    /// `high_priority_ratio`; 0 disables the high pool (high-priority inserts are dropped).
    pub fn with_high_priority_ratio(
        capacity_bytes: usize,
        high_priority_ratio: f64,
    ) -> Result<Self> {
        if !(0.0..=1.0).contains(&high_priority_ratio) {
            return Err(Error::invalid(format!(
                "high_priority_ratio {high_priority_ratio} is outside 0..=1"
            )));
        }
        Ok(Self::build(capacity_bytes as u64, high_priority_ratio))
    }

    fn build(capacity: u64, ratio: f64) -> Self {
        // The float product is at most `capacity`; the min guards the rounding.
        let high_capacity = ((capacity as f64 * ratio) as u64).min(capacity);
        let step = (high_capacity / RESIZE_STEPS).max(1);
        let reserved = if high_capacity > 0 {
            step.min(high_capacity)
        } else {
            0
        };
        let pool = |bytes: u64| {
            (bytes > 0).then(|| {
                let items = (bytes as usize / TYPICAL_BLOCK_SIZE).clamp(16, MAX_INITIAL_ITEMS);
                Cache::with_weighter(items, bytes, BlockWeighter)
            })
        };
        BlockCache {
            high: pool(high_capacity),
            low: pool(capacity - reserved),
            capacity,
            high_capacity,
            high_ratio: ratio,
            step,
            reserved_for_high: Mutex::new(reserved),
            hits: Default::default(),
            misses: Default::default(),
        }
    }

    fn pool(&self, priority: CachePriority) -> Option<&Pool> {
        match priority {
            CachePriority::High => self.high.as_ref(),
            CachePriority::Low => self.low.as_ref(),
        }
    }

    /// The cached block at `offset` of table `file_number` in the pool of `priority`, counting
    /// a hit or a miss for that pool.
    pub fn get(
        &self,
        file_number: u64,
        offset: u64,
        priority: CachePriority,
    ) -> Option<Arc<Block>> {
        let found = self
            .pool(priority)
            .and_then(|c| c.get(&(file_number, offset)));
        let counter = if found.is_some() {
            &self.hits[priority.index()]
        } else {
            &self.misses[priority.index()]
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block` as the block at `offset` of table `file_number` in the pool of `priority`
    /// (replacing any entry with that key there). No-op when that pool is disabled.
    pub fn insert(
        &self,
        file_number: u64,
        offset: u64,
        block: Arc<Block>,
        priority: CachePriority,
    ) {
        let Some(pool) = self.pool(priority) else {
            return;
        };
        pool.insert((file_number, offset), block);
        if priority == CachePriority::High {
            self.rebalance();
        }
    }

    /// Lends the low pool what the high pool does not use: re-sets the low pool's capacity once
    /// the high pool's usage has moved by a step since the last time.
    fn rebalance(&self) {
        let (Some(high), Some(low)) = (&self.high, &self.low) else {
            return;
        };
        let Some(mut reserved) = self.reserved_for_high.try_lock() else {
            return;
        };
        // Reserve the usage rounded up to a whole step, so the pools together stay within the
        // capacity until the next resize.
        let wanted = high
            .weight()
            .div_ceil(self.step)
            .saturating_mul(self.step)
            .clamp(self.step.min(self.high_capacity), self.high_capacity);
        if wanted != *reserved {
            *reserved = wanted;
            // quick_cache cannot hold anything at capacity 0; 1 holds no block either.
            low.set_capacity((self.capacity - wanted).max(1));
        }
    }

    /// Lookups that found their block, in both pools.
    pub fn hits(&self) -> u64 {
        self.pool_hits(CachePriority::High) + self.pool_hits(CachePriority::Low)
    }

    /// Lookups that did not (including every lookup of a disabled pool), in both pools.
    pub fn misses(&self) -> u64 {
        self.pool_misses(CachePriority::High) + self.pool_misses(CachePriority::Low)
    }

    /// Lookups in the pool of `priority` that found their block.
    pub fn pool_hits(&self, priority: CachePriority) -> u64 {
        self.hits[priority.index()].load(Ordering::Relaxed)
    }

    /// Lookups in the pool of `priority` that did not.
    pub fn pool_misses(&self, priority: CachePriority) -> u64 {
        self.misses[priority.index()].load(Ordering::Relaxed)
    }

    /// Bytes of blocks currently cached, in both pools.
    pub fn usage_bytes(&self) -> u64 {
        self.pool_usage_bytes(CachePriority::High) + self.pool_usage_bytes(CachePriority::Low)
    }

    /// Bytes of blocks currently cached in the pool of `priority`.
    pub fn pool_usage_bytes(&self, priority: CachePriority) -> u64 {
        self.pool(priority).map_or(0, Cache::weight)
    }

    /// The configured capacity in bytes (both pools together).
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// The most the high-priority pool may hold, in bytes.
    pub fn high_priority_capacity_bytes(&self) -> u64 {
        self.high_capacity
    }

    /// The configured share of the capacity the high-priority pool may hold.
    pub fn high_priority_ratio(&self) -> f64 {
        self.high_ratio
    }
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.capacity)
            .field("high_priority_capacity_bytes", &self.high_capacity)
            .field("usage_bytes", &self.usage_bytes())
            .field(
                "high_priority_usage_bytes",
                &self.pool_usage_bytes(CachePriority::High),
            )
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CachePriority::{High, Low};

    fn block(payload: usize) -> Arc<Block> {
        let mut data = vec![0u8; payload];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        // An entry area of `payload` zero bytes is a valid restart array; entries are never
        // parsed here.
        Arc::new(Block::new(data, "c.sst".into(), 0).unwrap())
    }

    #[test]
    fn hits_misses_and_usage() {
        let cache = BlockCache::new(1 << 20);
        assert_eq!(cache.capacity_bytes(), 1 << 20);
        assert_eq!(cache.high_priority_capacity_bytes(), 1 << 19);
        assert!(cache.get(1, 0, Low).is_none());
        cache.insert(1, 0, block(100), Low);
        cache.insert(1, 200, block(50), Low);
        assert_eq!(cache.get(1, 0, Low).unwrap().size(), 108);
        assert!(cache.get(2, 0, Low).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 2));
        // A block is charged its contents and a restart head (8 bytes) per restart point.
        assert_eq!(cache.usage_bytes(), 116 + 66);

        cache.insert(3, 0, block(10), High);
        assert_eq!(cache.get(3, 0, High).unwrap().size(), 18);
        // A block is found only in the pool it went into.
        assert!(cache.get(3, 0, Low).is_none());
        assert!(cache.get(1, 0, High).is_none());
        assert_eq!((cache.pool_hits(High), cache.pool_misses(High)), (1, 1));
        assert_eq!((cache.pool_hits(Low), cache.pool_misses(Low)), (1, 3));
        assert_eq!((cache.hits(), cache.misses()), (2, 4));
        assert_eq!(cache.pool_usage_bytes(High), 26);
        assert_eq!(cache.usage_bytes(), 116 + 66 + 26);
    }

    #[test]
    fn stays_within_capacity() {
        let cache = BlockCache::new(64 << 10);
        for i in 0..1000 {
            cache.insert(7, i * 4096, block(1000), Low);
        }
        assert!(cache.usage_bytes() <= 64 << 10, "{}", cache.usage_bytes());
        assert!(cache.usage_bytes() > 0);
        for i in 0..1000 {
            let p = if i % 2 == 0 { High } else { Low };
            cache.insert(8, i * 4096, block(1000), p);
            // At most one block over while the low pool is being shrunk.
            assert!(
                cache.usage_bytes() <= (64 << 10) + 1016,
                "{}",
                cache.usage_bytes()
            );
        }
        assert!(cache.pool_usage_bytes(High) <= 32 << 10);
    }

    #[test]
    fn low_priority_blocks_use_what_the_high_pool_leaves() {
        let cache = BlockCache::new(1 << 20);
        for i in 0..4000 {
            cache.insert(1, i * 4096, block(1000), Low);
        }
        // Without high-priority blocks, data blocks get (nearly) the whole capacity, not half.
        assert!(
            cache.pool_usage_bytes(Low) > (1 << 20) * 9 / 10,
            "{}",
            cache.pool_usage_bytes(Low)
        );
    }

    #[test]
    fn high_priority_blocks_survive_a_flood_of_low_priority_ones() {
        let cache = BlockCache::new(1 << 20);
        // 200 KiB of high-priority blocks (each 1,016 bytes of contents and 8 of restart head):
        // well within the high pool's 512 KiB.
        for i in 0..200 {
            cache.insert(1, i * 4096, block(1008), High);
        }
        assert_eq!(cache.pool_usage_bytes(High), 200 * 1024);
        // Ten times the whole capacity in low-priority blocks, read back now and then so the
        // cache sees them as hot.
        for i in 0..10_000 {
            cache.insert(2, i * 4096, block(1016), Low);
            if i % 3 == 0 {
                let _ = cache.get(2, i * 4096, Low);
            }
        }
        for i in 0..200 {
            assert!(
                cache.get(1, i * 4096, High).is_some(),
                "high block {i} evicted"
            );
        }
        assert!(cache.usage_bytes() <= 1 << 20, "{}", cache.usage_bytes());
        // The low pool shrank to make room for what the high pool holds.
        assert!(cache.pool_usage_bytes(Low) <= (1 << 20) - 200 * 1024);
    }

    #[test]
    fn high_pool_is_bounded_by_its_ratio() {
        let cache = BlockCache::with_high_priority_ratio(1 << 20, 0.25).unwrap();
        for i in 0..2000 {
            cache.insert(1, i * 4096, block(1016), High);
        }
        assert!(cache.pool_usage_bytes(High) <= 1 << 18);
        assert!(cache.pool_usage_bytes(High) > 1 << 17);
        // Low-priority blocks still get the other three quarters.
        for i in 0..4000 {
            cache.insert(2, i * 4096, block(1016), Low);
        }
        assert!(cache.pool_usage_bytes(Low) > (1 << 20) / 2);
        assert!(cache.usage_bytes() <= 1 << 20);
    }

    #[test]
    fn ratio_is_validated() {
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            let err = BlockCache::with_high_priority_ratio(1 << 20, bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)));
            assert!(err.to_string().contains("high_priority_ratio"), "{err}");
        }
        let none = BlockCache::with_high_priority_ratio(1 << 20, 0.0).unwrap();
        none.insert(1, 0, block(10), High);
        assert!(none.get(1, 0, High).is_none());
        none.insert(1, 0, block(10), Low);
        assert!(none.get(1, 0, Low).is_some());
        let all = BlockCache::with_high_priority_ratio(1 << 20, 1.0).unwrap();
        assert_eq!(all.high_priority_capacity_bytes(), 1 << 20);
        all.insert(1, 0, block(10), High);
        all.insert(1, 100, block(10), Low);
        assert!(all.get(1, 0, High).is_some());
        assert!(all.get(1, 100, Low).is_some());
        assert_eq!(BlockCache::new(100).high_priority_ratio(), 0.5);
    }

    #[test]
    fn zero_capacity_disables() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block(10), Low);
        cache.insert(1, 0, block(10), High);
        assert!(cache.get(1, 0, Low).is_none());
        assert!(cache.get(1, 0, High).is_none());
        assert_eq!(
            (cache.hits(), cache.misses(), cache.usage_bytes()),
            (0, 2, 0)
        );
    }
}
