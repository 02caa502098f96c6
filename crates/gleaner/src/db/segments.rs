//! Values written once (option `separate_at=write`): the value segments of the memtables.
//!
//! Each memtable has its own segments, one per value class (and expiry group) its values are
//! routed to, created as the first value of the class arrives. The write-group leader appends
//! every value the router separates to its segment right after the group's sequence numbers
//! are assigned, and writes the group's log record and memtable entries with the values'
//! handles: a separated value is written once, into the file it stays in. Segment bytes reach
//! the operating system before the log record that names them, and are synced before it when
//! the group syncs, so a recovered handle names a record that is on disk, or a torn tail the
//! recovery cuts (`db/open.rs`).
//!
//! The memtable's flush seals its segments (`value/segment.rs`: a dense index in key order is
//! appended) and installs them with the key tables in its edit; until then readers reach
//! their records through a view the memtable holds (`cache::FileCache::register_open`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::batch::{BatchOp, WriteBatch};
use crate::cache::{ValueCache, ValueTableCache};
use crate::compaction::MAX_OPEN_EXPIRY_GROUPS;
use crate::compaction::router::{
    MAX_VALUE_CLASSES, Placement, RouteContext, RouteOrigin, TableOrigin, ValueRouter,
};
use crate::compaction::value_output::{finished_meta, policy_meta};
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::io::{
    CountedReader, CountedWriter, FileSystem, IoClass, IoStats, ReadFileOptions, WritableFile,
    WriteFileOptions,
};
use crate::key::SeqNo;
use crate::memtable::MemTable;
use crate::table::Compression;
use crate::value::segment::{ScannedSegment, SegmentWriter, scan_segment};
use crate::value::{StoredHandle, ValueHandle, ValueTable, ValueTableBuilderOptions};
use crate::version::{Garbage, ValueTableMeta, Version};

/// Buffer of a segment's writer: values are handed to the operating system at the end of
/// each write group anyway.
const SEGMENT_BUFFER: usize = 256 << 10;

/// What writing and sealing value segments needs, from the database.
pub(super) struct SegmentSink {
    pub fs: Arc<dyn FileSystem>,
    pub dir: PathBuf,
    pub io: Arc<IoStats>,
    pub next_file_number: Arc<AtomicU64>,
    /// Where readers find the open segments.
    pub values: Arc<ValueTableCache>,
    pub router: Arc<dyn ValueRouter>,
    /// The policy's name: the tag of its tables' metadata.
    pub policy: Arc<str>,
    /// Option `expiry_group_ms`.
    pub expiry_group_ms: u64,
    /// Compression of the sealed index blocks.
    pub compression: Compression,
    /// Files created ahead, off the write path ([`SegmentSink::prepare`]): creating a file
    /// costs a write group about as much as its values (inode allocation), under the log's lock.
    pub spare: Mutex<Vec<SpareFile>>,
    /// The value cache every value placed is put into (option `prepopulate_value_cache`).
    pub warm_cache: Option<Arc<ValueCache>>,
}

/// Segment files kept created ahead: enough for the memtables that can fill between two
/// flushes (`max_immutable_memtables` at its default, 2, and the active one) when a router
/// uses two value classes, with room to spare.
const SPARE_FILES: usize = 8;

/// An empty segment file created ahead, with its number and the view readers will use.
pub(super) struct SpareFile {
    number: u64,
    file: Box<dyn WritableFile>,
    view: Arc<ValueTable>,
}

impl SegmentSink {
    /// Creates segment files until [`SPARE_FILES`] are ready: a background thread's work,
    /// so that a write group seldom creates one. Their directory entries become durable with
    /// the next sync that needs them (recovery never looks at a file no logged write names,
    /// and a read-write open deletes it as unreferenced).
    ///
    /// Errors: creating a file fails (writes then create their own).
    pub fn prepare(&self) -> Result<()> {
        while self.spare.lock().len() < SPARE_FILES {
            let f = self.create()?;
            self.spare.lock().push(f);
        }
        Ok(())
    }

