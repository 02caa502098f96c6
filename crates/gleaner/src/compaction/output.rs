//! Writes the entries a flush or compaction keeps into key tables, cutting a new table at user
//! key boundaries when the current one reaches its target size or overlaps too much of the
//! level below.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::collections::BTreeMap;

use super::pending::PendingFiles;
use super::value_output::ClassedValueOutputs;
use crate::compaction::router::{MAX_VALUE_CLASSES, Placement, RouteContext};
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::io::{CountedWriter, FileSystem, IoClass, IoStats, WriteFileOptions};
use crate::key::{ParsedKey, ValueKind, append_internal_key, compare_internal, user_key};
use crate::range_del::{RangeTombstone, table_extent};
use crate::table::{TableBuilder, TableBuilderOptions};
use crate::value::{StoredHandle, ValueHandle};
use crate::version::{Dependence, FileMetaData, NewTable, TableMeta, ValueTableMeta};

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
    /// Bytes the job reads at once from each input table (`compaction_readahead_size`; the
    /// job's reads are configured here with its writes, as one job's I/O).
    pub input_readahead: u64,
}

/// What a finished run of outputs produced.
#[derive(Debug)]
pub struct FinishedOutputs {
    /// Key tables for the edit.
    pub key_tables: Vec<NewTable>,
    /// Bytes of the key tables.
    pub key_bytes: u64,
    /// Value tables for the edit (flushes only).
    pub value_tables: Vec<ValueTableMeta>,
    /// Bytes of the value tables.
    pub value_bytes: u64,
    /// Of those, bytes per value class.
    pub value_bytes_by_class: [u64; MAX_VALUE_CLASSES],
    /// The files written: keep them once the edit naming them is installed.
    pub pending: PendingFiles,
}

impl FinishedOutputs {
    /// Adds `other`'s outputs to these (the passes of one job).
    pub fn absorb(&mut self, other: FinishedOutputs) {
        self.key_tables.extend(other.key_tables);
        self.key_bytes += other.key_bytes;
        self.value_tables.extend(other.value_tables);
        self.value_bytes += other.value_bytes;
        for (a, b) in self
            .value_bytes_by_class
            .iter_mut()
            .zip(other.value_bytes_by_class)
        {
            *a += b;
        }
        self.pending.absorb(other.pending);
    }
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
    pending: PendingFiles,
    bytes_written: u64,
    /// Flushes only: values the policy's router separates go to these.
    separation: Option<ClassedValueOutputs>,
    /// Handles in the current table, per value table (its dependence).
    dependence: BTreeMap<u64, Dependence>,
    /// Aliases among them.
    aliases: u64,
    /// Range tombstones the outputs carry, by start key (`with_range_tombstones`).
    range_tombstones: Vec<RangeTombstone>,
    /// Where the current table's share of them begins: the first user key of the table
    /// (`None` for the first table, which takes those before its first entry too).
    tombstone_lower: Option<Vec<u8>>,
    /// Of `range_tombstones`, the first not yet counted in `tombstone_bytes`.
    tombstone_cursor: usize,
    /// Bytes of the tombstones starting in the current table's share so far: they count
    /// toward its size, so tombstones cut outputs as entries do.
    tombstone_bytes: u64,
    scratch_key: Vec<u8>,
    scratch_handle: Vec<u8>,
}

impl TableOutputs {
    /// Outputs for `level`; `grandparents` are the overlapping tables of the level below it.
    pub fn new(cfg: OutputConfig, level: u32, grandparents: Vec<Arc<FileMetaData>>) -> Self {
        TableOutputs {
            pending: PendingFiles::new(Arc::clone(&cfg.fs), cfg.dir.clone()),
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
            bytes_written: 0,
            separation: None,
            dependence: BTreeMap::new(),
            aliases: 0,
            range_tombstones: Vec::new(),
            tombstone_lower: None,
            tombstone_cursor: 0,
            tombstone_bytes: 0,
            scratch_key: Vec::new(),
            scratch_handle: Vec::new(),
        }
    }

    /// Separates the values the router of `values` places in value tables (flushes).
    #[must_use]
    pub fn with_separation(mut self, values: ClassedValueOutputs) -> Self {
        self.separation = Some(values);
        self
    }

    /// Writes `tombstones` into the outputs, each clipped to the tables' shares of the key
    /// space: a table takes the part from its first user key (the first table: from the
    /// start) to the next table's first (the last table: to the end), so a tombstone split
    /// between tables of one run still covers every key it covered, and each table's extent
    /// (`range_del::table_extent`) covers its part. With no entry at all, one table holds them.
    #[must_use]
    pub(crate) fn with_range_tombstones(mut self, mut tombstones: Vec<RangeTombstone>) -> Self {
        tombstones.sort();
        self.range_tombstones = tombstones;
        self
    }

