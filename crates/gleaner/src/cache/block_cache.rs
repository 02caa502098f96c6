//! The block cache: decoded key-table blocks shared by every table of a database, bounded by
//! bytes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::table::Block;

/// Cache key: (file number, block offset). File numbers are never reused, so a key names one
/// block for the life of the database.
type Key = (u64, u64);

/// Weighs a block by its size in bytes (at least 1: quick_cache never evicts weight-0 items).
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<Key, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &Key, block: &Arc<Block>) -> u64 {
        (block.size() as u64).max(1)
    }
}

/// Assumed average block size, only used to size the cache's initial tables.
const TYPICAL_BLOCK_SIZE: usize = 4096;
/// Cap on the initial item estimate, so a huge budget does not preallocate huge tables.
const MAX_INITIAL_ITEMS: usize = 1 << 20;

/// Decoded blocks keyed by (file number, block offset), evicted by quick_cache's CLOCK-Pro-like
/// policy once their total size exceeds the capacity. Blocks larger than one of the cache's
/// internal shards are not kept.
pub struct BlockCache {
    cache: Option<Cache<Key, Arc<Block>, BlockWeighter>>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding up to `capacity_bytes` bytes of blocks. Capacity 0 disables it: `get`
    /// always misses and `insert` does nothing.
    pub fn new(capacity_bytes: usize) -> Self {
        let cache = (capacity_bytes > 0).then(|| {
            let items = (capacity_bytes / TYPICAL_BLOCK_SIZE).clamp(16, MAX_INITIAL_ITEMS);
            Cache::with_weighter(items, capacity_bytes as u64, BlockWeighter)
        });
        BlockCache {
            cache,
            capacity: capacity_bytes as u64,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached block at `offset` of table `file_number`, counting a hit or a miss.
    pub fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self
            .cache
            .as_ref()
            .and_then(|c| c.get(&(file_number, offset)));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block` as the block at `offset` of table `file_number` (replacing any entry with
    /// that key). No-op when the cache is disabled.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        if let Some(cache) = &self.cache {
            cache.insert((file_number, offset), block);
        }
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not (including every lookup of a disabled cache).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes of blocks currently cached.
    pub fn usage_bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, Cache::weight)
    }

    /// The configured capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.capacity)
            .field("usage_bytes", &self.usage_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(cache.get(1, 0).is_none());
        cache.insert(1, 0, block(100));
        cache.insert(1, 200, block(50));
        assert_eq!(cache.get(1, 0).unwrap().size(), 108);
        assert!(cache.get(2, 0).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 2));
        assert_eq!(cache.usage_bytes(), 108 + 58);
    }

    #[test]
    fn stays_within_capacity() {
        let cache = BlockCache::new(64 << 10);
        for i in 0..1000 {
            cache.insert(7, i * 4096, block(1000));
        }
        assert!(cache.usage_bytes() <= 64 << 10, "{}", cache.usage_bytes());
        assert!(cache.usage_bytes() > 0);
    }

    #[test]
    fn zero_capacity_disables() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block(10));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(
            (cache.hits(), cache.misses(), cache.usage_bytes()),
            (0, 1, 0)
        );
    }
}
