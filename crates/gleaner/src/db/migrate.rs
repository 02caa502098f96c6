//! Moving key ranges between the partitions of a partitioned index tree (docs/architecture.md,
//! "Partitions"): one job that takes every table of either partition whose extent meets a
//! range changing partition, writes the keys that leave into the other partition's L0 and
//! rewrites the rest in place, and installs that with the new routing in one manifest edit. A
//! key's versions thus stay in one partition at every installed version, and a reader sees the
//! old routing with the old tables or the new with the new.
//!
//! Entries move as they are: every version, tombstone and handle (the values stay in their
//! value tables), with its sequence number, so snapshots read what they read before and no
//! record's garbage changes. The tables written are new; in the destination's L0 they hold
//! keys no table there holds (the routing kept them out), which is what lets old sequence
//! numbers sit in L0 above older runs: no key's versions change order.
//!
//! While it runs no flush starts (a flush splits by the routing it started with) and no
//! compaction touches the changing ranges; writes go on into the memtables.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{Counters, DbInner, IDLE_WAIT};
use crate::compaction::split::{PartitionShare, tombstone_pieces};
use crate::compaction::{FlushPart, PendingFiles, RunningCompaction, TableOutputs};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::merge::MergingIterator;
use crate::range_del::{FragmentedTombstones, RangeTombstone};
use crate::table::ReadCtx;
use crate::version::routing::{
    COLD, HOT, KeyRange, MAX_PARTITIONS, MAX_ROUTED_RANGES, Routing, level_in, partition_of_level,
};
use crate::version::{FileMetaData, NewTable, VersionEdit};

/// What a move did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveStats {
    /// Entries (versions and tombstones) moved into the hot partition.
    pub entries_to_hot: u64,
    /// Entries moved into the cold partition.
    pub entries_to_cold: u64,
    /// Key tables read.
    pub tables_read: u64,
    /// Key tables written (the moved entries, and the rest of the tables they left).
    pub tables_written: u64,
    /// Bytes of the key tables written.
    pub bytes_written: u64,
}

/// Clears the flush exclusion when the move ends, however it ends.
struct FlushPause<'a> {
    db: &'a DbInner,
    running: Vec<RunningCompaction>,
}

impl Drop for FlushPause<'_> {
    fn drop(&mut self) {
        let mut st = self.db.state.lock();
        st.moving = false;
        st.running.retain(|r| !self.running.contains(r));
        drop(st);
        self.db.bg_cv.notify_all();
        self.db.progress_cv.notify_all();
    }
}