    /// Deletes the files created ahead (at close: nothing names them).
    pub fn discard_spares(&self) {
        for f in std::mem::take(&mut *self.spare.lock()) {
            drop(f.file);
            let _ = self
                .fs
                .remove_file(&self.dir.join(value_table_file_name(f.number)));
        }
    }

    /// A segment file: one created ahead, or a new one.
    fn take(&self) -> Result<SpareFile> {
        let spare = self.spare.lock().pop();
        match spare {
            Some(f) => Ok(f),
            None => self.create(),
        }
    }

    fn create(&self) -> Result<SpareFile> {
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        let file = self.fs.new_writable(
            &self.dir.join(value_table_file_name(number)),
            WriteFileOptions {
                direct: false,
                buffer_size: SEGMENT_BUFFER,
            },
        )?;
        let file = Box::new(CountedWriter::new(
            file,
            IoClass::Segment,
            Arc::clone(&self.io),
        ));
        let view = self.values.open_segment(number)?;
        Ok(SpareFile { number, file, view })
    }
}

/// The value segments of one memtable: open while it is written to, sealed by its flush.
#[derive(Default)]
pub(super) struct MemSegments {
    segments: Vec<Segment>,
}

struct Segment {
    class: u32,
    /// The expiry group (`expiry_group_ms`) of its values; `None` for values that never
    /// expire, every value when groups are off, and the values of groups beyond
    /// [`MAX_OPEN_EXPIRY_GROUPS`].
    group: Option<u64>,
    number: u64,
    state: State,
    /// Appended to since the bytes were last handed to the operating system.
    unflushed: bool,
    /// Appended to since the file was last synced.
    unsynced: bool,
    /// Its directory entry is not known to be durable yet.
    entry_unsynced: bool,
}

enum State {
    Open(SegmentWriter),
    /// Sealed by a flush whose edit may not have landed yet (a retried flush installs it).
    Sealed(Option<ValueTableMeta>),
    /// Its writer failed: the database is read-only, and the next open recovers the segment.
    Failed,
}

impl MemSegments {
    /// Places the value of the put `(key, seq, value)`, which expires at `expiry` if it does,
    /// as the router says for a write: appended to this memtable's segment of its class (and
    /// expiry group), with its handle returned and its bytes charged to `mem`; `None` when it
    /// stays in the memtable (the router keeps it inline, or the segment's index is at its
    /// limit: the flush separates it then). `now` is the newest sequence number before the
    /// write group.
    ///
    /// Errors: the router names a class of [`MAX_VALUE_CLASSES`] or more (a policy bug,
    /// refused before anything is written); creating or appending to a segment fails (the
    /// caller makes the database read-only).
    #[allow(clippy::too_many_arguments)]
    pub fn place(
        &mut self,
        sink: &SegmentSink,
        mem: &MemTable,
        key: &[u8],
        seq: SeqNo,
        value: &[u8],
        expiry: Option<u64>,
        now: SeqNo,
    ) -> Result<Option<StoredHandle>> {
        let ctx = RouteContext {
            user_key: key,
            seq,
            value_len: value.len() as u64,
            payload: None,
            origin: RouteOrigin::Write,
            level: Some(0),
            expiry,
            now,
        };
        let (class, payload) = match sink.router.place(&ctx) {
            Placement::Inline => return Ok(None),
            Placement::Separated { class, .. } if class as usize >= MAX_VALUE_CLASSES => {
                return Err(Error::invalid(format!(
                    "value router {:?} chose class {class}; classes are below \
                     {MAX_VALUE_CLASSES}",
                    sink.router
                )));
            }
            Placement::Separated { class, payload } => (class, payload),
        };
        let i = self.segment_for(sink, mem, class, group_of(sink, expiry))?;
        let seg = &mut self.segments[i];
        let State::Open(writer) = &mut seg.state else {
            return Err(Error::invalid(format!(
                "value segment {} of a memtable being written is no longer open",
                seg.number
            )));
        };
        if !writer.has_room(key.len()) {
            return Ok(None);
        }
        let (offset, len) = writer.append(key, seq, value, expiry).inspect_err(|_| {
            seg.state = State::Failed;
        })?;
        seg.unflushed = true;
        seg.unsynced = true;
        mem.charge(value.len() as u64);
        let location = ValueHandle {
            file_number: seg.number,
            offset,
            len,
        };
        if let Some(cache) = &sink.warm_cache {
            // Named by no index entry unless the write group commits; file numbers are never
            // reused.
            cache.insert(&location, key, seq, Bytes::copy_from_slice(value));
        }
        Ok(Some(StoredHandle {
            location,
            record_seq: None,
            alias: false,
            payload,
            expiry,
        }))
    }

