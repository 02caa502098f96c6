//! Running a flush or a compaction: merge the inputs, filter them through the compaction
//! iterator, write the survivors, and describe the result as a version edit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::garbage::HandleRewriter;
use super::hooks::{EntryHooks, KeptEntry};
use super::iterator::{CompactionIterator, DropCounter, DropEvent, DropListener};
use super::output::{FinishedOutputs, OutputConfig, TableOutputs};
use super::pending::PendingFiles;
use super::plan::CompactionPlan;
use super::relocate::{AliasTables, RelocationStats, Relocator};
use super::split::{FlushPart, PartitionShare, tombstone_pieces};
use crate::version::routing::{MAX_PARTITIONS, Routing};
use super::value_output::{ClassedValueOutputs, ValueOutputConfig};
use crate::cache::{TableCache, ValueTableCache};
use crate::compaction::router::{RouteOrigin, ValueRouter};
use crate::error::{Error, Result};
use crate::expiry::ReaderTimes;
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, SeqNo, ValueKind, compare_internal};
use crate::memtable::MemTable;
use crate::merge::MergingIterator;
use crate::range_del::FragmentedTombstones;
use crate::table::ReadCtx;
use crate::value::{MAX_HANDLE_LEN, StoredHandle};
use crate::version::routing::{is_l0, level_in};
use crate::version::{Garbage, TableMeta, Version, VersionEdit};

/// Figures of one finished job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobStats {
    /// Input tables (or memtables).
    pub input_files: u64,
    /// Bytes of input tables.
    pub input_bytes: u64,
    /// Output tables.
    pub output_files: u64,
    /// Bytes written to output tables.
    pub output_bytes: u64,
    /// Entries read.
    pub entries_in: u64,
    /// Entries written.
    pub entries_out: u64,
    /// Entries dropped, by reason.
    pub dropped: DropCounter,
    /// Wall time in microseconds.
    pub micros: u64,
    /// Stale value handles pointed at the table now holding their record.
    pub handles_rewritten: u64,
    /// Values relocated to new value tables (the kept-entry hook's `Relocate`).
    pub relocation: RelocationStats,
    /// Aliases dropped because the policy writes none (see `compaction/iterator.rs`).
    pub aliases_dropped: u64,
    /// Input tables dropped whole, without being read: range tombstones of the input cover
    /// every entry of each in its stripe (their entries count among `dropped.range_deleted`).
    pub tables_dropped_whole: u64,
}

impl JobStats {
    /// Adds `other`'s figures to these (the passes of one job).
    pub fn absorb(&mut self, other: &JobStats) {
        // Named whole, so a figure added later is not forgotten here.
        let JobStats {
            input_files,
            input_bytes,
            output_files,
            output_bytes,
            entries_in,
            entries_out,
            dropped,
            micros,
            handles_rewritten,
            relocation,
            aliases_dropped,
            tables_dropped_whole,
        } = other;
        self.input_files += input_files;
        self.input_bytes += input_bytes;
        self.output_files += output_files;
        self.output_bytes += output_bytes;
        self.entries_in += entries_in;
        self.entries_out += entries_out;
        self.dropped.shadowed += dropped.shadowed;
        self.dropped.tombstones += dropped.tombstones;
        self.dropped.range_deleted += dropped.range_deleted;
        self.dropped.expired += dropped.expired;
        self.micros += micros;
        self.handles_rewritten += handles_rewritten;
        self.relocation.relocated += relocation.relocated;
        self.relocation.relocated_bytes += relocation.relocated_bytes;
        self.relocation.inlined += relocation.inlined;
        self.relocation.aliased += relocation.aliased;
        self.relocation.claimed += relocation.claimed;
        self.aliases_dropped += aliases_dropped;
        self.tables_dropped_whole += tables_dropped_whole;
    }
}

/// How often (in kept entries) a job checks whether it was cancelled.
const CANCEL_CHECK_INTERVAL: u64 = 1024;