    /// Counts the tombstones starting before `user_key` toward the current table's size.
    fn count_tombstones_before(&mut self, user_key: &[u8]) {
        while let Some(t) = self.range_tombstones.get(self.tombstone_cursor)
            && t.start.as_slice() < user_key
        {
            self.tombstone_bytes += tombstone_size(t);
            self.tombstone_cursor += 1;
        }
    }

    /// Where to cut the tombstones left after the last entry: the start of the first one
    /// beyond the target size of the current table's share, when it lies after every entry
    /// of that table and after the share's own start. `None` when they fit, or for an
    /// unbounded target.
    fn tail_cut(&self) -> Option<Vec<u8>> {
        if self.cfg.target_file_size == u64::MAX {
            return None;
        }
        let mut bytes = self.current.as_ref().map_or(0, |(_, b)| b.estimated_file_size());
        for t in &self.range_tombstones {
            let after_entries = !self.has_last || t.start.as_slice() > self.last_user_key.as_slice();
            let after_lower = self
                .tombstone_lower
                .as_deref()
                .is_none_or(|l| t.start.as_slice() > l);
            if bytes >= self.cfg.target_file_size && after_entries && after_lower {
                return Some(t.start.clone());
            }
            bytes += tombstone_size(t);
        }
        None
    }

