//! A cache of open files of one kind (key tables or value tables) by file number: the file
//! handle and what the table pins in memory (footer, index, filter, properties), at most
//! `max_open_files` of each kind.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::BlockCache;
use crate::error::Result;
use crate::filename::{table_file_name, value_table_file_name};
use crate::io::{CountedReader, FileSystem, IoClass, IoStats, ReadFileOptions};
use crate::table::Table;
use crate::value::ValueTable;

/// A table kind the cache can open.
pub trait OpenTable: Send + Sync + Sized + 'static {
    /// The file name of table `number`.
    fn file_name(number: u64) -> String;

    /// Opens the table (see [`Table::open`] and [`ValueTable::open`]).
    fn open(
        file: CountedReader,
        file_name: String,
        file_number: u64,
        file_size: u64,
        cache: Option<Arc<BlockCache>>,
        class: IoClass,
    ) -> Result<Self>;
}

impl OpenTable for Table {
    fn file_name(number: u64) -> String {
        table_file_name(number)
    }

    fn open(
        file: CountedReader,
        file_name: String,
        file_number: u64,
        file_size: u64,
        cache: Option<Arc<BlockCache>>,
        class: IoClass,
    ) -> Result<Self> {
        Table::open(file, file_name, file_number, file_size, cache, class)
    }
}

impl OpenTable for ValueTable {
    fn file_name(number: u64) -> String {
        value_table_file_name(number)
    }

    fn open(
        file: CountedReader,
        file_name: String,
        file_number: u64,
        file_size: u64,
        cache: Option<Arc<BlockCache>>,
        class: IoClass,
    ) -> Result<Self> {
        ValueTable::open(file, file_name, file_number, file_size, cache, class)
    }
}

/// Open tables of kind `T`, shared by every reader and job of one database.
pub struct FileCache<T: OpenTable> {
    tables: quick_cache::sync::Cache<u64, Arc<T>>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    stats: Arc<IoStats>,
    block_cache: Option<Arc<BlockCache>>,
    direct_reads: bool,
    /// Tables still being written (value segments, `db/segments.rs`), readable at the places
    /// handed out while whoever writes them holds them: not in the cache's bound (there are a
    /// few per memtable), and never evicted while held.
    open: Mutex<HashMap<u64, Weak<T>>>,
    kind: PhantomData<T>,
}

impl FileCache<ValueTable> {
    /// Opens a view of the open value segment `number` (`ValueTable::open_segment`), read
    /// through the page cache whatever `direct_reads` says (its writer's buffered appends
    /// are there), and registers it ([`FileCache::register_open`]).
    pub(crate) fn open_segment(&self, number: u64) -> Result<Arc<ValueTable>> {
        let name = value_table_file_name(number);
        let file = self
            .fs
            .open_readable(&self.dir.join(&name), ReadFileOptions { direct: false })?;
        let reader = CountedReader::new(file, Arc::clone(&self.stats));
        let view = Arc::new(ValueTable::open_segment(reader, name, number));
        self.register_open(number, &view);
        Ok(view)
    }
}

/// Open key tables.
pub type TableCache = FileCache<Table>;
/// Open value tables.
pub type ValueTableCache = FileCache<ValueTable>;

impl<T: OpenTable> std::fmt::Debug for FileCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("open", &self.tables.len())
            .field("dir", &self.dir)
            .finish()
    }
}

impl<T: OpenTable> FileCache<T> {
    /// A cache of at most `capacity` open tables of the database in `dir`.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        stats: Arc<IoStats>,
        block_cache: Option<Arc<BlockCache>>,
        capacity: usize,
        direct_reads: bool,
    ) -> Self {
        FileCache {
            tables: quick_cache::sync::Cache::new(capacity.max(1)),
            fs,
            dir,
            stats,
            block_cache,
            direct_reads,
            open: Mutex::new(HashMap::new()),
            kind: PhantomData,
        }
    }

    /// Table `number` (recorded as `file_size` bytes), opening it (reads counted under `class`)
    /// on a miss.
    pub fn get(&self, number: u64, file_size: u64, class: IoClass) -> Result<Arc<T>> {
        self.tables.get_or_insert_with(&number, || {
            let name = T::file_name(number);
            let file = self.fs.open_readable(
                &self.dir.join(&name),
                ReadFileOptions {
                    direct: self.direct_reads,
                },
            )?;
            let reader = CountedReader::new(file, Arc::clone(&self.stats));
            let table = T::open(
                reader,
                name,
                number,
                file_size,
                self.block_cache.clone(),
                class,
            )?;
            Ok(Arc::new(table))
        })
    }

    /// Makes `table`, still being written, readable as number `number` through
    /// [`FileCache::open_table`] for as long as someone else holds it.
    pub(crate) fn register_open(&self, number: u64, table: &Arc<T>) {
        let mut open = self.open.lock();
        // A few per memtable: pruned as they come.
        open.retain(|_, t| t.strong_count() > 0);
        open.insert(number, Arc::downgrade(table));
    }

    /// Table `number` if it is still being written and held (see
    /// [`FileCache::register_open`]).
    pub(crate) fn open_table(&self, number: u64) -> Option<Arc<T>> {
        self.open.lock().get(&number).and_then(Weak::upgrade)
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
