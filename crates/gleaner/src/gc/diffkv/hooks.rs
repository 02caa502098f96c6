//! DiffKV's merges, in the compactions of the index tree: when a compaction writes one of the
//! two deepest non-empty levels (lazy merge), the medium values of the entries it keeps whose
//! vTables are shallower than its output, tagged for too many sorted runs (scan-optimised
//! merge) or mostly garbage, are read in key order and written into vTables of the output
//! level — one new sorted group — and the entries take the new handles in the same job; the
//! old records become garbage in the compaction's own edit (the engine's relocation,
//! `compaction/relocate.rs`). A trivial move into those levels that would carry such values
//! is rewritten so they merge.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::classes::{CLASS_VTREE, SizeRouter, TableMeta};
use super::vtree::{Tag, VTable, merge_from, merge_level_depths, merges_into, moves, tags};
use crate::compaction::JobStats;
use crate::compaction::hooks::{CompactionContext, EntryHooks, KeptEntry};
use crate::compaction::iterator::{DropEvent, DropListener};
use crate::gc::hooks::CompactionHooks;
use crate::key::ParsedKey;
use crate::value::StoredHandle;
use crate::version::{Version, routing};

/// The merge settings (options `diffkv_max_sorted_runs`, `diffkv_gc_ratio`,
/// `diffkv_merge_levels`).
#[derive(Debug, Clone, Copy)]
pub struct MergeSettings {
    /// Most sorted runs over a key at one merge level before its vTables are tagged.
    pub max_runs: usize,
    /// Garbage ratio that tags a vTable for the next merge through its keys.
    pub gc_ratio: f64,
    /// The deepest non-empty levels whose compactions merge (`diffkv_merge_levels`).
    pub merge_levels: u32,
}

/// The policy's figures, for `stats().gc.policy_stats`.
#[derive(Debug, Default)]
pub struct Figures {
    /// Compactions into the merge levels that moved values.
    pub merges: AtomicU64,
    /// Values they moved, and the bytes of their old records.
    pub values_merged: AtomicU64,
    pub bytes_merged: AtomicU64,
    /// Compactions that left the values where they were (not into the merge levels).
    pub lazy_skips: AtomicU64,
    /// Trivial moves rewritten so their values merge.
    pub trivial_moves_rewritten: AtomicU64,
    /// At the last merge planned: vTables tagged for runs and for garbage, and the most sorted
    /// runs over one key at one merge level.
    pub tagged_runs: AtomicU64,
    pub tagged_garbage: AtomicU64,
    pub max_sorted_runs: AtomicU64,
    /// Since the open: entries merges asked to move because their vTable was tagged, for
    /// runs and for garbage, not because it was shallower than the output (what the tags
    /// cost; a few may stay, `relocations_kept_for_gc`).
    pub moves_for_runs: AtomicU64,
    pub moves_for_garbage: AtomicU64,
}

/// The hooks.
#[derive(Debug)]
pub struct MergeHooks {
    pub settings: MergeSettings,
    pub router: Arc<SizeRouter>,
    pub figures: Figures,
}

/// The vTables of `version` in partition `partition`'s vTree, each at its level there (a vTable
/// GC wrote counts at the deepest level `bottom`; one a flush wrote at L0, whichever
/// partition's), and the numbers of the vTables another partition's compaction wrote: their
/// values' keys have since moved into this partition (docs/architecture.md, "Partitions"), and
/// they merge into this vTree at its first merge through those keys. Tables of other policies
/// are not in the vTree: GC collects them.
fn vtables(version: &Version, partition: usize, bottom: u32) -> (Vec<VTable<'_>>, Vec<u64>) {
    let values = version.values();
    let first = routing::level_in(partition, 0) as u32;
    let mut own = Vec::new();
    let mut foreign = Vec::new();
    for t in values.tables().filter(|t| t.class == CLASS_VTREE) {
        let Some(meta) = TableMeta::of(t) else {
            continue;
        };
        let level = if meta.by_gc {
            bottom
        } else if meta.level == 0 {
            0
        } else if routing::partition_of_level(meta.level as usize) == partition {
            meta.level - first
        } else {
            foreign.push(t.number);
            continue;
        };
        let garbage = values.garbage(t.number).bytes;
        own.push(VTable {
            group: match meta.written_at {
                Some(at) => (at, 0),
                None => (0, t.number),
            },
            live_bytes: t.record_bytes.saturating_sub(garbage),
            number: t.number,
            level,
            smallest: &t.smallest_key,
            largest: &t.largest_key,
            garbage_ratio: if t.record_bytes == 0 {
                0.0
            } else {
                garbage as f64 / t.record_bytes as f64
            },
        });
    }
    (own, foreign)
}

/// What one merging compaction moves: the vTables whose values it moves, with the tag that
/// moves them if not their level.
struct MergePlan {
    from: HashMap<u64, Option<Tag>>,
}

