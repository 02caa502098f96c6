//! RocksDB's integrated BlobDB GC (`compaction_iterator.cc` `GarbageCollectBlobIfNeeded`,
//! `blob_garbage_meter.cc`, `version_set.cc` `ComputeFilesMarkedForForcedBlobGC`): there is no
//! GC job. Compactions relocate the values of the entries they keep whose handle names one of
//! the oldest `blobdb_age_cutoff` of the value tables (by file number) into value tables of
//! their own, and count the old records as garbage in their own edit (RocksDB's garbage meter:
//! what a compaction read from a file minus what it wrote back to it). A value table goes once
//! every record of it is garbage, that is once no key table references it. With
//! `blobdb_force_threshold` below 1, when the garbage of the tables within the age cutoff reaches
//! that fraction of their bytes, the key tables that reference the oldest value table are marked
//! for compaction, after every compaction the tree's shape asks for (RocksDB 9.7's rule).
//!
//! Its weaknesses, which the benchmarks show and docs/gc.md explains: key ranges that are never
//! compacted pin old tables (facebook/rocksdb #9235); inserts without overwrites relocate the
//! oldest quarter again and again (#11570); forced compactions wait behind every score-based one
//! (#11603).

use std::sync::Arc;

use super::hooks::{CompactionContext, CompactionHooks, EntryHooks, KeptEntry};
use super::oracle::{IndexOracle, LookupKind};
use super::picker::{PickContext, VictimCandidate, VictimPicker};
use super::policy::{CommitStyle, GcReadMode, PolicySet};
use crate::compaction::router::SingleClass;
use crate::compaction::{DropEvent, DropListener};
use crate::key::ParsedKey;
use crate::options::Options;
use crate::value::StoredHandle;
use crate::version::Version;

/// BlobDB runs no GC job: compaction does its work.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJobs;

impl VictimPicker for NoJobs {
    fn pick(&self, _: &[VictimCandidate], _: &PickContext) -> Vec<u64> {
        Vec::new()
    }
}

/// The compaction side of BlobDB: relocation and forced compactions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlobDbHooks {
    /// Fraction of the value tables, oldest first, whose values compactions relocate.
    pub age_cutoff: f64,
    /// Garbage fraction of those tables that marks key tables for compaction (1 = never).
    pub force_threshold: f64,
}

impl BlobDbHooks {
    /// How many of `n` value tables, oldest first, are within the age cutoff.
    fn cutoff_count(&self, n: usize) -> usize {
        // A product of a count and a fraction in [0, 1], so it fits and rounds down.
        ((n as f64) * self.age_cutoff).floor() as usize
    }
}

impl BlobDbHooks {
    /// The values a compaction reading `version` relocates: those of kept entries whose handle
    /// names a live value table numbered below this (the oldest `age_cutoff` of the tables).
    fn relocate_below(&self, version: &Version) -> Option<u64> {
        let tables: Vec<u64> = version.values().tables().map(|t| t.number).collect();
        let count = self.cutoff_count(tables.len());
        // Every table numbered below the first one past the cutoff is old enough.
        match tables.get(count) {
            _ if count == 0 => None,
            Some(&n) => Some(n),
            None => Some(u64::MAX),
        }
    }
}

/// The kept-entry hook of one compaction: relocate what lives in the old tables.
struct Relocating {
    below: u64,
}

impl DropListener for Relocating {
    fn on_drop(&mut self, _: &DropEvent<'_>) {}

    /// Relocation decides kept entries only: a table dropped whole keeps none.
    fn accepts_whole_table(&self, _: &crate::version::TableMeta) -> bool {
        true
    }
}

impl EntryHooks for Relocating {
    fn kept(&mut self, _: &ParsedKey<'_>, handle: &StoredHandle) -> KeptEntry {
        if handle.location.file_number < self.below {
            KeptEntry::Relocate
        } else {
            KeptEntry::Keep
        }
    }
}

impl CompactionHooks for BlobDbHooks {
    /// RocksDB's integrated GC: compactions move the values of the oldest tables.
    fn relocates_values(&self) -> bool {
        true
    }

    /// Compactions that rewrite tables relocate the values of the old value tables; a flush
    /// writes new entries, and a trivial move rewrites nothing (as in RocksDB).
    fn begin<'a>(&'a self, ctx: &CompactionContext<'a>) -> Option<Box<dyn EntryHooks + 'a>> {
        if ctx.input_level.is_none() || ctx.trivial_move {
            return None;
        }
        let below = self.relocate_below(ctx.version)?;
        Some(Box::new(Relocating { below }))
    }