/// Fans a drop event out to the job's counter, the engine's listeners and the policy's hooks.
struct JobListeners<'a, 'h> {
    counter: &'a mut DropCounter,
    listener: &'a mut dyn DropListener,
    hooks: Option<&'a mut (dyn EntryHooks + 'h)>,
}

impl DropListener for JobListeners<'_, '_> {
    fn on_drop(&mut self, event: &DropEvent<'_>) {
        self.counter.on_drop(event);
        self.listener.on_drop(event);
        if let Some(h) = self.hooks.as_deref_mut() {
            h.on_drop(event);
        }
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "the job's parts, each a different concern"
)]
fn drain<'h, I: InternalIterator>(
    it: &mut CompactionIterator<I>,
    outputs: &mut TableOutputs,
    listener: &mut dyn DropListener,
    mut hooks: Option<&mut (dyn EntryHooks + 'h)>,
    stats: &mut JobStats,
    cancel: Option<&AtomicBool>,
    mut rewriter: Option<&mut HandleRewriter<'_>>,
    mut relocator: Option<&mut Relocator<'_>>,
) -> Result<()> {
    let mut counter = DropCounter::default();
    let mut handle_buf = Vec::with_capacity(MAX_HANDLE_LEN);
    // Flushes (no rewriter) never ask the kept-entry hook: their entries are new.
    let asks_kept = rewriter.is_some();
    it.seek_to_first(&mut JobListeners {
        counter: &mut counter,
        listener,
        hooks: hooks.as_deref_mut(),
    })?;
    while it.valid() {
        if asks_kept {
            let key = ParsedKey::parse(it.key()).ok_or_else(|| {
                Error::corruption("compaction input", 0, "malformed internal key")
            })?;
            let mut value = it.value();
            if let Some(h) = rewriter
                .as_deref_mut()
                .map(|r| r.rewrite(&key, value))
                .transpose()?
                .flatten()
            {
                handle_buf.clear();
                h.encode_to(&mut handle_buf);
                value = &handle_buf;
            }
            let mut relocated = None;
            if let Some(h) = hooks.as_deref_mut()
                && key.kind == ValueKind::ValueHandle
                && h.decides_kept_entries()
            {
                let stored = StoredHandle::decode(value, "compaction input", 0)?;
                match (h.kept(&key, &stored), relocator.as_deref_mut()) {
                    (KeptEntry::Relocate, Some(r)) => relocated = r.relocate(&key, value)?,
                    (decision, r) => {
                        if let Some(r) = r {
                            r.keep(&key, &stored);
                        }
                        if let KeptEntry::SetPayload(p) = decision
                            && p != stored.payload
                        {
                            handle_buf.clear();
                            stored.with_payload(p).encode_to(&mut handle_buf);
                            value = &handle_buf;
                        }
                    }
                }
            }
            match relocated {
                Some((ikey, moved)) => outputs.add(ikey, moved)?,
                None => outputs.add(it.key(), value)?,
            }
        } else {
            outputs.add(it.key(), it.value())?;
        }
        stats.entries_out += 1;
        if stats.entries_out.is_multiple_of(CANCEL_CHECK_INTERVAL)
            && cancel.is_some_and(|c| c.load(Ordering::Relaxed))
        {
            // The outputs are abandoned (deleted) when `outputs` drops.
            return Err(Error::Closed);
        }
        it.next(&mut JobListeners {
            counter: &mut counter,
            listener,
            hooks: hooks.as_deref_mut(),
        })?;
    }
    stats.dropped = counter;
    stats.entries_in = stats.entries_out
        + counter.shadowed
        + counter.tombstones
        + counter.range_deleted
        + counter.expired
        - it.expired_replaced();
    Ok(())
}

/// How a flush separates values: those the policy's `router` separates go to value tables
/// written with `values`, in the classes it chooses.
pub struct Separation {
    /// Where and how value tables are written.
    pub values: ValueOutputConfig,
    /// The policy's value router.
    pub router: Arc<dyn ValueRouter>,
    /// [`RouteOrigin::Flush`], or [`RouteOrigin::Recovery`] for the WALs replayed at open.
    pub origin: RouteOrigin,
}

