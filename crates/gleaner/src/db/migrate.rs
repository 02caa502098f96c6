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
//! While it runs no compaction touching the changing ranges starts, and while it writes no
//! flush starts (a flush splits by the routing it started with); writes go on into the
//! memtables ([`MoveGate`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{Counters, DbInner, IDLE_WAIT};
use crate::compaction::split::{PartitionShare, tombstone_pieces};
use crate::compaction::{CompactionPlan, FlushPart, PendingFiles, RunningCompaction, TableOutputs};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQUENCE, make_lookup_key, user_key};
use crate::merge::MergingIterator;
use crate::range_del::{FragmentedTombstones, RangeTombstone};
use crate::table::ReadCtx;
use crate::version::routing::{
    COLD, HOT, KeyRange, MAX_PARTITIONS, MAX_ROUTED_RANGES, Routing, level_in, other_partition,
    partition_of_level,
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

/// A move under way, in the database's state: from the moment it is raised no compaction
/// touching the changing ranges starts, so those running drain while flushes go on; once none
/// is left, flushes pause too (a flush splits by the routing it starts with) until the move is
/// installed. A move thus waits for at most the compactions running when it began and one
/// flush, however busy the tree, and writes stall only if the memtables fill while it writes.
#[derive(Debug)]
pub(super) struct MoveGate {
    /// The key ranges changing partition, sorted.
    changed: Vec<KeyRange>,
    /// The levels of each partition's tree.
    tree_levels: usize,
    /// The move writes its tables: no flush starts.
    flushes_paused: bool,
}

impl MoveGate {
    /// Whether flushes wait for the move.
    pub(super) fn pauses_flushes(&self) -> bool {
        self.flushes_paused
    }

    /// Whether compaction `plan` must wait for the move under way in `st`, if any: it touches
    /// a range changing partition.
    pub(super) fn blocks(st: &super::DbState, plan: &CompactionPlan) -> bool {
        st.move_gate.as_ref().is_some_and(|g| {
            let r = plan.running(0);
            g.changed.iter().any(|c| touches(&r, c, g.tree_levels))
        })
    }
}

/// Lowers the gate and drops the move's claims when the move ends, however it ends.
struct GateGuard<'a> {
    db: &'a DbInner,
    claims: Vec<RunningCompaction>,
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.db.state.lock();
        st.move_gate = None;
        st.running.retain(|r| !self.claims.contains(r));
        drop(st);
        self.db.bg_cv.notify_all();
        self.db.progress_cv.notify_all();
    }
}

/// Keeps moves from starting while a manual compaction runs ([`DbInner::hold_moves`]).
pub(super) struct MoveHold<'a> {
    db: &'a DbInner,
}

impl Drop for MoveHold<'_> {
    fn drop(&mut self) {
        self.db.state.lock().move_holds -= 1;
        self.db.progress_cv.notify_all();
    }
}

impl DbInner {
    /// Keeps moves from starting until the hold is dropped, once a move under way (if any)
    /// has ended: a manual compaction's passes over the partitions then all see one routing.
    ///
    /// Errors: the database is closing or read-only.
    pub(super) fn hold_moves(&self) -> Result<MoveHold<'_>> {
        let mut st = self.state.lock();
        while st.move_gate.is_some() {
            st.check_usable()?;
            self.progress_cv.wait_for(&mut st, IDLE_WAIT);
        }
        st.move_holds += 1;
        Ok(MoveHold { db: self })
    }

    /// Moves every key whose partition differs between the version's routing and `target`
    /// into its partition under `target`, and installs `target` with the moved tables in one
    /// manifest edit. Raises the move gate ([`MoveGate`]) once no other move or manual
    /// compaction runs, then waits for the compactions touching the changing ranges and for a
    /// running flush to finish.
    ///
    /// Errors: [`Error::InvalidArgument`] when the tree is not partitioned, or `target` holds
    /// more ranges than a manifest records; the database is closing or read-only; reading or
    /// writing a table or the manifest fails (a failed manifest write makes the database
    /// read-only, as a compaction's does).
    pub(super) fn move_to_routing(&self, target: Routing) -> Result<MoveStats> {
        let waited = std::time::Instant::now();
        let (version, guard, changed) = {
            let mut st = self.state.lock();
            let changed = loop {
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
                if st.move_gate.is_none() && st.move_holds == 0 {
                    // Only moves change the routing: `changed` holds until the gate is lowered.
                    st.move_gate = Some(MoveGate {
                        changed: changed.clone(),
                        tree_levels: st.version.tree_levels(),
                        flushes_paused: false,
                    });
                    break changed;
                }
                self.progress_cv.wait_for(&mut st, IDLE_WAIT);
            };
            let mut claims: Vec<RunningCompaction> = Vec::new();
            let drained = loop {
                // Claims over every run there is now, renewed as flushes add runs, so pickers
                // plan around the ranges (the gate refuses what they would not).
                st.running.retain(|r| !claims.contains(r));
                claims = claim_ranges(&mut st, &changed);
                if let Err(e) = st.check_usable() {
                    break Err(e);
                }
                let levels = st.version.tree_levels();
                let touching = st
                    .running
                    .iter()
                    .any(|r| !claims.contains(r) && changed.iter().any(|c| touches(r, c, levels)));
                if !touching {
                    let gate = st.move_gate.as_mut().expect("the move's gate is up");
                    gate.flushes_paused = true;
                    if st.flush_claimed == 0 {
                        break Ok(());
                    }
                }
                self.progress_cv.wait_for(&mut st, IDLE_WAIT);
            };
            let guard = GateGuard { db: self, claims };
            if let Err(e) = drained {
                drop(st);
                drop(guard);
                return Err(e);
            }
            (Arc::clone(&st.version), guard, changed)
        };
        Counters::add(
            &self.counters.partition_move_wait_micros,
            waited.elapsed().as_micros() as u64,
        );
        let started = std::time::Instant::now();
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
        drop(guard);
        Counters::add(
            &self.counters.partition_move_micros,
            started.elapsed().as_micros() as u64,
        );
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
            let to = other_partition(from);
            let table = self.tables.get(f.number, f.file_size, ctx.class)?;
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
            if tombstones_stay && !holds_a_key_in(&table, ctx, f, changed)? {
                // Nothing leaves (its extent only spans a range): it stays as it is, unread.
                continue;
            }
            stats.tables_read += 1;
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
            debug_assert!(
                left > 0 || !tombstones_stay,
                "table {} was read for nothing",
                f.number
            );
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

/// Whether key table `f` holds an entry of a key in one of the `changed` ranges: one seek per
/// range meeting its extent, not a read of the table.
fn holds_a_key_in(
    table: &Arc<crate::table::Table>,
    ctx: ReadCtx,
    f: &FileMetaData,
    changed: &[KeyRange],
) -> Result<bool> {
    let (lo, hi) = (user_key(&f.smallest), user_key(&f.largest));
    let mut it = table.iter(ctx);
    for c in changed.iter().filter(|c| c.meets(Some(lo), Some(hi))) {
        it.seek(&make_lookup_key(&c.start, MAX_SEQUENCE))?;
        if it.valid() && c.contains(user_key(it.key())) {
            return Ok(true);
        }
    }
    Ok(false)
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
