//! Caches: decoded blocks (by byte budget), open key tables and open value tables (by count).

pub mod block_cache;
pub mod file_cache;

pub use block_cache::BlockCache;
pub use file_cache::{FileCache, OpenTable, TableCache, ValueTableCache};