impl DbInner {
    /// Moves every key whose partition differs between the version's routing and `target`
    /// into its partition under `target`, and installs `target` with the moved tables in one
    /// manifest edit. Waits for a running flush, and for compactions touching the ranges that
    /// change, to finish first.
    ///
    /// Errors: [`Error::InvalidArgument`] when the tree is not partitioned; the database is
    /// closing or read-only; reading or writing a table or the manifest fails (a failed
    /// manifest write makes the database read-only, as a compaction's does).
    pub(super) fn move_to_routing(&self, target: Routing) -> Result<MoveStats> {
        let (version, pause, changed) = {
            let mut st = self.state.lock();
            loop {
                st.check_usable()?;
                if !st.version.is_partitioned() {
                    return Err(Error::invalid(
                        "key ranges move between partitions only in a partitioned index tree \
                         (option `partitioning`)",
                    ));
                }
                if target.ranges().len() > MAX_ROUTED_RANGES {
                    // The manifest refuses more at the next open.
                    return Err(Error::invalid(format!(
                        "a routing of {} key ranges, more than the {MAX_ROUTED_RANGES} a \
                         manifest records: lower `dpkv_trie_bytes` or raise `dpkv_hot_density`",
                        target.ranges().len()
                    )));
                }
                let changed = st.version.routing().changed(&target);
                if changed.is_empty() && *st.version.routing() == target {
                    return Ok(MoveStats::default());
                }
                // No flush in flight, nor a compaction of either partition meeting a range
                // that changes (their outputs would land after the edit, by the old routing).
                let busy = st.moving
                    || st.flush_claimed > 0
                    || st.running.iter().any(|r| {
                        changed
                            .iter()
                            .any(|c| touches(r, c, st.version.tree_levels()))
                    });
                if !busy {
                    st.moving = true;
                    let running = claim_ranges(&mut st, &changed);
                    let pause = FlushPause { db: self, running };
                    break (Arc::clone(&st.version), pause, changed);
                }
                self.progress_cv.wait_for(&mut st, IDLE_WAIT);
            }
        };
        let inputs: Vec<(usize, u64, Arc<FileMetaData>)> = (0..MAX_PARTITIONS)
            .flat_map(|p| version.partition_levels(p))
            .flat_map(|level| {
                version.runs(level).iter().flat_map(move |r| {
                    r.files()
                        .iter()
                        .map(move |f| (level, r.id(), Arc::clone(f)))
                })
            })
            .filter(|(_, _, f)| {
                let (lo, hi) = (user_key(&f.smallest), user_key(&f.largest));
                changed.iter().any(|c| c.meets(Some(lo), Some(hi)))
            })
            .collect();
        let (edit, stats, pending) = self.write_move(&inputs, &changed, &target)?;
        let mut versions = self.versions.lock();
        self.check_open()?;
        let result = versions.log_and_apply(edit);
        pending.keep();
        let installed = match result {
            Ok(v) => v,
            Err(e) => {
                self.set_bg_error(e.clone());
                return Err(e);
            }
        };
        {
            let mut st = self.state.lock();
            st.version = installed;
            self.install_super_version(&st);
        }
        drop(versions);
        drop(pause);
        Counters::add(&self.counters.partition_moves, 1);
        Counters::add(&self.counters.entries_moved_to_hot, stats.entries_to_hot);
        Counters::add(&self.counters.entries_moved_to_cold, stats.entries_to_cold);
        Counters::add(&self.counters.partition_move_bytes, stats.bytes_written);
        Ok(stats)
    }

    /// One tick of the hotness detector: it judges the statistics, and when the hot prefixes
    /// it found route keys otherwise than the version does, the keys move. Nothing without a
    /// detector, or when the tick had too few accesses to judge.
    ///
    /// Errors: those of [`DbInner::move_to_routing`].
    pub(super) fn hotness_tick(&self) -> Result<MoveStats> {
        let Some(detector) = &self.detector else {
            return Ok(MoveStats::default());
        };
        let Some(target) = detector.tick() else {
            return Ok(MoveStats::default());
        };
        if *self.state.lock().version.routing() == target {
            return Ok(MoveStats::default());
        }
        self.move_to_routing(target)
    }

    /// With inline background work: a tick when the access clock says one is due (a clock of
    /// time would not replay), then the work the move left. A failure is logged; the next due
    /// tick tries again.
    pub(super) fn inline_hotness_tick(&self) -> bool {
        let Some(d) = &self.detector else {
            return false;
        };
        if !d.counts_accesses() || !d.tick_due() {
            return false;
        }
        match self.hotness_tick() {
            Ok(_) | Err(Error::Closed) | Err(Error::ReadOnly(_)) => {}
            Err(e) => log::warn!(
                "{}: moving key ranges between partitions failed: {e}",
                self.dir.display()
            ),
        }
        true
    }