/// The vTables a compaction writing `output_level` of `version` moves values out of, or
/// `None` when it does not merge (lazy merge). Each partition of a partitioned tree has a
/// vTree of its own, whose levels mirror its tree's: the plan counts levels within the
/// output's partition.
fn plan(
    version: &Version,
    output_level: u32,
    settings: MergeSettings,
    figures: &Figures,
) -> Option<MergePlan> {
    let partition = routing::partition_of_level(output_level as usize);
    let first = routing::level_in(partition, 0);
    let output_level = output_level - first as u32;
    let deepest = version
        .deepest_nonempty_level_of(partition)
        .map(|l| u32::try_from(l - first).unwrap_or(u32::MAX));
    if !merges_into(output_level, deepest, settings.merge_levels) {
        return None;
    }
    let bottom = deepest.unwrap_or(0).max(output_level);
    let (tables, foreign) = vtables(version, partition, bottom);
    let from_level = merge_from(Some(bottom), settings.merge_levels);
    let depths = merge_level_depths(&tables, from_level);
    let tagged = tags(&tables, from_level, settings.max_runs, settings.gc_ratio);
    let count = |tag| tagged.values().filter(|t| **t == tag).count() as u64;
    figures.tagged_runs.store(count(Tag::Runs), Ordering::Relaxed);
    figures
        .tagged_garbage
        .store(count(Tag::Garbage), Ordering::Relaxed);
    let most = depths.values().copied().max().unwrap_or(0);
    figures
        .max_sorted_runs
        .store(most as u64, Ordering::Relaxed);
    let moving: Vec<&VTable<'_>> = tables
        .iter()
        .filter(|t| moves(t, output_level, tagged.contains_key(&t.number)))
        .collect();
    Some(MergePlan {
        from: moving
            .iter()
            .map(|t| {
                let by_level = t.level < output_level;
                let tag = tagged.get(&t.number).copied().filter(|_| !by_level);
                (t.number, tag)
            })
            .chain(foreign.into_iter().map(|n| (n, None)))
            .collect(),
    })
}

impl CompactionHooks for MergeHooks {
    /// Merges move the values of the tables a merge plan names.
    fn relocates_values(&self) -> bool {
        true
    }

    fn begin<'a>(&'a self, ctx: &CompactionContext<'a>) -> Option<Box<dyn EntryHooks + 'a>> {
        if ctx.input_level.is_none() || ctx.trivial_move {
            return None;
        }
        let Some(MergePlan { from, .. }) = plan(ctx.version, ctx.output_level, self.settings, &self.figures)
        else {
            self.figures.lazy_skips.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        (!from.is_empty()).then(|| {
            Box::new(Merging {
                from,
                figures: &self.figures,
            }) as Box<dyn EntryHooks + 'a>
        })
    }

    /// A table moved into a merge level whose handles name vTables that merge is rewritten.
    fn allows_trivial_move(&self, ctx: &CompactionContext<'_>) -> bool {
        let Some(MergePlan { from }) = plan(ctx.version, ctx.output_level, self.settings, &self.figures)
        else {
            return true;
        };
        let merges = ctx.named_value_tables.iter().any(|n| from.contains_key(n));
        if merges {
            self.figures
                .trivial_moves_rewritten
                .fetch_add(1, Ordering::Relaxed);
        }
        !merges
    }

    fn compaction_finished(&self, ctx: &CompactionContext<'_>, stats: &JobStats) {
        let r = &stats.relocation;
        if ctx.input_level.is_some() && r.relocated + r.inlined > 0 {
            let f = &self.figures;
            f.merges.fetch_add(1, Ordering::Relaxed);
            f.values_merged
                .fetch_add(r.relocated + r.inlined, Ordering::Relaxed);
            f.bytes_merged
                .fetch_add(r.relocated_bytes, Ordering::Relaxed);
        }
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        let f = &self.figures;
        let p = &self.router.placed;
        [
            ("diffkv_placed_small", &p.small),
            ("diffkv_placed_medium", &p.medium),
            ("diffkv_placed_large", &p.large),
            ("diffkv_merges", &f.merges),
            ("diffkv_values_merged", &f.values_merged),
            ("diffkv_bytes_merged", &f.bytes_merged),
            ("diffkv_lazy_skips", &f.lazy_skips),
            ("diffkv_trivial_moves_rewritten", &f.trivial_moves_rewritten),
            ("diffkv_tagged_runs", &f.tagged_runs),
            ("diffkv_tagged_garbage", &f.tagged_garbage),
            ("diffkv_max_sorted_runs", &f.max_sorted_runs),
            ("diffkv_moves_for_runs", &f.moves_for_runs),
            ("diffkv_moves_for_garbage", &f.moves_for_garbage),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
        .collect()
    }
}

/// The kept-entry hook of one merging compaction.
struct Merging<'a> {
    /// The vTables whose values move, with the tag that moves them if not their level.
    from: HashMap<u64, Option<Tag>>,
    figures: &'a Figures,
}

impl DropListener for Merging<'_> {
    fn on_drop(&mut self, _: &DropEvent<'_>) {}

    /// Merging decides kept entries only: a table dropped whole keeps none.
    fn accepts_whole_table(&self, _: &crate::version::TableMeta) -> bool {
        true
    }
}

impl EntryHooks for Merging<'_> {
    fn kept(&mut self, _: &ParsedKey<'_>, handle: &StoredHandle) -> KeptEntry {
        let Some(tag) = self.from.get(&handle.location.file_number) else {
            return KeptEntry::Keep;
        };
        match tag {
            Some(Tag::Runs) => self.figures.moves_for_runs.fetch_add(1, Ordering::Relaxed),
            Some(Tag::Garbage) => self.figures.moves_for_garbage.fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        KeptEntry::Relocate
    }
}
