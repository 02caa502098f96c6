//! Writes separated values into value tables for flushes and GC jobs, cutting a new table at
//! the target size, only between user keys (so the tables of one run have disjoint key ranges,
//! which inheritance records rely on).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::pending::PendingFiles;
use crate::error::Result;
use crate::filename::value_table_file_name;
use crate::hotness::{CLASS_COLD, CLASS_DEFAULT, CLASS_HOT, DropCache};
use crate::io::{CountedWriter, FileSystem, IoClass, IoStats, WriteFileOptions};
use crate::table::Compression;
use crate::value::{ValueHandle, ValueTableBuilder, ValueTableBuilderOptions};
use crate::version::ValueTableMeta;

/// Where and how value tables are written.
#[derive(Clone)]
pub struct ValueOutputConfig {
    /// File system.
    pub fs: Arc<dyn FileSystem>,
    /// Database directory.
    pub dir: PathBuf,
    /// I/O counters.
    pub stats: Arc<IoStats>,
    /// The class written bytes count under.
    pub class: IoClass,
    /// The database's file-number counter.
    pub next_file_number: Arc<AtomicU64>,
    /// Target size of one value table.
    pub target_size: u64,
    /// Compression of the dense index blocks (records are never compressed).
    pub index_compression: Compression,
    /// Write with `O_DIRECT`.
    pub direct: bool,
}

/// A run of value tables being written.
pub struct ValueOutputs {
    cfg: ValueOutputConfig,
    class: u32,
    current: Option<(u64, ValueTableBuilder)>,
    last_user_key: Vec<u8>,
    has_last: bool,
    finished: Vec<ValueTableMeta>,
    pending: PendingFiles,
    bytes_written: u64,
}

impl ValueOutputs {
    /// A run of tables tagged with `class`.
    pub fn new(cfg: ValueOutputConfig, class: u32) -> Self {
        ValueOutputs {
            pending: PendingFiles::new(Arc::clone(&cfg.fs), cfg.dir.clone()),
            cfg,
            class,
            current: None,
            last_user_key: Vec::new(),
            has_last: false,
            finished: Vec::new(),
            bytes_written: 0,
        }
    }

    /// Appends a record (in internal-key order) and returns its handle.
    pub fn add(&mut self, user_key: &[u8], seq: u64, value: &[u8]) -> Result<ValueHandle> {
        let new_key = !self.has_last || user_key != self.last_user_key.as_slice();
        if new_key {
            let full = self
                .current
                .as_ref()
                .is_some_and(|(_, b)| b.estimated_file_size() >= self.cfg.target_size);
            if full {
                self.finish_current()?;
            }
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(user_key);
            self.has_last = true;
        }
        if self.current.is_none() {
            self.open_table()?;
        }
        let (number, builder) = self.current.as_mut().expect("opened above");
        let (offset, len) = builder.add(user_key, seq, value)?;
        Ok(ValueHandle {
            file_number: *number,
            offset,
            len,
        })
    }

    fn open_table(&mut self) -> Result<()> {
        let number = self.cfg.next_file_number.fetch_add(1, Ordering::SeqCst);
        self.pending.add(value_table_file_name(number));
        let file = self.cfg.fs.new_writable(
            &self.cfg.dir.join(value_table_file_name(number)),
            WriteFileOptions {
                direct: self.cfg.direct,
                buffer_size: 1 << 20,
            },
        )?;
        let file = CountedWriter::new(file, self.cfg.class, Arc::clone(&self.cfg.stats));
        let opts = ValueTableBuilderOptions {
            compression: self.cfg.index_compression,
            class: self.class,
            ..Default::default()
        };
        self.current = Some((number, ValueTableBuilder::new(Box::new(file), opts)?));
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        let Some((number, builder)) = self.current.take() else {
            return Ok(());
        };
        let done = builder.finish()?;
        let p = &done.properties;
        self.bytes_written += done.file_size;
        self.finished.push(ValueTableMeta {
            number,
            file_size: done.file_size,
            records: p.num_records,
            record_bytes: p.record_bytes,
            smallest_key: p.smallest_key.clone(),
            largest_key: p.largest_key.clone(),
            smallest_seq: p.smallest_seq,
            largest_seq: p.largest_seq,
            class: p.class,
        });
        Ok(())
    }

    /// True when no record was added.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Finishes the last table and makes the tables' directory entries durable. Returns the
    /// tables for the version edit, the bytes written, and the files, which are deleted unless
    /// the caller keeps them once the edit is installed.
    pub fn finish(mut self) -> Result<(Vec<ValueTableMeta>, u64, PendingFiles)> {
        self.finish_current()?;
        self.pending.make_durable()?;
        let pending = std::mem::replace(
            &mut self.pending,
            PendingFiles::new(Arc::clone(&self.cfg.fs), self.cfg.dir.clone()),
        );
        Ok((
            std::mem::take(&mut self.finished),
            self.bytes_written,
            pending,
        ))
    }

    /// Deletes every table created so far (after a failure).
    pub fn abandon(&mut self) {
        self.current = None;
        self.pending.abandon();
    }
}

/// Value tables written in one run per temperature: with a [`DropCache`], values of keys it
/// knows as hot go to hot tables ([`CLASS_HOT`]) and the rest to cold ones ([`CLASS_COLD`]);
/// without one, every value goes to one run of default-class tables. Each run has disjoint key
/// ranges; the two runs overlap.
pub struct RoutedValueOutputs {
    cold: ValueOutputs,
    hot: Option<(ValueOutputs, Arc<DropCache>)>,
}

/// What [`RoutedValueOutputs::finish`] returns.
pub struct RoutedFinish {
    /// Every table written (hot run first).
    pub tables: Vec<ValueTableMeta>,
    /// Bytes of hot tables.
    pub hot_bytes: u64,
    /// Bytes of cold (or default-class) tables.
    pub cold_bytes: u64,
    /// The files, deleted unless kept.
    pub pending: PendingFiles,
}

impl RoutedValueOutputs {
    /// One run of default-class tables, or hot and cold runs routed by `hotness`.
    pub fn new(cfg: ValueOutputConfig, hotness: Option<Arc<DropCache>>) -> Self {
        match hotness {
            None => RoutedValueOutputs {
                cold: ValueOutputs::new(cfg, CLASS_DEFAULT),
                hot: None,
            },
            Some(cache) => RoutedValueOutputs {
                cold: ValueOutputs::new(cfg.clone(), CLASS_COLD),
                hot: Some((ValueOutputs::new(cfg, CLASS_HOT), cache)),
            },
        }
    }

    /// Appends a record (in internal-key order) to the run its key's temperature picks and
    /// returns its handle.
    pub fn add(&mut self, user_key: &[u8], seq: u64, value: &[u8]) -> Result<ValueHandle> {
        match &mut self.hot {
            Some((hot, cache)) if cache.is_hot(user_key) => hot.add(user_key, seq, value),
            _ => self.cold.add(user_key, seq, value),
        }
    }

    /// Finishes both runs.
    pub fn finish(self) -> Result<RoutedFinish> {
        let (mut tables, hot_bytes, mut pending) = match self.hot {
            Some((hot, _)) => hot.finish()?,
            None => (
                Vec::new(),
                0,
                PendingFiles::new(Arc::clone(&self.cold.cfg.fs), self.cold.cfg.dir.clone()),
            ),
        };
        let (cold_tables, cold_bytes, cold_files) = self.cold.finish()?;
        tables.extend(cold_tables);
        pending.absorb(cold_files);
        Ok(RoutedFinish {
            tables,
            hot_bytes,
            cold_bytes,
            pending,
        })
    }
}
