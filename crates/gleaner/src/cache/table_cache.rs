//! The table cache: open key tables (file handle, pinned index, filter and properties) by file
//! number, at most `max_open_files` of them.

use std::path::PathBuf;
use std::sync::Arc;

use super::BlockCache;
use crate::error::Result;
use crate::filename::table_file_name;
use crate::io::{CountedReader, FileSystem, IoClass, IoStats, ReadFileOptions};
use crate::table::Table;
use crate::version::FileMetaData;

/// Open key tables, shared by every reader and job of one database.
pub struct TableCache {
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    stats: Arc<IoStats>,
    block_cache: Option<Arc<BlockCache>>,
    direct_reads: bool,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("open", &self.tables.len())
            .field("dir", &self.dir)
            .finish()
    }
}

impl TableCache {
    /// A cache of at most `capacity` open tables of the database in `dir`.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        stats: Arc<IoStats>,
        block_cache: Option<Arc<BlockCache>>,
        capacity: usize,
        direct_reads: bool,
    ) -> Self {
        TableCache {
            tables: quick_cache::sync::Cache::new(capacity.max(1)),
            fs,
            dir,
            stats,
            block_cache,
            direct_reads,
        }
    }

    /// The open table for `meta`, opening it (reads counted under `class`) on a miss.
    pub fn get(&self, meta: &FileMetaData, class: IoClass) -> Result<Arc<Table>> {
        self.tables.get_or_insert_with(&meta.number, || {
            let name = table_file_name(meta.number);
            let file = self.fs.open_readable(
                &self.dir.join(&name),
                ReadFileOptions {
                    direct: self.direct_reads,
                },
            )?;
            let reader = CountedReader::new(file, Arc::clone(&self.stats));
            let table = Table::open(
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

    /// Number of tables currently open in the cache.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// True when no table is open.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}