    /// The index of the open segment of `class` and `group`, created (and made readable
    /// through `mem`) if there is none. Past [`MAX_OPEN_EXPIRY_GROUPS`] groups of a class, a
    /// new group's values go to the class's segment without a group.
    fn segment_for(
        &mut self,
        sink: &SegmentSink,
        mem: &MemTable,
        class: u32,
        group: Option<u64>,
    ) -> Result<usize> {
        let find = |segs: &[Segment], group| {
            segs.iter()
                .position(|s| s.class == class && s.group == group)
        };
        if let Some(i) = find(&self.segments, group) {
            return Ok(i);
        }
        let groups = self
            .segments
            .iter()
            .filter(|s| s.class == class && s.group.is_some())
            .count();
        let group = if group.is_some() && groups >= MAX_OPEN_EXPIRY_GROUPS {
            if let Some(i) = find(&self.segments, None) {
                return Ok(i);
            }
            None
        } else {
            group
        };
        // Its directory entry is made durable before a synced log record can name it
        // ([`MemSegments::flush`], [`MemSegments::entries_durable`]): recovery must find every
        // segment a synced log record names.
        let SpareFile { number, file, view } = sink.take()?;
        let writer = SegmentWriter::new(file)?;
        mem.hold_segment(view);
        self.segments.push(Segment {
            class,
            group,
            number,
            state: State::Open(writer),
            unflushed: false,
            unsynced: false,
            entry_unsynced: true,
        });
        Ok(self.segments.len() - 1)
    }

    /// Hands the bytes appended since the last call to the operating system (readers see
    /// them) or, with `sync`, makes every byte appended so far durable, and the directory
    /// entries of segments created since the last sync (one directory sync for them all:
    /// segments are created without one, since most writes do not sync).
    pub fn flush(&mut self, sync: bool, sink: &SegmentSink) -> Result<()> {
        self.flush_data(sync)?;
        if sync && self.segments.iter().any(|s| s.entry_unsynced) {
            sink.fs.sync_dir(&sink.dir)?;
            self.entries_durable();
        }
        Ok(())
    }

    /// Notes that the directory was synced after every segment was created (a memtable switch
    /// syncs it for the new log's entry anyway).
    pub fn entries_durable(&mut self) {
        for s in &mut self.segments {
            s.entry_unsynced = false;
        }
    }

    /// As [`MemSegments::flush`], without the directory: the caller syncs it, then calls
    /// [`MemSegments::entries_durable`].
    pub fn flush_data(&mut self, sync: bool) -> Result<()> {
        for seg in &mut self.segments {
            let due = if sync { seg.unsynced } else { seg.unflushed };
            if !due {
                continue;
            }
            let State::Open(writer) = &mut seg.state else {
                continue;
            };
            let done = if sync { writer.sync() } else { writer.flush() };
            if let Err(e) = done {
                seg.state = State::Failed;
                return Err(e);
            }
            seg.unflushed = false;
            seg.unsynced &= !sync;
        }
        Ok(())
    }