    /// The hotness worker: a tick every `dpkv_decay_interval` (or `dpkv_tick_accesses`
    /// accesses), until shutdown. A failed move
    /// is logged and tried again at the next tick (a failed manifest write has made the
    /// database read-only, and the ticks then stop moving anything).
    pub(super) fn hotness_loop(&self) {
        let Some(detector) = &self.detector else {
            return;
        };
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if st.shutting_down {
                        return;
                    }
                    if detector.tick_due() {
                        break;
                    }
                    let wait = if detector.counts_accesses() {
                        IDLE_WAIT
                    } else {
                        detector.until_tick().min(IDLE_WAIT)
                    };
                    self.bg_cv.wait_for(&mut st, wait);
                }
            }
            match self.hotness_tick() {
                Ok(_) | Err(Error::Closed) => {}
                Err(e) => log::warn!(
                    "{}: moving key ranges between partitions failed: {e}",
                    self.dir.display()
                ),
            }
        }
    }

    /// Writes the move's tables: for each input with an entry that leaves, its other entries
    /// in its place, and the leaving entries of every input merged into the other partition's
    /// L0. Returns the edit (with `target`), the figures and the files written.
    fn write_move(
        &self,
        inputs: &[(usize, u64, Arc<FileMetaData>)],
        changed: &[KeyRange],
        target: &Routing,
    ) -> Result<(VersionEdit, MoveStats, PendingFiles)> {
        let ctx = ReadCtx {
            class: IoClass::CompactionRead,
            fill_cache: false,
            readahead: self.opts.compaction_readahead_size(),
            readahead_ramp: false,
        };
        // In L0 each table is a run: what replaces one L0 table, and what joins an L0, is one
        // table whatever its size.
        let out = |level: usize| {
            let target = if level == level_in(partition_of_level(level), 0) {
                u64::MAX
            } else {
                self.opts.key_table_size()
            };
            self.output_config(IoClass::CompactionWrite, target)
        };
        let mut stats = MoveStats::default();
        let mut pending = PendingFiles::new(Arc::clone(&self.fs), self.dir.clone());
        let mut edit = VersionEdit {
            routing: Some(target.clone()),
            ..Default::default()
        };
        // Per destination partition: the leaving entries' iterators and the tombstones that
        // go with them.
        let mut leaving: [Vec<Box<dyn InternalIterator>>; MAX_PARTITIONS] = Default::default();
        let mut leaving_tombstones: [Vec<RangeTombstone>; MAX_PARTITIONS] = Default::default();
        let routed = Arc::new(target.clone());
        for (level, run, f) in inputs {
            let from = partition_of_level(*level);
            let to = other(from);
            let table = self.tables.get(f.number, f.file_size, ctx.class)?;
            stats.tables_read += 1;
            let tombstones: Vec<RangeTombstone> = if f.range_deletions > 0 {
                crate::version::recorded_tombstones(f, &table)?
                    .tombstones()
                    .collect()
            } else {
                Vec::new()
            };
            // Every tombstone meeting a changing range goes along, whether or not an entry of
            // this table leaves: it may cover versions in other tables that do.
            leaving_tombstones[to].extend(clip(&tombstones, changed));
            // What stays of its tombstones: the pieces in its partition under the new routing
            // (the rest covers no key there any more, and would keep a drained partition from
            // emptying).
            let staying_tombstones = tombstone_pieces(target, from, &tombstones);
            let tombstones_stay = staying_tombstones == tombstones;
            // The entries that stay, in a table (or tables) of their own in the input's run.
            let mut staying = TableOutputs::new(out(*level), *level as u32, Vec::new())
                .with_range_tombstones(staying_tombstones);
            let mut left = 0u64;
            let mut it = table.iter(ctx);
            it.seek_to_first()?;
            while it.valid() {
                if target.partition_of(user_key(it.key())) == from {
                    staying.add(it.key(), it.value())?;
                } else {
                    left += 1;
                }
                it.next()?;
            }
            let staying = staying.finish()?;
            if left == 0 && tombstones_stay {
                // Nothing leaves (its extent only spans a range): it stays as it is, and the
                // rewrite is deleted with `staying.pending`.
                continue;
            }
            edit.deleted_files.push((*level as u32, f.number));
            let in_l0 = *level == level_in(from, 0);
            for t in staying.key_tables {
                stats.tables_written += 1;
                stats.bytes_written += t.meta.file_size;
                edit.new_tables.push(NewTable {
                    run: if in_l0 { 0 } else { *run },
                    ..t
                });
            }
            pending.absorb(staying.pending);
            match to {
                HOT => stats.entries_to_hot += left,
                _ => stats.entries_to_cold += left,
            }
            let mut share = PartitionShare::new(
                table.iter(ctx),
                FlushPart {
                    routing: Arc::clone(&routed),
                    partition: to,
                },
            );
            share.seek_to_first()?;
            leaving[to].push(Box::new(share));
        }
        for to in [COLD, HOT] {
            let children = std::mem::take(&mut leaving[to]);
            if children.is_empty() {
                continue;
            }
            let mut merged = MergingIterator::new(children, crate::key::compare_internal);
            merged.seek_to_first()?;
            // The same tombstone may come from several inputs (a copy stays where a move found
            // it): fragmented together, each piece is written once.
            let tombstones: Vec<RangeTombstone> =
                FragmentedTombstones::new(std::mem::take(&mut leaving_tombstones[to]))
                    .tombstones()
                    .collect();
            let mut outputs =
                TableOutputs::new(out(level_in(to, 0)), level_in(to, 0) as u32, Vec::new())
                    .with_range_tombstones(tombstones);
            while merged.valid() {
                outputs.add(merged.key(), merged.value())?;
                merged.next()?;
            }
            let done = outputs.finish()?;
            for t in done.key_tables {
                stats.tables_written += 1;
                stats.bytes_written += t.meta.file_size;
                edit.new_tables.push(t);
            }
            pending.absorb(done.pending);
        }
        Ok((edit, stats, pending))
    }
}

