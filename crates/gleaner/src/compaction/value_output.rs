//! Writes separated values into value tables for flushes, GC jobs and compactions that relocate
//! values, cutting a new table at the target size, only between user keys (so the tables of one
//! run have disjoint key ranges, which inheritance records rely on), one run per value class —
//! and, with `expiry_group_ms`, outside GC jobs, per expiry group of the class (values expiring
//! in the same window of that many milliseconds; those that never expire apart), so that a
//! group's tables expire whole (docs/gc.md, "Expiry-grouped value tables").

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::pending::PendingFiles;
use crate::cache::ValueCache;
use crate::compaction::router::{
    MAX_VALUE_CLASSES, Placement, RouteContext, RouteOrigin, TableOrigin, ValueRouter,
};
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::io::{CountedWriter, FileSystem, IoClass, IoStats, WriteFileOptions};
use crate::table::Compression;
use crate::value::{
    FinishedValueTable, HandlePayload, ValueHandle, ValueTableBuilder, ValueTableBuilderOptions,
};
use crate::version::{MAX_POLICY_TABLE_META, PolicyTableMeta, ValueTableMeta};

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
    /// The name of the GC policy writing: the tag of the metadata its router gives the tables.
    pub policy: Arc<str>,
    /// Width in milliseconds of the expiry groups values are written apart in (option
    /// `expiry_group_ms`); 0 writes them together. GC jobs never group (their outputs are one
    /// run per class, as inheritance needs).
    pub expiry_group_ms: u64,
    /// The database's newest sequence number when the job started (for a flush, that of its
    /// memtables): what the router and the tables' policy metadata measure ages in writes
    /// from ([`RouteContext::now`]).
    pub now: u64,
    /// The value cache every value written is put into (option `prepopulate_value_cache`, for
    /// flushes only); `None` for none.
    pub warm_cache: Option<Arc<ValueCache>>,
}

/// Most expiry groups of one class with a table open at once: a value of another group first
/// finishes the table of the group written to least recently (its later values start another).
pub const MAX_OPEN_EXPIRY_GROUPS: usize = 16;

