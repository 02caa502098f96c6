//! NovKV (`papers/novkv.txt`; docs/gc.md, "`novkv`"): collaborative compaction hands GC the
//! identities of the records it made garbage, so a GC job needs no index-tree lookup and writes
//! nothing back into the index tree.
//!
//! The roles:
//! - **hooks**: flushes and compactions write the *drop keys* `(user key, record sequence)` of
//!   the handles they drop to a drop file, attached to the value tables by their own manifest
//!   edit (`compaction/drop_keys.rs`);
//! - **picker** ([`ValidRatePicker`]): tables whose valid rate (records not yet garbage ÷
//!   records, both in memory) is below `novkv_valid_threshold`, lowest first, whose garbage the
//!   drop keys cover;
//! - **oracle** ([`DropKeyOracle`]): a record is garbage exactly when its `(key, seq)` is in the
//!   drop set the job read from its victims' drop blocks ([`DropSet`]); no lookup;
//! - one class of outputs, written in key order (every value table is sorted, so every output
//!   is the paper's SVTable), and inheritance: handles naming a victim resolve by key in its
//!   outputs (the paper's search on an epoch mismatch).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use super::job::Validity;
use super::oracle::{OracleEnv, RecordRef, ValidityOracle};
use super::picker::{PickContext, VictimCandidate, VictimPicker};
use super::policy::{CommitStyle, CompactionHooks, GcReadMode, PolicySet};
use super::router::SingleClass;
use crate::compaction::DropListener;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::options::Options;
use crate::version::DropBlock;

/// The drop keys of a job's victims: the identities of their garbage records.
#[derive(Debug, Default)]
pub struct DropSet {
    keys: HashSet<(Vec<u8>, SeqNo)>,
    /// The blocks read (each once, though several victims may list it).
    blocks: BTreeSet<DropBlock>,
    /// Keys in those blocks, duplicates included.
    keys_read: u64,
    /// Bytes of those blocks.
    bytes_read: u64,
}

impl DropSet {
    /// Reads `blocks` (a block listed twice is read once) through `read`, which calls its
    /// callback for every key of the block it is given and fails on damage.
    ///
    /// Errors: those of `read`.
    pub fn load<'b>(
        blocks: impl IntoIterator<Item = &'b DropBlock>,
        mut read: impl FnMut(&DropBlock, &mut dyn FnMut(&[u8], SeqNo)) -> Result<()>,
    ) -> Result<DropSet> {
        let mut set = DropSet::default();
        for b in blocks {
            if !set.blocks.insert(*b) {
                continue;
            }
            let keys = &mut set.keys;
            let mut n = 0u64;
            read(b, &mut |k: &[u8], s| {
                n += 1;
                keys.insert((k.to_vec(), s));
            })?;
            set.keys_read += n;
            set.bytes_read += b.len;
        }
        Ok(set)
    }

    /// True when record `(user_key, seq)` is garbage.
    pub fn contains(&self, user_key: &[u8], seq: SeqNo) -> bool {
        // The set is keyed by owned keys; a borrowed probe would need a custom key type, and
        // one allocation per record read is small next to reading the record.
        self.keys.contains(&(user_key.to_vec(), seq))
    }

    /// Distinct drop keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there is no drop key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The blocks read.
    pub fn blocks(&self) -> &BTreeSet<DropBlock> {
        &self.blocks
    }

    /// Bytes of drop blocks read.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Keys read, duplicates included.
    pub fn keys_read(&self) -> u64 {
        self.keys_read
    }
}

/// NovKV's victim selection: tables whose valid rate is below the threshold, lowest valid rate
/// first (the paper's greedy choice), within the job's input bound. Only tables whose drop
/// blocks hold at least as many keys as the table has garbage records are chosen: garbage
/// counted before the database ran `novkv` has no drop keys, and a job could not tell it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidRatePicker {
    /// Option `novkv_valid_threshold`.
    pub valid_threshold: f64,
}

impl VictimPicker for ValidRatePicker {
    fn pick(&self, candidates: &[VictimCandidate], ctx: &PickContext) -> Vec<u64> {
        // The space throttle's garbage ratio, when set, is the least garbage a victim needs.
        let threshold = ctx
            .garbage_ratio
            .map_or(self.valid_threshold, |g| (1.0 - g).max(0.0));
        let mut eligible: Vec<&VictimCandidate> = candidates
            .iter()
            .filter(|c| {
                c.garbage_records > 0
                    && c.drop_keys >= c.garbage_records
                    && (c.valid_rate() < threshold || c.garbage_records >= c.records)
            })
            .collect();
        eligible.sort_by(|a, b| {
            a.valid_rate()
                .total_cmp(&b.valid_rate())
                .then(a.number.cmp(&b.number))
        });
        let mut total = 0u64;
        let mut out = Vec::new();
        for c in eligible {
            if !out.is_empty() && total.saturating_add(c.file_size) > ctx.max_input {
                break;
            }
            total = total.saturating_add(c.file_size);
            out.push(c.number);
        }
        out
    }
}

/// NovKV's validity check: garbage exactly when the drop set holds the record. Compaction only
/// drops an entry no snapshot can read, so a record a snapshot still reads is never in it.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropKeyOracle;

impl ValidityOracle for DropKeyOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        let set = env.drop_set.ok_or_else(|| {
            Error::invalid("policy `novkv` checked a record without its job's drop set")
        })?;
        Ok(if set.contains(record.user_key, record.seq) {
            Validity::DeadByDropKey
        } else {
            Validity::Live
        })
    }

    fn uses_drop_keys(&self) -> bool {
        true
    }
}

/// Flushes and compactions record drop keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct NovKvHooks;