/// Writes the memtables (oldest first) into one or more L0 tables, separating values as
/// `separation` says when it is given. Shadowed versions no snapshot needs are dropped (before
/// separation, so they never reach a value table); tombstones are kept (older data may sit
/// below); with `drop_aliases`, aliases are dropped (see `compaction/iterator.rs`). With
/// `part`, only the keys it routes to its partition are written, into that partition's L0, and
/// every range tombstone (each partition needs those covering its keys, and one covering none
/// of them covers nothing there).
pub fn flush_memtables(
    mems: &[Arc<MemTable>],
    readers: ReaderTimes,
    out: OutputConfig,
    separation: Option<Separation>,
    listener: &mut dyn DropListener,
    drop_aliases: bool,
    part: Option<FlushPart>,
) -> Result<(FinishedOutputs, JobStats)> {
    let start = Instant::now();
    let snapshots = readers.sequences();
    let children: Vec<Box<dyn InternalIterator>> = mems
        .iter()
        .map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>)
        .collect();
    let merged = MergingIterator::new(children, compare_internal);
    let level = part.as_ref().map_or(0, |p| level_in(p.partition, 0)) as u32;
    let merged: Box<dyn InternalIterator> = match part.clone() {
        Some(p) => Box::new(PartitionShare::new(merged, p)),
        None => Box::new(merged),
    };
    let parts: Vec<_> = mems.iter().filter_map(|m| m.range_tombstones()).collect();
    let tombstones = FragmentedTombstones::union(&parts);
    // Every tombstone stays: older data may sit below; with partitions, the pieces of it in
    // this pass's partition (the others cover no key of it).
    let mut kept = tombstones
        .as_ref()
        .map(|t| t.collapse(&snapshots, |_, _| false))
        .unwrap_or_default();
    if let Some(p) = &part {
        kept = tombstone_pieces(&p.routing, p.partition, &kept);
    }
    let mut it = CompactionIterator::new(merged, snapshots, Box::new(|_| false), "memtable".into())
        .dropping_aliases(drop_aliases)
        .with_range_tombstones(tombstones)
        .with_reader_times(readers);
    let mut outputs = TableOutputs::new(out, level, Vec::new()).with_range_tombstones(kept);
    if let Some(sep) = separation {
        let values = ClassedValueOutputs::new(sep.values, sep.router, sep.origin);
        outputs = outputs.with_separation(values);
    }
    let mut stats = JobStats {
        input_files: mems.len() as u64,
        ..Default::default()
    };
    drain(
        &mut it,
        &mut outputs,
        listener,
        None,
        &mut stats,
        None,
        None,
        None,
    )?;
    stats.aliases_dropped = it.aliases_dropped();
    stats.entries_in += stats.aliases_dropped;
    let done = outputs.finish()?;
    stats.output_files = (done.key_tables.len() + done.value_tables.len()) as u64;
    stats.output_bytes = done.key_bytes + done.value_bytes;
    stats.micros = start.elapsed().as_micros() as u64;
    Ok((done, stats))
}

/// [`flush_memtables`] into a tree routed by `routing` (`None`: unpartitioned, one pass):
/// one pass per partition, each writing its share into its partition's L0 with outputs and
/// value separation of its own (`out` and `separation` are asked once a pass), and their
/// outputs and figures together.
#[allow(clippy::too_many_arguments)]
pub fn flush_split(
    mems: &[Arc<MemTable>],
    readers: ReaderTimes,
    mut out: impl FnMut() -> OutputConfig,
    mut separation: impl FnMut() -> Option<Separation>,
    listener: &mut dyn DropListener,
    drop_aliases: bool,
    routing: Option<Arc<Routing>>,
) -> Result<(FinishedOutputs, JobStats)> {
    let Some(routing) = routing else {
        return flush_memtables(mems, readers, out(), separation(), listener, drop_aliases, None);
    };
    let mut all: Option<(FinishedOutputs, JobStats)> = None;
    for partition in 0..MAX_PARTITIONS {
        let part = FlushPart {
            routing: Arc::clone(&routing),
            partition,
        };
        let (done, stats) = flush_memtables(
            mems,
            readers.clone(),
            out(),
            separation(),
            listener,
            drop_aliases,
            Some(part),
        )?;
        match all.as_mut() {
            None => all = Some((done, stats)),
            Some((d, s)) => {
                d.absorb(done);
                s.absorb(&stats);
                // The same memtables, read once a pass.
                s.input_files = stats.input_files;
            }
        }
    }
    Ok(all.expect("two partitions"))
}