    /// Seals every segment (once: a retried flush gets the same tables) and returns the value
    /// tables they became, for the flush's edit. A segment without records is deleted rather
    /// than installed. `now` is the flush's newest sequence number, which the router's table
    /// metadata measures ages from, as for the tables a flush writes.
    ///
    /// Errors: sealing fails (the segments stay on disk: the memtable's log still names
    /// them); a segment's writer failed before.
    pub fn seal(&mut self, sink: &SegmentSink, now: SeqNo) -> Result<Vec<ValueTableMeta>> {
        let mut out = Vec::new();
        for seg in &mut self.segments {
            let state = std::mem::replace(&mut seg.state, State::Failed);
            let meta = match state {
                State::Failed => {
                    return Err(Error::invalid(format!(
                        "value segment {} failed while being written; reopen the database to \
                         recover it",
                        seg.number
                    )));
                }
                State::Sealed(meta) => meta,
                State::Open(writer) if writer.is_empty() => {
                    drop(writer);
                    sink.fs
                        .remove_file(&sink.dir.join(value_table_file_name(seg.number)))?;
                    None
                }
                State::Open(writer) => {
                    let opts = ValueTableBuilderOptions {
                        compression: sink.compression,
                        class: seg.class,
                        ..Default::default()
                    };
                    let done = writer.seal(&opts)?;
                    let mut meta = finished_meta(seg.number, &done);
                    let at = TableOrigin {
                        origin: RouteOrigin::Write,
                        level: Some(0),
                        now,
                    };
                    meta.policy_meta = policy_meta(&*sink.router, &sink.policy, &meta, &at)?;
                    Some(meta)
                }
            };
            out.extend(meta.clone());
            seg.state = State::Sealed(meta);
        }
        Ok(out)
    }

    /// The numbers of the segments: tables the memtable's handles may name.
    pub fn numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.segments.iter().map(|s| s.number)
    }
}

/// The expiry group of a value expiring at `expiry`, as a flush groups them.
fn group_of(sink: &SegmentSink, expiry: Option<u64>) -> Option<u64> {
    let width = sink.expiry_group_ms;
    if width == 0 {
        return None;
    }
    expiry.map(|e| e / width)
}

/// The value segments a crash left open, as the replay of the write-ahead logs meets handles
/// into them (`db/open.rs`): each is scanned once, every replayed handle must name one of its
/// records, and what no replayed write acknowledged is cut off before the segment is sealed.
#[derive(Default)]
pub(super) struct FoundSegments {
    found: BTreeMap<u64, ScannedSegment>,
}

/// The value tables [`FoundSegments::seal_all`] sealed, and the garbage (records no replayed
/// handle named) of each that has some.
pub(super) type SealedSegments = (Vec<ValueTableMeta>, Vec<(u64, Garbage)>);

/// A segment a replayed write names, and where.
struct SegmentClaim<'a> {
    key: &'a [u8],
    seq: SeqNo,
    handle: StoredHandle,
}

