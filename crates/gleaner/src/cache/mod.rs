//! Caches: decoded blocks (by byte budget) and open key tables (by count).

pub mod block_cache;
pub mod table_cache;

pub use block_cache::BlockCache;
pub use table_cache::TableCache;