/// The other partition.
fn other(p: usize) -> usize {
    if p == HOT { COLD } else { HOT }
}

/// Whether running compaction `r` touches changing range `c` in either partition.
fn touches(r: &RunningCompaction, c: &KeyRange, tree_levels: usize) -> bool {
    let hi = c.end.clone().unwrap_or_else(past_every_key);
    (0..MAX_PARTITIONS).any(|p| {
        let first = level_in(p, 0);
        r.touches((first, first + tree_levels - 1), &c.start, &hi)
    })
}

/// A key after every user key (longer than the longest allowed, of 0xff bytes): the
/// inclusive end of a range without one.
fn past_every_key() -> Vec<u8> {
    vec![0xff; crate::options::MAX_KEY_SIZE + 1]
}

/// Registers running-compaction entries over every level of both partitions for the span of
/// the changing ranges, so no compaction starts on them while the move runs.
fn claim_ranges(st: &mut super::DbState, changed: &[KeyRange]) -> Vec<RunningCompaction> {
    let lo = changed.first().map(|c| c.start.clone()).unwrap_or_default();
    let hi = changed
        .last()
        .and_then(|c| c.end.clone())
        .unwrap_or_else(past_every_key);
    let levels = st.version.tree_levels();
    let mut claimed = Vec::new();
    for p in 0..MAX_PARTITIONS {
        let first = level_in(p, 0);
        let id = st.next_compaction_id;
        st.next_compaction_id += 1;
        let entry = RunningCompaction {
            id,
            level: first,
            output_level: first + levels - 1,
            lo: lo.clone(),
            hi: hi.clone(),
            runs: (first..first + levels)
                .flat_map(|l| st.version.runs(l).iter().map(move |r| (l, r.id())))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
        };
        st.running.push(entry.clone());
        claimed.push(entry);
    }
    claimed
}

/// The parts of `tombstones` inside the changing ranges: what the moved keys need of them.
fn clip(tombstones: &[RangeTombstone], changed: &[KeyRange]) -> Vec<RangeTombstone> {
    let mut out = Vec::new();
    for t in tombstones {
        for c in changed {
            let start = t.start.as_slice().max(c.start.as_slice());
            let end = match &c.end {
                Some(e) => t.end.as_slice().min(e.as_slice()),
                None => t.end.as_slice(),
            };
            if start < end {
                out.push(RangeTombstone {
                    start: start.to_vec(),
                    end: end.to_vec(),
                    seq: t.seq,
                });
            }
        }
    }
    out
}
