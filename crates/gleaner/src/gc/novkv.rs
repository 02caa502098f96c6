//! NovKV (`papers/novkv.txt`; docs/gc.md, "`novkv`"): collaborative compaction hands GC the
//! identities of the records it made garbage, so a GC job needs no index-tree lookup and writes
//! nothing back into the index tree.
//!
//! The roles:
//! - **hooks**: flushes and compactions write the *drop keys* `(user key, record sequence)` of
//!   the handles they drop to a drop file, attached to the value tables by their own manifest
//!   edit (`compaction/drop_keys.rs`);
//! - **picker** ([`ValidRatePicker`]): tables whose valid rate (records not yet garbage ÷
//!   records, both in memory) is below `novkv_valid_threshold`, lowest first;
//! - **oracle** ([`DropKeyOracle`]): a record is garbage exactly when its `(key, seq)` is in the
//!   drop set the job read from its victims' drop blocks ([`DropSet`]); no lookup, unless the
//!   victims hold garbage counted under another policy (then records outside the set are
//!   looked up);
//! - one class of outputs, written in key order (every value table is sorted, so every output
//!   is the paper's SVTable), and inheritance: handles naming a victim resolve by key in its
//!   outputs (the paper's search on an epoch mismatch).

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::hooks::CompactionHooks;
use super::job::Validity;
use super::oracle::{IndexOracle, LookupKind, OracleEnv, RecordRef, ValidityOracle};
use super::picker::{PickContext, VictimCandidate, VictimPicker};
use super::policy::{CommitStyle, GcReadMode, PolicySet};
use super::router::SingleClass;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::options::Options;
use crate::version::DropBlock;

/// A drop key as seen by a hash set: the owned form stored, and the borrowed form a lookup
/// builds on the stack, hash and compare alike (both go through [`DropKeyRef::parts`]), so
/// a lookup needs no allocation.
trait DropKeyRef {
    fn parts(&self) -> (&[u8], SeqNo);
}

/// A drop key the set owns.
#[derive(Debug)]
struct OwnedDropKey {
    key: Box<[u8]>,
    seq: SeqNo,
}

impl DropKeyRef for OwnedDropKey {
    fn parts(&self) -> (&[u8], SeqNo) {
        (&self.key, self.seq)
    }
}

impl DropKeyRef for (&[u8], SeqNo) {
    fn parts(&self) -> (&[u8], SeqNo) {
        (self.0, self.1)
    }
}

impl Hash for dyn DropKeyRef + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn DropKeyRef + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn DropKeyRef + '_ {}

impl Hash for OwnedDropKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn DropKeyRef).hash(state);
    }
}

impl PartialEq for OwnedDropKey {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for OwnedDropKey {}

impl<'a> Borrow<dyn DropKeyRef + 'a> for OwnedDropKey {
    fn borrow(&self) -> &(dyn DropKeyRef + 'a) {
        self
    }
}

/// The drop keys of a job's victims: the identities of their garbage records.
#[derive(Debug, Default)]
pub struct DropSet {
    keys: HashSet<OwnedDropKey>,
    /// The blocks read (each once, though several victims may list it).
    blocks: BTreeSet<DropBlock>,
    /// Keys in those blocks, duplicates included.
    keys_read: u64,
    /// Bytes of those blocks.
    bytes_read: u64,
    /// The victims may hold garbage without a drop key (counted while the database ran
    /// another policy): records not in the set are then checked by an index lookup.
    partial: bool,
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
                keys.insert(OwnedDropKey {
                    key: k.into(),
                    seq: s,
                });
            })?;
            set.keys_read += n;
            set.bytes_read += b.len;
        }
        Ok(set)
    }

    /// True when record `(user_key, seq)` is garbage. Allocates nothing: it runs once per
    /// record a job reads.
    pub fn contains(&self, user_key: &[u8], seq: SeqNo) -> bool {
        self.keys.contains(&(user_key, seq) as &dyn DropKeyRef)
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

    /// Marks the set as not covering all of the victims' garbage: the oracle then looks up
    /// the records the set does not hold.
    pub fn set_partial(&mut self) {
        self.partial = true;
    }

    /// True when records outside the set must be looked up ([`DropSet::set_partial`]).
    pub fn is_partial(&self) -> bool {
        self.partial
    }
}