impl CompactionHooks for NovKvHooks {
    fn drop_listener(&self) -> Option<Box<dyn DropListener + '_>> {
        None
    }

    fn records_drop_keys(&self) -> bool {
        true
    }
}

/// The roles of `novkv`.
pub fn policy_set(opts: &Options) -> PolicySet {
    PolicySet {
        name: opts.gc_policy().name(),
        picker: Box::new(ValidRatePicker {
            valid_threshold: opts.novkv_valid_threshold(),
        }),
        read_mode: GcReadMode::Full,
        oracle: Box::new(DropKeyOracle),
        router: Arc::new(SingleClass),
        commit: CommitStyle::Inheritance,
        hooks: Box::new(NovKvHooks),
        drop_cache: None,
    }
}

/// I/O class under which a job reads its victims' drop blocks: they are part of reading the
/// victims, not a lookup.
pub const DROP_BLOCK_READ_CLASS: IoClass = IoClass::GcIndexRead;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gc::picker::tests::cand;
    use crate::options::GcPolicyKind;

    fn c(number: u64, records: u64, garbage: u64, drop_keys: u64) -> VictimCandidate {
        VictimCandidate {
            records,
            garbage_records: garbage,
            drop_keys,
            ..cand(number, 100, garbage)
        }
    }

    fn ctx(max_input: u64) -> PickContext {
        PickContext {
            max_input,
            garbage_ratio: None,
            latest_seq: 1000,
        }
    }

    #[test]
    fn victims_below_the_valid_rate_lowest_first_and_covered_by_drop_keys() {
        let p = policy_set(&Options::default().with_gc_policy(GcPolicyKind::Novkv));
        assert_eq!(p.name, "novkv");
        assert!(p.hooks.records_drop_keys());
        assert!(p.oracle.uses_drop_keys());
        assert_eq!(p.commit, CommitStyle::Inheritance);
        let cands = [
            c(1, 10, 2, 2),   // valid 0.8: above 0.7
            c(2, 10, 4, 4),   // 0.6
            c(3, 10, 9, 9),   // 0.1
            c(4, 10, 5, 3),   // 0.5, but 2 garbage records without drop keys
            c(5, 10, 10, 12), // 0.0: every record garbage (blocks shared with another table)
            c(6, 10, 0, 0),   // clean
        ];
        assert_eq!(p.picker.pick(&cands, &ctx(1000)), vec![5, 3, 2]);
        assert_eq!(p.picker.pick(&cands, &ctx(150)), vec![5], "bounded");
        // The throttle's ratio lowers the bar to any garbage.
        let urgent = PickContext {
            garbage_ratio: Some(0.0),
            ..ctx(1000)
        };
        assert_eq!(p.picker.pick(&cands, &urgent), vec![5, 3, 2, 1]);
    }

    #[test]
    fn the_drop_set_reads_each_block_once_and_names_exact_versions() {
        let b = |offset| DropBlock {
            file: 9,
            offset,
            len: 10,
            keys: 2,
        };
        let blocks = [b(0), b(10), b(0)];
        let mut reads = Vec::new();
        let set = DropSet::load(&blocks, |blk, each| {
            reads.push(blk.offset);
            if blk.offset == 0 {
                each(b"k", 5);
                each(b"k", 3);
            } else {
                each(b"m", 8);
                each(b"k", 5);
            }
            Ok(())
        })
        .expect("load");
        assert_eq!(reads, vec![0, 10], "a block two victims list is read once");
        assert_eq!(set.len(), 3);
        assert_eq!(set.keys_read(), 4);
        assert_eq!(set.bytes_read(), 20);
        assert!(set.contains(b"k", 5) && set.contains(b"k", 3) && set.contains(b"m", 8));
        assert!(
            !set.contains(b"k", 4),
            "another version of the same key is live"
        );
        assert!(!set.contains(b"m", 5));
        let failed = DropSet::load(&blocks, |_, _| {
            Err(Error::corruption("000009.vdk", 0, "damaged"))
        });
        assert!(failed.expect_err("damage").is_corruption());
    }

    #[test]
    fn the_oracle_answers_from_the_drop_set_alone() {
        let set = DropSet::load(
            &[DropBlock {
                file: 1,
                offset: 0,
                len: 1,
                keys: 1,
            }],
            |_, each| {
                each(b"a", 7);
                Ok(())
            },
        )
        .expect("load");
        let dead = RecordRef {
            user_key: b"a",
            seq: 7,
            location: crate::value::ValueHandle {
                file_number: 3,
                offset: 0,
                len: 20,
            },
        };
        let live = RecordRef { seq: 6, ..dead };
        // The environment's version and tables are never touched: an empty version and a
        // cache over an empty directory would fail any lookup.
        let version = crate::version::Version::new(7);
        let fs: Arc<dyn crate::io::FileSystem> = Arc::new(crate::io::FaultFs::new(1));
        let tables = crate::cache::TableCache::new(
            fs,
            std::path::PathBuf::from("/none"),
            Arc::new(crate::io::IoStats::default()),
            None,
            16,
            false,
        );
        let validity = crate::gc::ValidityContext::new(vec![], 0);
        let env = OracleEnv {
            memtables: &[],
            memtable_seq: 0,
            version: &version,
            tables: &tables,
            validity: &validity,
            ctx: crate::table::ReadCtx {
                class: IoClass::GcLookup,
                fill_cache: false,
                readahead: 0,
            },
            drop_set: Some(&set),
        };
        assert_eq!(
            DropKeyOracle.check(&dead, &env).expect("check"),
            Validity::DeadByDropKey
        );
        assert_eq!(
            DropKeyOracle.check(&live, &env).expect("check"),
            Validity::Live
        );
        let without = OracleEnv {
            drop_set: None,
            ..env
        };
        assert!(DropKeyOracle.check(&dead, &without).is_err());
    }
}
