//! The value-table cache: open value tables (file handle, pinned footer, top index and
//! properties) by file number, at most `max_open_files` of them.

use std::path::PathBuf;
use std::sync::Arc;

use super::BlockCache;
use crate::error::Result;
use crate::filename::value_table_file_name;
use crate::io::{CountedReader, FileSystem, IoClass, IoStats, ReadFileOptions};
use crate::value::ValueTable;
use crate::version::ValueTableMeta;

/// Open value tables, shared by readers, compactions and GC jobs of one database.
pub struct ValueTableCache {
    tables: quick_cache::sync::Cache<u64, Arc<ValueTable>>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    stats: Arc<IoStats>,
    block_cache: Option<Arc<BlockCache>>,
    direct_reads: bool,
}

impl std::fmt::Debug for ValueTableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueTableCache")
            .field("open", &self.tables.len())
            .finish()
    }
}

impl ValueTableCache {
    /// A cache of at most `capacity` open value tables of the database in `dir`.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        stats: Arc<IoStats>,
        block_cache: Option<Arc<BlockCache>>,
        capacity: usize,
        direct_reads: bool,
    ) -> Self {
        ValueTableCache {
            tables: quick_cache::sync::Cache::new(capacity.max(1)),
            fs,
            dir,
            stats,
            block_cache,
            direct_reads,
        }
    }

    /// The open table for `meta`, opening it (reads counted under `class`) on a miss.
    pub fn get(&self, meta: &ValueTableMeta, class: IoClass) -> Result<Arc<ValueTable>> {
        self.tables.get_or_insert_with(&meta.number, || {
            let name = value_table_file_name(meta.number);
            let file = self.fs.open_readable(
                &self.dir.join(&name),
                ReadFileOptions {
                    direct: self.direct_reads,
                },
            )?;
            let reader = CountedReader::new(file, Arc::clone(&self.stats));
            let table = ValueTable::open(
                reader,
                name,
                meta.number,
                meta.file_size,
                self.block_cache.clone(),
                class,
            )?;
            Ok(Arc::new(table))
        })
    }

    /// Forgets table `number` (it is being deleted).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
    }

    /// Number of tables currently open.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// True when no table is open.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}