/// NovKV's victim selection: tables whose valid rate is below the threshold, lowest valid rate
/// first (the paper's greedy choice), within the job's input bound. A table's drop keys are not
/// asked: the job reads them, and checks records they do not name by lookups when they cannot
/// cover the garbage ([`DropKeyOracle`]). A picker that required coverage would never collect a
/// table holding garbage counted under another policy, and could not even tell coverage: a
/// block placed through inheritance records is attached to every table that may hold one of
/// its keys, so per-table key counts overstate.
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
/// When the set is partial (the victims hold garbage without drop keys, counted while the
/// database ran another policy), a record it does not hold is checked by the TerarkDB family's
/// index lookup instead; a database that always ran `novkv` never looks anything up.
#[derive(Debug, Clone)]
pub struct DropKeyOracle {
    fallback: IndexOracle,
}

impl DropKeyOracle {
    /// An oracle whose lookups for a partial set are `lookup`s.
    pub fn new(lookup: LookupKind) -> Self {
        DropKeyOracle {
            fallback: IndexOracle::new(lookup),
        }
    }
}

impl ValidityOracle for DropKeyOracle {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        let set = env.drop_set.ok_or_else(|| {
            Error::invalid("policy `novkv` checked a record without its job's drop set")
        })?;
        if set.contains(record.user_key, record.seq) {
            Ok(Validity::DeadByDropKey)
        } else if set.is_partial() {
            self.fallback.check(record, env)
        } else {
            Ok(Validity::Live)
        }
    }

    fn uses_drop_keys(&self) -> bool {
        true
    }
}

/// Flushes and compactions record drop keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct NovKvHooks;

impl CompactionHooks for NovKvHooks {
    fn records_drop_keys(&self) -> bool {
        true
    }
}

/// Options only `novkv` reads: a switch to another policy drops them (docs/gc.md, "Switching
/// policies").
pub const OWN_OPTIONS: &[&str] = &["novkv_valid_threshold"];