    fn marked_for_compaction(&self, version: &Version) -> Vec<u64> {
        if self.force_threshold >= 1.0 {
            return Vec::new();
        }
        let values = version.values();
        let count = self.cutoff_count(values.len());
        if count == 0 {
            return Vec::new();
        }
        let (mut garbage, mut total) = (0u64, 0u64);
        let mut oldest = None;
        for t in values.tables().take(count) {
            oldest.get_or_insert(t.number);
            garbage += values.garbage(t.number).bytes;
            total += t.record_bytes;
        }
        // RocksDB compares with `>=`, so at a threshold of 0 a database without garbage
        // compacts for ever (facebook/rocksdb #15256); some garbage is required here.
        if garbage == 0 || (garbage as f64) < self.force_threshold * total as f64 {
            return Vec::new();
        }
        let Some(oldest) = oldest else {
            return Vec::new();
        };
        version
            .all_files()
            .filter(|(_, f)| f.dependence.iter().any(|d| d.value_table == oldest))
            .map(|(_, f)| f.number)
            .collect()
    }
}

/// Options only `blobdb` reads: a switch to another policy drops them (docs/gc.md, "Switching
/// policies").
pub const OWN_OPTIONS: &[&str] = &["blobdb_age_cutoff", "blobdb_force_threshold"];

/// The roles of `blobdb`.
pub fn policy_set(opts: &Options) -> PolicySet {
    PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(NoJobs),
        read_mode: GcReadMode::Full,
        // Never consulted (no jobs run); a GC run finds no victim.
        oracle: Box::new(IndexOracle::new(LookupKind::Get)),
        router: Arc::new(SingleClass::new(opts.min_separated_value_size())),
        commit: CommitStyle::Inheritance,
        hooks: Box::new(BlobDbHooks {
            age_cutoff: opts.blobdb_age_cutoff(),
            force_threshold: opts.blobdb_force_threshold(),
        }),
        updates_handles_on_read: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{Dependence, NewTable, TableMeta, ValueTableMeta, VersionEdit};

    fn hooks(age_cutoff: f64, force_threshold: f64) -> BlobDbHooks {
        BlobDbHooks {
            age_cutoff,
            force_threshold,
        }
    }

    /// A version with value tables 10, 20, 30, 40 (100 record bytes each, `garbage` bytes of
    /// garbage in each) and key table 5 referencing table 10, key table 6 referencing 20.
    fn version(garbage: [u64; 4]) -> Version {
        let vt = |number: u64| ValueTableMeta {
            number,
            file_size: 200,
            records: 10,
            record_bytes: 100,
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            smallest_seq: 1,
            largest_seq: 2,
            class: 0,
            policy_meta: None,
            max_expiry: None,
        };
        let kt = |number: u64, value_table: u64, key: &[u8]| NewTable {
            level: 1,
            run: 0,
            meta: TableMeta {
                number,
                file_size: 100,
                smallest: crate::key::make_internal_key(key, 2, crate::key::ValueKind::Value),
                largest: crate::key::make_internal_key(key, 1, crate::key::ValueKind::Value),
                smallest_seq: 1,
                largest_seq: 2,
                num_entries: 1,
                num_deletions: 0,
                dependence: vec![Dependence {
                    value_table,
                    count: 1,
                    bytes: 10,
                }],
                aliases: 0,
                range_deletions: 0,
            },
        };
        let edit = VersionEdit {
            new_value_tables: [10, 20, 30, 40].into_iter().map(vt).collect(),
            new_tables: vec![kt(5, 10, b"a"), kt(6, 20, b"b")],
            value_garbage: [10, 20, 30, 40]
                .into_iter()
                .zip(garbage)
                .filter(|(_, g)| *g > 0)
                .map(|(n, g)| {
                    (
                        n,
                        crate::version::Garbage {
                            records: 1,
                            bytes: g,
                        },
                    )
                })
                .collect(),
            ..Default::default()
        };
        Version::new(7).apply(&edit, "M", 0).expect("apply")
    }

    #[test]
    fn the_oldest_quarter_is_relocated() {
        let v = version([0; 4]);
        assert_eq!(
            hooks(0.25, 1.0).relocate_below(&v),
            Some(20),
            "1 of 4 tables: those below 20"
        );
        assert_eq!(hooks(0.5, 1.0).relocate_below(&v), Some(30));
        assert_eq!(hooks(1.0, 1.0).relocate_below(&v), Some(u64::MAX));
        assert_eq!(hooks(0.2, 1.0).relocate_below(&v), None, "no whole table");
        assert_eq!(hooks(0.0, 1.0).relocate_below(&v), None);
    }

    #[test]
    fn key_tables_of_the_oldest_value_table_are_marked_at_the_threshold() {
        let h = hooks(0.5, 0.3);
        // Tables 10 and 20 are within the cutoff: 60 garbage bytes of 200 reach 0.3.
        assert_eq!(h.marked_for_compaction(&version([40, 20, 0, 0])), vec![5]);
        assert!(
            h.marked_for_compaction(&version([30, 20, 0, 0])).is_empty(),
            "0.25 < 0.3"
        );
        assert!(
            h.marked_for_compaction(&version([20, 20, 90, 90]))
                .is_empty(),
            "the younger tables do not count"
        );
        assert!(
            hooks(0.5, 1.0)
                .marked_for_compaction(&version([100, 100, 0, 0]))
                .is_empty(),
            "1.0 is off"
        );
        assert!(
            hooks(0.5, 0.0)
                .marked_for_compaction(&version([0; 4]))
                .is_empty(),
            "no garbage, nothing to gain"
        );
    }

    #[test]
    fn no_jobs_are_picked() {
        let c = crate::gc::picker::tests::cand(1, 100, 100);
        let ctx = PickContext {
            max_input: 1 << 30,
            garbage_ratio: Some(0.0),
            latest_seq: 10,
        };
        assert!(NoJobs.pick(&[c], &ctx).is_empty());
    }
}