/// Where a compaction writes the values its policy's hooks relocate
/// ([`KeptEntry::Relocate`]).
pub struct RelocationSetup {
    /// Where and how the new value tables are written.
    pub values: ValueOutputConfig,
    /// The policy's router, which places them.
    pub router: Arc<dyn ValueRouter>,
    /// The value tables GC jobs held when the compaction started: their records stay where
    /// they are (a job may be copying them; see `compaction/garbage.rs`).
    pub claimed: BTreeSet<u64>,
}

/// What a finished compaction produced.
#[derive(Debug)]
pub struct CompactionResult {
    /// The edit that installs it (key tables; value tables written by relocation).
    pub edit: VersionEdit,
    /// Figures.
    pub stats: JobStats,
    /// Its files: keep them once the edit is installed.
    pub pending: PendingFiles,
    /// The old records of relocated values, now garbage, per table: for the garbage
    /// accounting to count in the same edit.
    pub relocated_garbage: BTreeMap<u64, Garbage>,
}

/// Runs a compaction plan against `version` (the version it was picked from, or a newer one
/// that still holds its inputs), passing its entries through the policy's `hooks` (drop events,
/// and the kept-entry decision: values it relocates go where `relocation` says, and none when it
/// is `None`) and dropping
/// aliases with `drop_aliases` (see `compaction/iterator.rs`). Returns the edit that
/// installs the result and its output files (keep them once the edit is installed). When
/// `cancel` is set during the run, the job stops with [`Error::Closed`] and deletes its outputs.
#[expect(
    clippy::too_many_arguments,
    reason = "the job's inputs, each a different concern"
)]
pub fn run_compaction<'h>(
    plan: &CompactionPlan,
    version: &Arc<Version>,
    tables: &TableCache,
    values: &ValueTableCache,
    readers: ReaderTimes,
    out: OutputConfig,
    listener: &mut dyn DropListener,
    hooks: Option<&mut (dyn EntryHooks + 'h)>,
    cancel: Option<&AtomicBool>,
    relocation: Option<RelocationSetup>,
    drop_aliases: bool,
) -> Result<CompactionResult> {
    let start = Instant::now();
    let snapshots = readers.sequences();
    let mut edit = VersionEdit::default();
    let mut stats = JobStats {
        input_files: plan.all_inputs().count() as u64,
        input_bytes: plan.input_bytes(),
        ..Default::default()
    };
    for (level, f) in plan.input_tables() {
        edit.deleted_files.push((level as u32, f.number));
    }
    if let Some((level, key)) = &plan.compact_pointer {
        edit.compact_pointers.push((*level as u32, key.clone()));
    }
    let (output_level, output_run) = (plan.output_level, plan.output_run);
    if plan.trivial_move {
        let f = plan.all_inputs().next().ok_or_else(|| {
            Error::invalid("a trivial move needs its one input table".to_string())
        })?;
        edit.new_tables
            .push(crate::version::set::new_table(output_level, output_run, f));
        stats.micros = start.elapsed().as_micros() as u64;
        // A trivial move rewrites nothing, so it relocates nothing either (as in RocksDB).
        return Ok(CompactionResult {
            edit,
            stats,
            pending: PendingFiles::new(Arc::clone(&out.fs), out.dir.clone()),
            relocated_garbage: BTreeMap::new(),
        });
    }
    let ctx = ReadCtx {
        class: IoClass::CompactionRead,
        fill_cache: false,
        readahead: out.input_readahead,
        readahead_ramp: false,
    };
    // The input's range tombstones, from the tables that hold some (the manifest says which).
    let mut parts = Vec::new();
    for f in plan.all_inputs().filter(|f| f.range_deletions > 0) {
        let table = tables.get(f.number, f.file_size, ctx.class)?;
        parts.push(Arc::clone(crate::version::recorded_tombstones(f, &table)?));
    }
    let tombstones = FragmentedTombstones::union(&parts);
    let mut hooks = hooks;
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    let mut whole = Vec::new();
    for f in plan.all_inputs() {
        // A table the input's tombstones delete entirely is not even opened: its garbage is
        // counted from its dependence, when every listener can
        // (`DropListener::accepts_whole_table`).
        let deleted = f.range_deletions == 0
            && tombstones
                .as_ref()
                .is_some_and(|t| covers_whole_table(t, f, &snapshots))
            && listener.accepts_whole_table(f)
            && hooks.as_ref().is_none_or(|h| h.accepts_whole_table(f));
        if deleted {
            whole.push(f);
        } else {
            let table = tables.get(f.number, f.file_size, ctx.class)?;
            children.push(Box::new(table.iter(ctx)));
        }
    }
    let merged = MergingIterator::new(children, compare_internal);
    // A fragment's oldest-stripe tombstone goes when nothing older than the output can hold a
    // key of its range: the entries it covered here are dropped (they are in its stripe).
    let kept = tombstones
        .as_ref()
        .map(|t| {
            t.collapse(&snapshots, |start, end| {
                version.is_bottommost_for_range(output_level, output_run, start, end)
            })
        })
        .unwrap_or_default();
    let bottom_version = Arc::clone(version);
    let mut it = CompactionIterator::new(
        merged,
        snapshots,
        Box::new(move |uk| bottom_version.is_bottommost_for_key(output_level, output_run, uk)),
        format!("compaction of level {}", plan.level()),
    )
    .dropping_aliases(drop_aliases)
    .with_range_tombstones(tombstones)
    .with_reader_times(readers);
    let mut outputs = TableOutputs::new(out, plan.output_level as u32, plan.grandparents.clone())
        .with_range_tombstones(kept);
    let mut rewriter = HandleRewriter::new(version, values);
    let inputs: Vec<u64> = plan.all_inputs().map(|f| f.number).collect();
    // Only hooks that decide kept entries relocate, and only where the policy says it does
    // (`relocation`); the tables holding aliases are found only then.
    let decides = hooks.as_ref().is_some_and(|h| h.decides_kept_entries());
    let mut relocator = relocation.filter(|_| decides).map(|relocation| {
        let aliases = AliasTables::new(version, &inputs, tables);
        Relocator::new(
            version,
            values,
            plan.output_level as u32,
            relocation.values,
            relocation.router,
            aliases,
        )
        .with_claimed(relocation.claimed)
    });
    drain(
        &mut it,
        &mut outputs,
        listener,
        hooks.as_deref_mut(),
        &mut stats,
        cancel,
        Some(&mut rewriter),
        relocator.as_mut(),
    )?;
    for f in whole {
        listener.on_whole_table(f);
        if let Some(h) = hooks.as_deref_mut() {
            h.on_whole_table(f);
        }
        stats.dropped.range_deleted += f.num_entries;
        stats.entries_in += f.num_entries;
        stats.tables_dropped_whole += 1;
    }
    stats.handles_rewritten = rewriter.rewritten;
    stats.aliases_dropped = it.aliases_dropped();
    stats.entries_in += stats.aliases_dropped;
    let mut relocated_garbage = BTreeMap::new();
    let mut moved = None;
    if let Some(r) = relocator {
        let done = r.finish()?;
        stats.relocation = done.stats;
        relocated_garbage = done.garbage;
        moved = Some(done.values);
    }
    let mut done = outputs.finish()?;
    stats.output_files = done.key_tables.len() as u64;
    stats.output_bytes = done.key_bytes;
    edit.new_tables = done.key_tables;
    for t in &mut edit.new_tables {
        // The outputs join the plan's run; in L0 each is a run of its own.
        t.run = if is_l0(output_level) { 0 } else { output_run };
    }
    if let Some(values) = moved {
        stats.output_files += values.tables.len() as u64;
        stats.output_bytes += values.bytes();
        edit.new_value_tables = values.tables;
        done.pending.absorb(values.pending);
    }
    stats.micros = start.elapsed().as_micros() as u64;
    Ok(CompactionResult {
        edit,
        stats,
        pending: done.pending,
        relocated_garbage,
    })
}