impl FoundSegments {
    /// Claims, in the segments they name, the records of the values `batch` wrote as it
    /// arrived (its handles without a record sequence number of their own: a GC write-back or
    /// an alias has one). Returns false when one names no record there: the write was torn
    /// (its value never reached the disk whole), and the batch must not be replayed, nor
    /// anything after it. Segments are scanned the first time a handle names them, through
    /// `fs` in `dir`.
    ///
    /// A segment whose file is missing holds nothing (its entry is made durable only by a sync
    /// that needs it).
    ///
    /// Errors: a handle names a table `version` has installed; `Error::Corruption` from the
    /// scan; I/O errors.
    pub fn claim_batch(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        io: &Arc<IoStats>,
        version: &Version,
        batch: &WriteBatch,
        (file, offset): (&str, u64),
    ) -> Result<bool> {
        let mut claims = Vec::new();
        for (seq, op) in (batch.sequence()..).zip(batch.iter()) {
            let op = op.map_err(|d| Error::corruption(file, offset, d))?;
            if let BatchOp::PutHandle { key, handle } = op {
                let handle = StoredHandle::decode(handle, file, offset)?;
                if handle.record_seq.is_none() && !handle.alias {
                    claims.push(SegmentClaim { key, seq, handle });
                }
            }
        }
        // A batch is replayed whole or not at all: every record checked before any is claimed.
        for c in &claims {
            let l = c.handle.location;
            let seg = match self.found.entry(l.file_number) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    if version.values().readable(l.file_number).is_some() {
                        return Err(Error::corruption(
                            file,
                            offset,
                            format!(
                                "a replayed write names value table {} as a segment still \
                                 open, but the manifest lists it",
                                l.file_number
                            ),
                        ));
                    }
                    e.insert(scan(fs, dir, io, l.file_number)?)
                }
            };
            if !seg.holds(c.key, c.seq, l.offset, l.len) {
                return Ok(false);
            }
        }
        for c in claims {
            let l = c.handle.location;
            let seg = self.found.get_mut(&l.file_number).expect("scanned above");
            let claimed = seg.claim(c.key, c.seq, l.offset, l.len, c.handle.expiry);
            debug_assert!(claimed, "checked above");
        }
        Ok(true)
    }

    /// The numbers of the segments found.
    pub fn numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.found.keys().copied()
    }

    /// Views of the segments found holding records, for a read-only open's readers (nothing
    /// is written; a segment whose file is missing holds none).
    pub fn views(&self, values: &ValueTableCache) -> Result<Vec<Arc<ValueTable>>> {
        self.found
            .iter()
            .filter(|(_, seg)| seg.num_records() > 0)
            .map(|(&n, _)| values.open_segment(n))
            .collect()
    }

    /// Cuts every segment back to the records replayed writes acknowledged (sequence numbers
    /// up to `last_seq`, the last replayed), seals it in place (in class 0: a segment does not
    /// record the class its values were routed to, and replayed values are the default
    /// class's, as a recovery flush writes them) and returns the value tables for the
    /// recovery's edit, with the garbage of records kept that no replayed handle named. A
    /// segment left without records is not installed (the open deletes its file as
    /// unreferenced). `router` and `policy` give the tables their metadata, as written at
    /// `last_seq`.
    pub fn seal_all(
        self,
        fs: &dyn FileSystem,
        dir: &Path,
        io: &Arc<IoStats>,
        (router, policy): (&dyn ValueRouter, &str),
        compression: Compression,
        last_seq: SeqNo,
    ) -> Result<SealedSegments> {
        let mut tables = Vec::new();
        let mut garbage = Vec::new();
        for (number, mut seg) in self.found {
            seg.keep_through(last_seq);
            if seg.num_records() == 0 {
                continue;
            }
            let (records, bytes) = seg.unclaimed();
            let file = fs.reopen_writable(
                &dir.join(value_table_file_name(number)),
                seg.end(),
                WriteFileOptions {
                    direct: false,
                    buffer_size: SEGMENT_BUFFER,
                },
            )?;
            let file = CountedWriter::new(file, IoClass::Segment, Arc::clone(io));
            let writer = SegmentWriter::resume(Box::new(file), seg)?;
            let opts = ValueTableBuilderOptions {
                compression,
                ..Default::default()
            };
            let done = writer.seal(&opts)?;
            let mut meta = finished_meta(number, &done);
            let at = TableOrigin {
                origin: RouteOrigin::Write,
                level: Some(0),
                now: last_seq,
            };
            meta.policy_meta = policy_meta(router, policy, &meta, &at)?;
            tables.push(meta);
            if records > 0 {
                garbage.push((number, Garbage { records, bytes }));
            }
        }
        Ok((tables, garbage))
    }
}

/// Scans open segment `number` in `dir` (its reads counted as recovery's, under the log's
/// class); a missing file holds no record.
fn scan(fs: &dyn FileSystem, dir: &Path, io: &Arc<IoStats>, number: u64) -> Result<ScannedSegment> {
    let name = value_table_file_name(number);
    let path = dir.join(&name);
    if fs.path_kind(&path)?.is_none() {
        // Its directory entry is synced only when a synced write needs it: a crash may lose it
        // while an unsynced log record naming it survives. Nothing in it can be claimed, so the
        // write is torn, or damage if a later record shows it was synced.
        return Ok(ScannedSegment::default());
    }
    let file = CountedReader::new(
        fs.open_readable(&path, ReadFileOptions { direct: false })?,
        Arc::clone(io),
    );
    let size = file.size()?;
    scan_segment(&name, size, |at, len| file.read_vec(at, len, IoClass::Wal))
}