/// The roles of `novkv`.
pub fn policy_set(opts: &Options) -> PolicySet {
    PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(ValidRatePicker {
            valid_threshold: opts.novkv_valid_threshold(),
        }),
        read_mode: GcReadMode::Full,
        oracle: Box::new(DropKeyOracle::new(if opts.index_decoupled_enabled() {
            LookupKind::GetKey
        } else {
            LookupKind::Get
        })),
        router: Arc::new(SingleClass::new(opts.min_separated_value_size())),
        commit: CommitStyle::Inheritance,
        hooks: Box::new(NovKvHooks),
        drop_cache: None,
        updates_handles_on_read: true,
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

    fn c(number: u64, records: u64, garbage: u64) -> VictimCandidate<'static> {
        VictimCandidate {
            records,
            garbage_records: garbage,
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
    fn victims_below_the_valid_rate_lowest_first() {
        let p = policy_set(&Options::default().with_gc_policy(GcPolicyKind::Novkv));
        assert_eq!(p.name, "novkv");
        assert!(p.hooks.records_drop_keys());
        assert!(p.oracle.uses_drop_keys());
        assert_eq!(p.commit, CommitStyle::Inheritance);
        let cands = [
            c(1, 10, 2),  // valid 0.8: above 0.7
            c(2, 10, 4),  // 0.6
            c(3, 10, 9),  // 0.1
            c(4, 10, 5),  // 0.5 (whether drop keys cover it is the job's concern)
            c(5, 10, 10), // 0.0: every record garbage
            c(6, 10, 0),  // clean
        ];
        assert_eq!(p.picker.pick(&cands, &ctx(1000)), vec![5, 3, 4, 2]);
        assert_eq!(p.picker.pick(&cands, &ctx(150)), vec![5], "bounded");
        // The throttle's ratio lowers the bar to any garbage.
        let urgent = PickContext {
            garbage_ratio: Some(0.0),
            ..ctx(1000)
        };
        assert_eq!(p.picker.pick(&cands, &urgent), vec![5, 3, 4, 2, 1]);
    }

    #[test]
    fn the_drop_set_reads_each_block_once_and_names_exact_versions() {
        let b = |offset| DropBlock {
            file: 9,
            offset,
            len: 10,
            keys: 2,
            named_table: 4,
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

    /// The borrowed probe and the owned key hash and compare alike (the set's `Borrow`
    /// contract): every stored key is found by a probe built from borrowed bytes, and keys
    /// differing in one byte, in length or in sequence number are not.
    #[test]
    fn borrowed_probes_find_exactly_the_stored_keys() {
        use std::collections::hash_map::DefaultHasher;
        let stored: Vec<(Vec<u8>, SeqNo)> = (0..500u64)
            .map(|i| {
                (
                    format!("k{i}").into_bytes().repeat(1 + (i % 3) as usize),
                    i * 7,
                )
            })
            .collect();
        let set = DropSet::load(
            &[DropBlock {
                file: 1,
                offset: 0,
                len: 1,
                keys: 500,
                named_table: 2,
            }],
            |_, each| {
                for (k, s) in &stored {
                    each(k, *s);
                }
                Ok(())
            },
        )
        .expect("load");
        for (k, s) in &stored {
            let owned = OwnedDropKey {
                key: k.clone().into(),
                seq: *s,
            };
            let hash = |v: &dyn DropKeyRef| {
                let mut h = DefaultHasher::new();
                v.hash(&mut h);
                h.finish()
            };
            let mut h = DefaultHasher::new();
            owned.hash(&mut h);
            assert_eq!(h.finish(), hash(&(k.as_slice(), *s)));
            assert!(set.contains(k, *s));
            assert!(!set.contains(k, s + 1));
            assert!(!set.contains(&k[..k.len() - 1], *s));
            let mut other = k.clone();
            other[0] ^= 1;
            assert!(!set.contains(&other, *s));
        }
    }

    #[test]
    fn the_oracle_answers_from_the_drop_set_alone() {
        let set = DropSet::load(
            &[DropBlock {
                file: 1,
                offset: 0,
                len: 1,
                keys: 1,
                named_table: 3,
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
        // A complete set never touches the environment's version and tables (an empty version
        // and a cache over an empty directory).
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
        let values = crate::cache::ValueTableCache::new(
            Arc::new(crate::io::FaultFs::new(1)),
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
            values: &values,
            validity: &validity,
            ctx: crate::table::ReadCtx {
                class: IoClass::GcLookup,
                fill_cache: false,
                readahead: 0,
            },
            drop_set: Some(&set),
        };
        let oracle = DropKeyOracle::new(LookupKind::Get);
        assert_eq!(
            oracle.check(&dead, &env).expect("check"),
            Validity::DeadByDropKey
        );
        assert_eq!(oracle.check(&live, &env).expect("check"), Validity::Live);
        let without = OracleEnv {
            drop_set: None,
            ..env
        };
        assert!(oracle.check(&dead, &without).is_err());
        // A partial set: a record it does not hold is looked up (the empty tree holds no
        // version of it, so it is garbage); one it holds still needs no lookup.
        let mut partial = DropSet::load(
            &[DropBlock {
                file: 1,
                offset: 0,
                len: 1,
                keys: 1,
                named_table: 3,
            }],
            |_, each| {
                each(b"a", 7);
                Ok(())
            },
        )
        .expect("load");
        partial.set_partial();
        let env = OracleEnv {
            drop_set: Some(&partial),
            ..env
        };
        assert_eq!(oracle.check(&live, &env).expect("check"), Validity::Dead);
        assert_eq!(
            oracle.check(&dead, &env).expect("check"),
            Validity::DeadByDropKey
        );
    }
}