/// True when `fragments` delete every entry of `table` for every reader that could see one: a
/// run of adjacent fragments spans its keys, and each holds a tombstone newer than the table's
/// newest entry in the same snapshot stripe as all of its entries (`snapshots` ascending).
fn covers_whole_table(fragments: &FragmentedTombstones, table: &TableMeta, snapshots: &[SeqNo]) -> bool {
    let stripe = |seq: SeqNo| crate::range_del::stripe(snapshots, seq);
    let entries = stripe(table.smallest_seq);
    if stripe(table.largest_seq) != entries {
        return false;
    }
    let last = table.largest_user_key();
    let mut at = table.smallest_user_key();
    // Each turn moves `at` to a fragment's end, past the fragment before: at most one turn
    // per fragment.
    loop {
        let Some(fragment) = fragments.fragment_at(at) else {
            return false;
        };
        // Newest first: the last one above the table's newest entry is the oldest newer one,
        // whose stripe is the lowest of theirs.
        let newer = fragment.seqs.partition_point(|&t| t > table.largest_seq);
        match fragment.seqs[..newer].last() {
            Some(&t) if stripe(t) == entries => {}
            _ => return false,
        }
        if fragment.end > last {
            return true;
        }
        at = fragment.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;
    use crate::range_del::RangeTombstone;

    fn table(lo: &str, hi: &str, seqs: (SeqNo, SeqNo)) -> TableMeta {
        TableMeta {
            number: 1,
            file_size: 100,
            smallest: make_internal_key(lo.as_bytes(), seqs.1, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), seqs.0, ValueKind::Value),
            smallest_seq: seqs.0,
            largest_seq: seqs.1,
            num_entries: 2,
            num_deletions: 0,
            dependence: Vec::new(),
            aliases: 0,
            range_deletions: 0,
        }
    }

    fn fragments(ts: &[(&str, &str, SeqNo)]) -> FragmentedTombstones {
        FragmentedTombstones::new(ts.iter().map(|&(s, e, seq)| RangeTombstone {
            start: s.as_bytes().to_vec(),
            end: e.as_bytes().to_vec(),
            seq,
        }))
    }

    #[test]
    fn a_table_is_covered_whole_only_by_adjacent_newer_tombstones_in_its_stripe() {
        let t = table("b", "e", (3, 5));
        let joined = fragments(&[("a", "c", 10), ("c", "f", 8)]);
        assert!(covers_whole_table(&joined, &t, &[]));
        assert!(!covers_whole_table(&fragments(&[("a", "e", 10)]), &t, &[]), "the end is exclusive");
        let gap = fragments(&[("a", "c", 10), ("d", "f", 10)]);
        assert!(!covers_whole_table(&gap, &t, &[]), "c..d is not covered");
        let older = fragments(&[("a", "c", 10), ("c", "f", 4)]);
        assert!(!covers_whole_table(&older, &t, &[]), "4 is older than the entry at 5");
        assert!(covers_whole_table(&joined, &t, &[11]), "a snapshot after the tombstones");
        assert!(
            !covers_whole_table(&joined, &t, &[9]),
            "a snapshot before the one at 10 reads b"
        );
        assert!(!covers_whole_table(&joined, &t, &[6]), "a snapshot reads the entries");
        assert!(!covers_whole_table(&joined, &t, &[4]), "a snapshot between the entries");
    }
}
