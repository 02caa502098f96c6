//! Caches: decoded blocks (by byte budget, with a high-priority pool), open key tables and open
//! value tables (by count).

pub mod block_cache;
pub mod file_cache;

pub use block_cache::{BlockCache, CachePriority, DEFAULT_HIGH_PRIORITY_RATIO};
pub use file_cache::{FileCache, OpenTable, TableCache, ValueTableCache};
