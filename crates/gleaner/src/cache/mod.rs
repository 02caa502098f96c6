//! Caches: decoded blocks (by byte budget), open key tables and open value tables (by count).

pub mod block_cache;
pub mod table_cache;
pub mod value_table_cache;

pub use block_cache::BlockCache;
pub use table_cache::TableCache;
pub use value_table_cache::ValueTableCache;
