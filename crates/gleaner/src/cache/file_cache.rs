//! A cache of open files of one kind (key tables or value tables) by file number: the file
//! handle and what the table pins in memory (footer, index, filter, properties), at most
//! `max_open_files` of each kind.
//!
//! A table closed to make room keeps its metadata in a second, byte-bounded cache
//! ([`RETAINED_METADATA_BYTES`]), so opening it again costs an `open` and a `stat`, not the
//! device reads of its footer, properties and index: a database of more tables than
//! `max_open_files` (a scan or GC visiting thousands of value tables) would otherwise read
//! each table's metadata again at nearly every visit.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::BlockCache;
use crate::error::Result;
use crate::filename::{table_file_name, value_table_file_name};
use crate::io::{CountedReader, FileSystem, IoClass, IoStats, ReadFileOptions};
use crate::table::Table;
use crate::table::reader::TableMeta;
use crate::value::ValueTable;
use crate::value::reader::ValueTableMeta;

/// Most bytes of table metadata one cache keeps for tables it opened (a value table's top index
/// and properties, a few KiB for a 256 MiB table of 16 KiB values; a key table's index and
/// filter, a few per cent of the table). Past it the least recently used goes, and that
/// table's next open reads its metadata again.
pub const RETAINED_METADATA_BYTES: u64 = 64 << 20;

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

    /// What an open table keeps in memory besides its file.
    type Meta: Send + Sync + 'static;

    /// This table's metadata, to open it again with [`OpenTable::reopen`].
    fn meta(&self) -> Self::Meta;

    /// The file size `meta` was read from.
    fn meta_file_size(meta: &Self::Meta) -> u64;

    /// Bytes `meta` holds, about.
    fn meta_bytes(meta: &Self::Meta) -> u64;

    /// Opens the table again from `meta`, reading nothing (see [`Table::reopen`] and
    /// [`ValueTable::reopen`]).
    fn reopen(
        file: CountedReader,
        meta: &Self::Meta,
        cache: Option<Arc<BlockCache>>,
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

    type Meta = TableMeta;

    fn meta(&self) -> TableMeta {
        Table::meta(self)
    }

    fn meta_file_size(meta: &TableMeta) -> u64 {
        meta.file_size()
    }

    fn meta_bytes(meta: &TableMeta) -> u64 {
        meta.memory_bytes()
    }

    fn reopen(
        file: CountedReader,
        meta: &TableMeta,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Self> {
        Table::reopen(file, meta, cache)
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

    type Meta = ValueTableMeta;

    fn meta(&self) -> ValueTableMeta {
        ValueTable::meta(self)
    }

    fn meta_file_size(meta: &ValueTableMeta) -> u64 {
        meta.file_size()
    }

    fn meta_bytes(meta: &ValueTableMeta) -> u64 {
        meta.memory_bytes()
    }

    fn reopen(
        file: CountedReader,
        meta: &ValueTableMeta,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Self> {
        ValueTable::reopen(file, meta, cache)
    }
}

/// Weighs retained metadata by its bytes (at least 1: quick_cache never evicts weight-0 items).
struct MetaWeighter<T>(PhantomData<fn() -> T>);

impl<T> Clone for MetaWeighter<T> {
    fn clone(&self) -> Self {
        MetaWeighter(PhantomData)
    }
}

impl<T: OpenTable> quick_cache::Weighter<u64, Arc<T::Meta>> for MetaWeighter<T> {
    fn weight(&self, _number: &u64, meta: &Arc<T::Meta>) -> u64 {
        T::meta_bytes(meta).max(1)
    }
}

/// Assumed metadata bytes of one table, only used to size the retained cache's initial tables.
const TYPICAL_METADATA_BYTES: u64 = 4 << 10;

/// Open tables of kind `T`, shared by every reader and job of one database.
pub struct FileCache<T: OpenTable> {
    tables: quick_cache::sync::Cache<u64, Arc<T>>,
    /// The metadata of tables opened before, kept when their files close.
    retained: quick_cache::sync::Cache<u64, Arc<T::Meta>, MetaWeighter<T>>,
    /// Files opened (every miss of `tables`).
    opens: AtomicU64,
    /// Of those, opens that read the table's metadata (no metadata retained).
    metadata_reads: AtomicU64,
    /// Opens tried again after closing idle tables for want of a file descriptor.
    reopened_after_emfile: AtomicU64,
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
            retained: quick_cache::sync::Cache::with_weighter(
                (RETAINED_METADATA_BYTES / TYPICAL_METADATA_BYTES) as usize,
                RETAINED_METADATA_BYTES,
                MetaWeighter(PhantomData),
            ),
            opens: AtomicU64::new(0),
            metadata_reads: AtomicU64::new(0),
            reopened_after_emfile: AtomicU64::new(0),
            fs,
            dir,
            stats,
            block_cache,
            direct_reads,
            open: Mutex::new(HashMap::new()),
            kind: PhantomData,
        }
    }

    /// Table `number` (recorded as `file_size` bytes), opening it on a miss: from its retained
    /// metadata when the cache kept it (no read), else by reading the metadata (counted under
    /// `class`).
    pub fn get(&self, number: u64, file_size: u64, class: IoClass) -> Result<Arc<T>> {
        self.tables.get_or_insert_with(&number, || {
            let name = T::file_name(number);
            let file = self.open_file(&name)?;
            let reader = CountedReader::new(file, Arc::clone(&self.stats));
            self.opens.fetch_add(1, Ordering::Relaxed);
            if let Some(meta) = self.retained.get(&number)
                && T::meta_file_size(&meta) == file_size
            {
                return Ok(Arc::new(T::reopen(
                    reader,
                    &meta,
                    self.block_cache.clone(),
                )?));
            }
            self.metadata_reads.fetch_add(1, Ordering::Relaxed);
            let table = T::open(
                reader,
                name,
                number,
                file_size,
                self.block_cache.clone(),
                class,
            )?;
            self.retained.insert(number, Arc::new(table.meta()));
            Ok(Arc::new(table))
        })
    }

    /// Opens file `name` for reading. Out of file descriptors (`EMFILE`, `ENFILE`: the process's
    /// limit is below what `max_open_files` allows), closes tables this cache holds open that no
    /// reader holds (as many as a quarter of its open tables, at least one) and tries once more;
    /// if the second open fails too, that error is the read's. The closed tables open again
    /// later, from their retained metadata while it is kept. Only this cache's own files are
    /// closed: other files of the process (the other table cache's, logs, new tables) are not,
    /// and their opens are not retried.
    fn open_file(&self, name: &str) -> Result<Arc<dyn crate::io::RandomAccessFile>> {
        let path = self.dir.join(name);
        let opts = ReadFileOptions {
            direct: self.direct_reads,
        };
        match self.fs.open_readable(&path, opts) {
            Err(e) if out_of_descriptors(&e) && self.close_idle(self.tables.len() / 4) > 0 => {
                self.reopened_after_emfile.fetch_add(1, Ordering::Relaxed);
                self.fs.open_readable(&path, opts)
            }
            other => other,
        }
    }

    /// Closes up to `n` (at least 1) open tables no one but this cache holds; returns how many.
    fn close_idle(&self, n: usize) -> usize {
        let n = n.max(1);
        let closed = AtomicU64::new(0);
        self.tables.retain(|_, table| {
            if Arc::strong_count(table) > 1 || closed.load(Ordering::Relaxed) >= n as u64 {
                return true;
            }
            closed.fetch_add(1, Ordering::Relaxed);
            false
        });
        closed.into_inner() as usize
    }

    /// Opens that failed for want of a file descriptor and succeeded, or failed again, after
    /// this cache closed idle tables.
    pub fn opens_after_emfile(&self) -> u64 {
        self.reopened_after_emfile.load(Ordering::Relaxed)
    }

    /// Files this cache opened: every miss, whether it read the table's metadata or not.
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// Of [`FileCache::opens`], those that read the table's metadata from its file.
    pub fn metadata_reads(&self) -> u64 {
        self.metadata_reads.load(Ordering::Relaxed)
    }

    /// Bytes of metadata retained for tables opened before.
    pub fn retained_bytes(&self) -> u64 {
        self.retained.weight()
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

    /// Forgets table `number` (it is being deleted): its open file and its retained metadata.
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
        self.retained.remove(&number);
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

/// Whether `e` is the failure to open a file for want of a descriptor: `EMFILE` (the
/// process's limit) or `ENFILE` (the system's).
fn out_of_descriptors(e: &crate::error::Error) -> bool {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    matches!(e, crate::error::Error::Io { source, .. }
        if matches!(source.raw_os_error(), Some(EMFILE | ENFILE)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultFs, FaultKind, FaultOp, FaultRule, WriteFileOptions};
    use crate::value::{ValueTableBuilder, ValueTableBuilderOptions};
    use std::path::Path;

    /// Writes value table `number` into `/db` holding `key` → `value` at sequence 1; returns
    /// its size and the record's place.
    fn write_table(fs: &FaultFs, number: u64, key: &[u8], value: &[u8]) -> (u64, (u64, u64)) {
        let path = PathBuf::from("/db").join(value_table_file_name(number));
        let file = fs.new_writable(&path, WriteFileOptions::default()).unwrap();
        let mut b = ValueTableBuilder::new(file, ValueTableBuilderOptions::default()).unwrap();
        let at = b.add(key, 1, value).unwrap();
        (b.finish().unwrap().file_size, at)
    }

    fn cache(fs: &FaultFs) -> ValueTableCache {
        cache_of(fs, 1)
    }

    fn cache_of(fs: &FaultFs, capacity: usize) -> ValueTableCache {
        let fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
        fs.create_dir_all(Path::new("/db")).unwrap();
        FileCache::new(fs, "/db".into(), Arc::default(), None, capacity, false)
    }

    /// Fails the next `times` opens of table `number` (`None`: every one) with `EMFILE`.
    fn emfile(fs: &FaultFs, number: u64, times: Option<u64>) {
        fs.add_fault(FaultRule {
            op: FaultOp::Open,
            path_contains: Some(value_table_file_name(number)),
            skip: 0,
            times,
            kind: FaultKind::Emfile,
        });
    }

    /// Opens tables `1..=n` (written first) and lets go of them: the cache alone holds them.
    fn open_idle(fs: &FaultFs, c: &ValueTableCache, n: u64) -> Vec<u64> {
        (1..=n)
            .map(|i| {
                let (size, _) = write_table(fs, i, b"k", &[i as u8; 300]);
                drop(c.get(i, size, IoClass::UserRead).unwrap());
                size
            })
            .collect()
    }

    #[test]
    fn out_of_descriptors_closes_idle_tables_and_opens_again() {
        let fs = FaultFs::new(3);
        let c = cache_of(&fs, 8);
        open_idle(&fs, &c, 4);
        assert_eq!(c.len(), 4);
        let (size, (offset, len)) = write_table(&fs, 5, b"k", &[5; 300]);
        emfile(&fs, 5, Some(1));
        let t = c.get(5, size, IoClass::UserRead).expect("opened at the second try");
        assert_eq!(c.opens_after_emfile(), 1);
        assert_eq!(c.len(), 4, "one idle table closed for it");
        let record = t.read_record(offset, len, IoClass::UserRead).unwrap();
        assert_eq!(record.value.as_ref(), &[5u8; 300][..]);
    }

    #[test]
    fn out_of_descriptors_with_every_table_held_is_the_error() {
        let fs = FaultFs::new(4);
        let c = cache_of(&fs, 8);
        let sizes = open_idle(&fs, &c, 2);
        // Readers hold both: closing them in the cache would free no descriptor.
        let held: Vec<_> = (1..=2)
            .map(|i| c.get(i, sizes[i as usize - 1], IoClass::UserRead).unwrap())
            .collect();
        let (size, _) = write_table(&fs, 3, b"k", &[3; 300]);
        emfile(&fs, 3, Some(1));
        let Err(e) = c.get(3, size, IoClass::UserRead) else {
            panic!("no descriptor: the open succeeded")
        };
        assert!(out_of_descriptors(&e), "{e}");
        assert_eq!((c.opens_after_emfile(), c.len()), (0, 2));
        drop(held);
        // Every open failing: one more try after closing idle tables, then the error.
        emfile(&fs, 3, None);
        let Err(e) = c.get(3, size, IoClass::UserRead) else {
            panic!("still no descriptor: the open succeeded")
        };
        assert!(out_of_descriptors(&e), "{e}");
        assert_eq!(c.opens_after_emfile(), 1);
    }

    #[test]
    fn a_closed_table_opens_again_from_its_retained_metadata() {
        let fs = FaultFs::new(1);
        let c = cache(&fs);
        let (size, (offset, len)) = write_table(&fs, 1, b"k", &[7; 300]);
        let t = c.get(1, size, IoClass::UserRead).unwrap();
        assert_eq!((c.opens(), c.metadata_reads()), (1, 1));
        let reads = |c: &ValueTableCache| c.stats.get(IoClass::UserRead).read_ops;
        let before = reads(&c);
        drop(t);
        // Closed to make room: the file goes, the metadata stays.
        c.tables.remove(&1);
        assert_eq!(c.len(), 0);
        assert!(c.retained_bytes() > 0);
        let t = c.get(1, size, IoClass::UserRead).unwrap();
        assert_eq!((c.opens(), c.metadata_reads()), (2, 1));
        assert_eq!(reads(&c), before, "opened again without a read");
        let record = t.read_record(offset, len, IoClass::UserRead).unwrap();
        assert_eq!((record.key.as_slice(), record.value.as_ref()), (&b"k"[..], &[7u8; 300][..]));

        // A table deleted takes its metadata with it.
        c.evict(1);
        assert_eq!((c.len(), c.retained_bytes()), (0, 0));
        drop(t);
        c.get(1, size, IoClass::UserRead).unwrap();
        assert_eq!((c.opens(), c.metadata_reads()), (3, 2));
    }

    #[test]
    fn a_file_that_changed_under_retained_metadata_is_corruption() {
        let fs = FaultFs::new(2);
        let c = cache(&fs);
        let (size, _) = write_table(&fs, 1, b"k", &[7; 300]);
        drop(c.get(1, size, IoClass::UserRead).unwrap());
        c.tables.remove(&1);
        let path = PathBuf::from("/db").join(value_table_file_name(1));
        fs.truncate(&path, size - 1).unwrap();
        match c.get(1, size, IoClass::UserRead) {
            Err(e) => assert!(e.is_corruption(), "{e}"),
            Ok(_) => panic!("a truncated table opened again"),
        }
        assert_eq!(c.metadata_reads(), 1, "the retained metadata answered, and the size check");
    }
}