    fn note_handle(&mut self, handle: &ValueHandle) {
        let d = self
            .dependence
            .entry(handle.file_number)
            .or_insert(Dependence {
                value_table: handle.file_number,
                count: 0,
                bytes: 0,
            });
        d.count += 1;
        d.bytes += handle.len;
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
            self.count_tombstones_before(uk);
            let size_cut = self.current.as_ref().is_some_and(|(_, b)| {
                b.estimated_file_size() + self.tombstone_bytes >= self.cfg.target_file_size
            });
            if self.current.is_some() && (gp_cut || size_cut) {
                self.finish_current(Some(uk))?;
                self.tombstone_lower = Some(uk.to_vec());
            }
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(uk);
            self.has_last = true;
        }
        if self.current.is_none() {
            self.open_table()?;
        }
        let parsed = ParsedKey::parse(ikey)
            .ok_or_else(|| Error::corruption("compaction input", 0, "malformed internal key"))?;
        match parsed.kind {
            ValueKind::Value | ValueKind::ValueWithExpiry => {
                if let Some(values) = self.separation.as_mut() {
                    let (expiry, value) = match parsed.kind {
                        ValueKind::ValueWithExpiry => {
                            let (e, v) = crate::expiry::split_inline(value).ok_or_else(|| {
                                Error::corruption(
                                    "compaction input",
                                    0,
                                    crate::expiry::BAD_INLINE_EXPIRY,
                                )
                            })?;
                            (Some(e), v)
                        }
                        _ => (None, value),
                    };
                    let ctx = RouteContext {
                        user_key: parsed.user_key,
                        seq: parsed.seq,
                        value_len: value.len() as u64,
                        payload: None,
                        origin: values.origin(),
                        level: Some(self.level),
                        expiry,
                        now: values.now(),
                    };
                    if let Placement::Separated { class, payload } = values.place(&ctx)? {
                        let handle =
                            values.add_to(class, parsed.user_key, parsed.seq, value, expiry)?;
                        self.scratch_key.clear();
                        append_internal_key(
                            &mut self.scratch_key,
                            parsed.user_key,
                            parsed.seq,
                            ValueKind::ValueHandle as u8,
                        );
                        self.scratch_handle.clear();
                        StoredHandle::new(handle)
                            .with_payload(payload)
                            .with_expiry(expiry)
                            .encode_to(&mut self.scratch_handle);
                        self.note_handle(&handle);
                        let (_, builder) = self.current.as_mut().expect("opened above");
                        return builder.add(&self.scratch_key, &self.scratch_handle);
                    }
                }
            }
            ValueKind::ValueHandle => {
                let stored = StoredHandle::decode(value, "compaction input", 0)?;
                self.note_handle(&stored.location);
                self.aliases += u64::from(stored.alias);
            }
            ValueKind::Deletion => {}
        }
        let (_, builder) = self.current.as_mut().expect("opened above");
        builder.add(ikey, value)
    }

    fn open_table(&mut self) -> Result<()> {
        let number = self.cfg.next_file_number.fetch_add(1, Ordering::SeqCst);
        let path = self.cfg.dir.join(table_file_name(number));
        self.pending.add(table_file_name(number));
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

    /// Finishes the current table, giving it the range tombstones' part below `upper` (the
    /// next table's first user key; `None`: the rest).
    fn finish_current(&mut self, upper: Option<&[u8]>) -> Result<()> {
        let Some((number, mut builder)) = self.current.take() else {
            return Ok(());
        };
        let lower = self.tombstone_lower.as_deref();
        let mut clipped: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for t in &self.range_tombstones {
            if upper.is_some_and(|u| t.start.as_slice() >= u) {
                // Sorted by start: the rest belong to later tables.
                break;
            }
            let start = match lower {
                Some(l) if t.start.as_slice() < l => l,
                _ => t.start.as_slice(),
            };
            let end = match upper {
                Some(u) if t.end.as_slice() > u => u,
                _ => t.end.as_slice(),
            };
            if start < end {
                builder.add_range_tombstone(start, end, t.seq)?;
                clipped.push((start.to_vec(), end.to_vec()));
            }
        }
        if let Some(u) = upper {
            // Those ending at or before the cut are written whole.
            self.range_tombstones.retain(|t| t.end.as_slice() > u);
            // Those left spanning the cut come first (sorted by start); the next table counts
            // the ones starting in its share.
            self.tombstone_cursor = self
                .range_tombstones
                .partition_point(|t| t.start.as_slice() < u);
            self.tombstone_bytes = 0;
        }
        let done = builder.finish()?;
        let p = &done.properties;
        let points = (p.num_entries > 0).then_some((&p.smallest_key[..], &p.largest_key[..]));
        let Some((smallest, largest)) = table_extent(
            points,
            clipped.iter().map(|(s, e)| (s.as_slice(), e.as_slice())),
        ) else {
            // Opened for an entry or a tombstone, so it holds one.
            return Err(Error::invalid(format!(
                "output table {number} finished with neither entries nor range tombstones"
            )));
        };
        self.bytes_written += done.file_size;
        self.finished.push(NewTable {
            level: self.level,
            // The job places its outputs in the run its plan names (`compaction/job.rs`).
            run: 0,
            meta: TableMeta {
                number,
                file_size: done.file_size,
                smallest,
                largest,
                smallest_seq: p.smallest_seq,
                largest_seq: p.largest_seq,
                num_entries: p.num_entries,
                num_deletions: p.num_deletions,
                dependence: std::mem::take(&mut self.dependence).into_values().collect(),
                aliases: std::mem::take(&mut self.aliases),
                range_deletions: p.range_deletions,
            },
        });
        Ok(())
    }

    /// Finishes the last table and makes every output's directory entry durable. Returns the
    /// key tables and value tables for the version edit, the bytes written, and the files, which
    /// are deleted unless the caller keeps them once the edit is installed.
    pub fn finish(mut self) -> Result<FinishedOutputs> {
        let mut value_tables = Vec::new();
        let mut value_bytes_by_class = [0; MAX_VALUE_CLASSES];
        if let Some(values) = self.separation.take() {
            let done = values.finish_unsynced()?;
            value_tables = done.tables;
            value_bytes_by_class = done.bytes_by_class;
            self.pending.absorb(done.pending);
        }
        // Tombstones after the last entry: tables of their own, cut at a tombstone's start
        // once a table's share reaches the target size (flushes, whose target is unbounded,
        // write one table).
        while let Some(cut) = self.tail_cut() {
            if self.current.is_none() {
                self.open_table()?;
            }
            self.finish_current(Some(&cut))?;
            self.tombstone_lower = Some(cut);
        }
        if self.current.is_none() && !self.range_tombstones.is_empty() {
            // Tombstones and no entry (left): one table holds them.
            self.open_table()?;
        }
        self.finish_current(None)?;
        self.pending.make_durable()?;
        let pending = std::mem::replace(
            &mut self.pending,
            PendingFiles::new(Arc::clone(&self.cfg.fs), self.cfg.dir.clone()),
        );
        Ok(FinishedOutputs {
            key_tables: std::mem::take(&mut self.finished),
            key_bytes: self.bytes_written,
            value_tables,
            value_bytes: value_bytes_by_class.iter().sum(),
            value_bytes_by_class,
            pending,
        })
    }
}

/// What one range tombstone adds to a table: its keys and an entry's bookkeeping.
fn tombstone_size(t: &RangeTombstone) -> u64 {
    (t.start.len() + t.end.len() + 16) as u64
}