/// A finished run: its tables, the bytes written, and the files (deleted unless kept).
type FinishedRun = (Vec<ValueTableMeta>, u64, PendingFiles);

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

    /// Appends a record (in internal-key order), whose version expires at `expiry` if it does,
    /// and returns its handle.
    pub fn add(
        &mut self,
        user_key: &[u8],
        seq: u64,
        value: &[u8],
        expiry: Option<u64>,
    ) -> Result<ValueHandle> {
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
        let (offset, len) = builder.add_expiring(user_key, seq, value, expiry)?;
        let handle = ValueHandle {
            file_number: *number,
            offset,
            len,
        };
        if let Some(cache) = &self.cfg.warm_cache {
            // A buffer of the value's own, as the cache's accounting expects. Under a handle
            // no index names unless this job installs: an abandoned table's entries are never
            // asked for, and file numbers are never reused.
            cache.insert(&handle, user_key, seq, Bytes::copy_from_slice(value));
        }
        Ok(handle)
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
        self.bytes_written += done.file_size;
        self.finished.push(finished_meta(number, &done));
        Ok(())
    }

    /// True when no record was added.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Finishes the last table. Returns the tables for the version edit, the bytes written, and
    /// the files, which are deleted unless the caller keeps them once the edit is installed; their
    /// directory entries are not durable yet (the caller syncs the directory once for all of a
    /// job's outputs).
    fn finish(mut self) -> Result<FinishedRun> {
        self.finish_current()?;
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

/// Value tables written in one sorted run per class (and expiry group), the class of each value
/// chosen by the policy's [`ValueRouter`]. Each run has disjoint key ranges; runs of different
/// classes or groups overlap.
pub struct ClassedValueOutputs {
    cfg: ValueOutputConfig,
    router: Arc<dyn ValueRouter>,
    origin: RouteOrigin,
    /// The index-tree level of the entries naming the values ([`TableOrigin::level`]).
    level: Option<u32>,
    /// The runs being written, by class and expiry group, with when each was last written to.
    runs: Vec<OpenRun>,
    /// Runs finished early to bound the open groups ([`MAX_OPEN_EXPIRY_GROUPS`]).
    closed: Vec<(u32, FinishedRun)>,
    /// Values written so far (the clock of `OpenRun::last_used`).
    writes: u64,
}

/// One run of a [`ClassedValueOutputs`].
struct OpenRun {
    class: u32,
    /// The expiry group: the window of `expiry_group_ms` its values expire in; `None` for
    /// values that never expire, and for every value when groups are off.
    group: Option<u64>,
    run: ValueOutputs,
    last_used: u64,
}

/// What [`ClassedValueOutputs::finish`] returns.
pub struct ClassedFinish {
    /// Every table written, by ascending class (so, with hot and cold classes, hot run first).
    pub tables: Vec<ValueTableMeta>,
    /// Bytes written per class.
    pub bytes_by_class: [u64; MAX_VALUE_CLASSES],
    /// The files, deleted unless kept.
    pub pending: PendingFiles,
}

impl ClassedFinish {
    /// Bytes written in all classes.
    pub fn bytes(&self) -> u64 {
        self.bytes_by_class.iter().sum()
    }
}

impl ClassedValueOutputs {
    /// Runs of value tables for values `router` places, written at `origin`.
    pub fn new(cfg: ValueOutputConfig, router: Arc<dyn ValueRouter>, origin: RouteOrigin) -> Self {
        ClassedValueOutputs {
            cfg,
            router,
            origin,
            // A flush writes L0; a compaction says its output level ([`Self::at_level`]).
            level: match origin {
                RouteOrigin::Flush | RouteOrigin::Recovery | RouteOrigin::Write => Some(0),
                RouteOrigin::Gc | RouteOrigin::Compaction => None,
            },
            runs: Vec::new(),
            closed: Vec::new(),
            writes: 0,
        }
    }

    /// The outputs of a compaction writing index level `level`.
    #[must_use]
    pub fn at_level(mut self, level: u32) -> Self {
        self.level = Some(level);
        self
    }

    /// The expiry group of a value expiring at `expiry`.
    fn group_of(&self, expiry: Option<u64>) -> Option<u64> {
        let width = self.cfg.expiry_group_ms;
        if width == 0 || self.origin == RouteOrigin::Gc {
            return None;
        }
        expiry.map(|e| e / width)
    }

    /// Where the values written go.
    pub fn origin(&self) -> RouteOrigin {
        self.origin
    }

    /// The database's newest sequence number when the job started.
    pub fn now(&self) -> u64 {
        self.cfg.now
    }

    /// Asks the router where the value `ctx` describes goes (its origin is this writer's).
    ///
    /// Errors: [`Error::InvalidArgument`] when the router names a class of
    /// [`MAX_VALUE_CLASSES`] or more, or places the value inline where its origin does not
    /// allow it (a policy bug, refused before anything is written).
    pub fn place(&self, ctx: &RouteContext<'_>) -> Result<Placement> {
        debug_assert_eq!(ctx.origin, self.origin);
        let placement = self.router.place(ctx);
        match &placement {
            Placement::Separated { class, .. } if *class as usize >= MAX_VALUE_CLASSES => {
                Err(Error::invalid(format!(
                    "value router {:?} chose class {class}; classes are below {MAX_VALUE_CLASSES}",
                    self.router
                )))
            }
            Placement::Inline if !ctx.origin.may_inline() => Err(Error::invalid(format!(
                "value router {:?} placed a value inline in a {:?} write, which only moves \
                 separated records",
                self.router, ctx.origin
            ))),
            _ => Ok(placement),
        }
    }

    /// Appends a record (in internal-key order), whose version expires at `expiry` if it does,
    /// to the run of `class` (a class [`ClassedValueOutputs::place`] returned) and of its expiry
    /// group, and returns its handle.
    pub fn add_to(
        &mut self,
        class: u32,
        user_key: &[u8],
        seq: u64,
        value: &[u8],
        expiry: Option<u64>,
    ) -> Result<ValueHandle> {
        assert!((class as usize) < MAX_VALUE_CLASSES, "class {class} was not placed");
        let group = self.group_of(expiry);
        self.writes += 1;
        let i = match self
            .runs
            .iter()
            .position(|r| r.class == class && r.group == group)
        {
            Some(i) => i,
            None => {
                let open = self.runs.iter().filter(|r| r.class == class).count();
                if open >= MAX_OPEN_EXPIRY_GROUPS {
                    let lru = (0..self.runs.len())
                        .filter(|&i| self.runs[i].class == class)
                        .min_by_key(|&i| self.runs[i].last_used)
                        .expect("a run of the class is open");
                    let done = self.runs.swap_remove(lru);
                    self.closed.push((class, done.run.finish()?));
                }
                self.runs.push(OpenRun {
                    class,
                    group,
                    run: ValueOutputs::new(self.cfg.clone(), class),
                    last_used: 0,
                });
                self.runs.len() - 1
            }
        };
        let r = &mut self.runs[i];
        r.last_used = self.writes;
        r.run.add(user_key, seq, value, expiry)
    }

    /// Appends a record a GC job moves (in internal-key order), whose version expires at
    /// `expiry` if it does, to the run of the class the router picks and returns its handle.
    ///
    /// Errors: writing fails; as [`ClassedValueOutputs::place`].
    pub fn add(
        &mut self,
        user_key: &[u8],
        seq: u64,
        value: &[u8],
        expiry: Option<u64>,
        payload: Option<&HandlePayload>,
    ) -> Result<ValueHandle> {
        let ctx = RouteContext {
            user_key,
            seq,
            value_len: value.len() as u64,
            payload,
            origin: self.origin,
            level: None,
            expiry,
            now: self.cfg.now,
        };
        match self.place(&ctx)? {
            Placement::Separated { class, .. } => {
                self.add_to(class, user_key, seq, value, expiry)
            }
            Placement::Inline => Err(Error::invalid(format!(
                "value router {:?} placed a value inline where only separated values are \
                 written",
                self.router
            ))),
        }
    }

    /// Finishes every run and makes the tables' directory entries durable.
    pub fn finish(self) -> Result<ClassedFinish> {
        let done = self.finish_unsynced()?;
        done.pending.make_durable()?;
        Ok(done)
    }

    /// Finishes every run, leaving the directory sync to the caller (a flush or compaction syncs
    /// it once for its key and value tables together).
    pub(crate) fn finish_unsynced(self) -> Result<ClassedFinish> {
        let mut done = ClassedFinish {
            tables: Vec::new(),
            bytes_by_class: [0; MAX_VALUE_CLASSES],
            pending: PendingFiles::new(Arc::clone(&self.cfg.fs), self.cfg.dir.clone()),
        };
        let mut finished = self.closed;
        for r in self.runs {
            finished.push((r.class, r.run.finish()?));
        }
        // By class, then in the order the runs were finished.
        finished.sort_by_key(|(class, _)| *class);
        for (class, (mut tables, bytes, files)) in finished {
            let class = class as usize;
            let at = TableOrigin {
                origin: self.origin,
                level: self.level,
                now: self.cfg.now,
            };
            for t in &mut tables {
                // On an error every table written is deleted as the pending files drop.
                t.policy_meta = policy_meta(&*self.router, &self.cfg.policy, t, &at)?;
            }
            done.tables.extend(tables);
            done.bytes_by_class[class] += bytes;
            done.pending.absorb(files);
        }
        Ok(done)
    }
}

/// The manifest's record of value table `number`, just written as `done` says (without policy
/// metadata: [`policy_meta`]).
pub(crate) fn finished_meta(number: u64, done: &FinishedValueTable) -> ValueTableMeta {
    let p = &done.properties;
    ValueTableMeta {
        number,
        file_size: done.file_size,
        records: p.num_records,
        record_bytes: p.record_bytes,
        smallest_key: p.smallest_key.clone(),
        largest_key: p.largest_key.clone(),
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        class: p.class,
        policy_meta: None,
        max_expiry: p.all_records_expire().then_some(p.max_expiry),
    }
}

/// The metadata `router`, of the policy named `policy`, gives `table`, written where and when
/// `at` says, tagged with the policy's name.
///
/// Errors: [`Error::InvalidArgument`] when the router gives more than
/// [`MAX_POLICY_TABLE_META`] bytes (a policy bug).
pub(crate) fn policy_meta(
    router: &dyn ValueRouter,
    policy: &str,
    table: &ValueTableMeta,
    at: &TableOrigin,
) -> Result<Option<PolicyTableMeta>> {
    let Some(data) = router.table_meta(table, at) else {
        return Ok(None);
    };
    if data.len() > MAX_POLICY_TABLE_META {
        return Err(Error::invalid(format!(
            "value router {router:?} gave table {} {} bytes of metadata; at most \
             {MAX_POLICY_TABLE_META} (MAX_POLICY_TABLE_META)",
            table.number,
            data.len()
        )));
    }
    Ok(Some(PolicyTableMeta {
        tag: policy.to_string(),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::compaction::router::{RouteContext, by_size};
    use crate::io::FaultFs;

    /// Gives every table `len` bytes of metadata.
    #[derive(Debug)]
    struct Meta(usize);

    impl ValueRouter for Meta {
        fn class_names(&self) -> &'static [&'static str] {
            &["default"]
        }
        fn place(&self, ctx: &RouteContext<'_>) -> Placement {
            by_size(ctx, 0, 0)
        }
        fn table_meta(&self, _: &ValueTableMeta, at: &TableOrigin) -> Option<Vec<u8>> {
            assert_eq!(at.origin, RouteOrigin::Gc);
            Some(vec![7; self.0])
        }
    }

    fn write(fs: &FaultFs, meta_len: usize) -> Result<ClassedFinish> {
        let cfg = ValueOutputConfig {
            fs: Arc::new(fs.clone()),
            dir: PathBuf::from("/db"),
            stats: Arc::new(IoStats::default()),
            class: IoClass::GcWrite,
            next_file_number: Arc::new(AtomicU64::new(5)),
            target_size: 1 << 20,
            index_compression: Compression::None,
            direct: false,
            policy: Arc::from("mine"),
            expiry_group_ms: 0,
            now: 0,
            warm_cache: None,
        };
        let mut out = ClassedValueOutputs::new(cfg, Arc::new(Meta(meta_len)), RouteOrigin::Gc);
        out.add(b"k", 1, b"value", None, None)?;
        out.finish()
    }

    #[test]
    fn tables_carry_the_routers_metadata_tagged_with_the_policy_within_the_limit() {
        let fs = FaultFs::new(1);
        fs.create_dir_all(Path::new("/db")).expect("dir");
        let done = write(&fs, MAX_POLICY_TABLE_META).expect("at the limit");
        let meta = done.tables[0].policy_meta.as_ref().expect("metadata");
        assert_eq!(
            (meta.tag.as_str(), meta.data.len()),
            ("mine", MAX_POLICY_TABLE_META)
        );
        done.pending.keep();
        let fs = FaultFs::new(2);
        fs.create_dir_all(Path::new("/db")).expect("dir");
        let err = match write(&fs, MAX_POLICY_TABLE_META + 1) {
            Err(e) => e,
            Ok(_) => panic!("metadata over the limit was accepted"),
        };
        assert!(err.to_string().contains("MAX_POLICY_TABLE_META"), "{err}");
        assert!(fs.list_files().is_empty(), "{:?}", fs.list_files());
    }
}
