//! Caches: decoded blocks (by byte budget) and open key tables (by count).

pub mod block_cache;

pub use block_cache::BlockCache;
