//! Caches: decoded blocks (by byte budget, with a high-priority pool), separated values of point
//! reads (a share of the same budget), the newest values of recently read keys (a budget of
//! their own), open key tables and open value tables (by count).

pub mod block_cache;
pub mod file_cache;
pub mod row_cache;
pub mod value_cache;

pub use block_cache::{BlockCache, CachePriority, DEFAULT_HIGH_PRIORITY_RATIO};
pub use file_cache::{FileCache, OpenTable, TableCache, ValueTableCache};
pub use row_cache::RowCache;
pub use value_cache::ValueCache;
