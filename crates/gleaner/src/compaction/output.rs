//! Writes the entries a flush or compaction keeps into key tables, cutting a new table at user
//! key boundaries when the current one reaches its target size or overlaps too much of the
//! level below.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::filename::table_file_name;
use crate::io::{CountedWriter, FileSystem, IoClass, IoStats, WriteFileOptions};
use crate::key::{compare_internal, user_key};
use crate::table::{TableBuilder, TableBuilderOptions};
use crate::version::{FileMetaData, NewTable, TableMeta};

/// Where and how output tables are written.
#[derive(Clone)]
pub struct OutputConfig {
    /// File system.
    pub fs: Arc<dyn FileSystem>,
    /// Database directory.
    pub dir: PathBuf,
    /// I/O counters.
    pub stats: Arc<IoStats>,
    /// Table format options.
    pub table: TableBuilderOptions,
    /// Write with `O_DIRECT`.
    pub direct: bool,
    /// The class the written bytes count under.
    pub class: IoClass,
    /// The database's file-number counter.
    pub next_file_number: Arc<AtomicU64>,
    /// Target size of one output table (`u64::MAX`: never cut on size).
    pub target_file_size: u64,
    /// Largest overlap of one output with `grandparents` before it is cut.
    pub max_grandparent_overlap: u64,
}

/// Builds a run of output tables for one level.
pub struct TableOutputs {
    cfg: OutputConfig,
    level: u32,
    grandparents: Vec<Arc<FileMetaData>>,
    grandparent_index: usize,
    overlapped_bytes: u64,
    seen_key: bool,
    current: Option<(u64, TableBuilder)>,
    last_user_key: Vec<u8>,
    has_last: bool,
    finished: Vec<NewTable>,
    created: Vec<u64>,
    bytes_written: u64,
}

impl TableOutputs {
    /// Outputs for `level`; `grandparents` are the overlapping tables of the level below it.
    pub fn new(cfg: OutputConfig, level: u32, grandparents: Vec<Arc<FileMetaData>>) -> Self {
        TableOutputs {
            cfg,
            level,
            grandparents,
            grandparent_index: 0,
            overlapped_bytes: 0,
            seen_key: false,
            current: None,
            last_user_key: Vec::new(),
            has_last: false,
            finished: Vec::new(),
            created: Vec::new(),
            bytes_written: 0,
        }
    }

    /// True when the next key should start a new table because the current one overlaps too
    /// many grandparent bytes.
    fn grandparent_cut(&mut self, ikey: &[u8]) -> bool {
        while self.grandparent_index < self.grandparents.len()
            && compare_internal(ikey, &self.grandparents[self.grandparent_index].largest).is_gt()
        {
            if self.seen_key {
                self.overlapped_bytes += self.grandparents[self.grandparent_index].file_size;
            }
            self.grandparent_index += 1;
        }
        self.seen_key = true;
        if self.overlapped_bytes > self.cfg.max_grandparent_overlap {
            self.overlapped_bytes = 0;
            true
        } else {
            false
        }
    }

    /// Adds one entry; entries arrive in internal-key order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let uk = user_key(ikey);
        let new_user_key = !self.has_last || uk != self.last_user_key.as_slice();
        if new_user_key {
            // Only cut between user keys, so tables of one level never share a user key.
            let gp_cut = self.grandparent_cut(ikey);
            let size_cut = self
                .current
                .as_ref()
                .is_some_and(|(_, b)| b.estimated_file_size() >= self.cfg.target_file_size);
            if self.current.is_some() && (gp_cut || size_cut) {
                self.finish_current()?;
            }
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(uk);
            self.has_last = true;
        }
        if self.current.is_none() {
            self.open_table()?;
        }
        let (_, builder) = self.current.as_mut().expect("opened above");
        builder.add(ikey, value)
    }

    fn open_table(&mut self) -> Result<()> {
        let number = self.cfg.next_file_number.fetch_add(1, Ordering::SeqCst);
        let path = self.cfg.dir.join(table_file_name(number));
        self.created.push(number);
        let file = self.cfg.fs.new_writable(
            &path,
            WriteFileOptions {
                direct: self.cfg.direct,
                buffer_size: 1 << 20,
            },
        )?;
        let file = CountedWriter::new(file, self.cfg.class, Arc::clone(&self.cfg.stats));
        let builder = TableBuilder::new(Box::new(file), self.cfg.table)?;
        self.current = Some((number, builder));
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        let Some((number, builder)) = self.current.take() else {
            return Ok(());
        };
        let done = builder.finish()?;
        let p = &done.properties;
        self.bytes_written += done.file_size;
        self.finished.push(NewTable {
            level: self.level,
            meta: TableMeta {
                number,
                file_size: done.file_size,
                smallest: p.smallest_key.clone(),
                largest: p.largest_key.clone(),
                smallest_seq: p.smallest_seq,
                largest_seq: p.largest_seq,
                num_entries: p.num_entries,
                num_deletions: p.num_deletions,
            },
        });
        Ok(())
    }

    /// Finishes the last table and makes every output's directory entry durable. Returns the
    /// tables for the version edit.
    pub fn finish(mut self) -> Result<(Vec<NewTable>, u64)> {
        let r = self.finish_current().and_then(|_| {
            if self.created.is_empty() {
                Ok(())
            } else {
                self.cfg.fs.sync_dir(&self.cfg.dir)
            }
        });
        if let Err(e) = r {
            self.abandon();
            return Err(e);
        }
        self.created.clear();
        Ok((std::mem::take(&mut self.finished), self.bytes_written))
    }

    /// Deletes every table created so far (after a failure).
    pub fn abandon(&mut self) {
        self.current = None;
        for number in self.created.drain(..) {
            // Best effort: a table that cannot be deleted now is an orphan the next open removes.
            let _ = self
                .cfg
                .fs
                .remove_file(&self.cfg.dir.join(table_file_name(number)));
        }
    }
}

impl Drop for TableOutputs {
    fn drop(&mut self) {
        // Not finished: the job failed part-way; its tables must not linger.
        if !self.created.is_empty() {
            self.abandon();
        }
    }
}
