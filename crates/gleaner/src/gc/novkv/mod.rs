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
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::compaction::router::SingleClass;
use crate::error::{Error, Result};
use crate::filename::value_table_file_name;
use crate::gc::hooks::CompactionHooks;
use crate::gc::oracle::Validity;
use crate::gc::oracle::{
    IndexOracle, JobOracle, JobStart, LookupKind, OracleEnv, RecordRef, ValidityOracle,
};
use crate::gc::picker::{PickContext, VictimCandidate, VictimPicker};
use crate::gc::policy::{CommitStyle, GcReadMode, PolicySet};
use crate::key::SeqNo;
use crate::options::Options;
use crate::version::{DropBlock, Garbage};

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
///
/// Each job reads its victims' drop blocks first ([`ValidityOracle::begin_job`]), then checks its
/// answers against the garbage the version counts (`DropKeyJob`).
#[derive(Debug)]
pub struct DropKeyOracle {
    fallback: IndexOracle,
    /// Tables known to hold garbage their drop keys cannot name: a job's only output, holding
    /// garbage the job copied because it could not tell it (see [`DropKeyJob`]'s `finish`). A
    /// job on one of them looks up the records its set does not hold. Held in memory: after a
    /// reopen the garbage count tells (more garbage than distinct drop keys).
    uncovered: Mutex<BTreeSet<u64>>,
    stats: Arc<NovKvStats>,
}

impl DropKeyOracle {
    /// An oracle whose lookups for a partial set are `lookup`s, counting into `stats`.
    fn new(lookup: LookupKind, stats: Arc<NovKvStats>) -> Self {
        DropKeyOracle {
            fallback: IndexOracle::new(lookup),
            uncovered: Mutex::new(BTreeSet::new()),
            stats,
        }
    }
}

impl ValidityOracle for DropKeyOracle {
    /// Outside a job there is no drop set: the index lookup decides.
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        self.fallback.check(record, env)
    }

    /// Reads the victims' drop keys, from the version pinned after the compactions that started
    /// before the claim committed (their drops are in it): every garbage record counted under
    /// `novkv` has its drop key there, in the same edit as its count.
    fn begin_job<'s>(&'s self, start: &mut JobStart<'_>) -> Result<Box<dyn JobOracle + 's>> {
        let blocks: Vec<DropBlock> = start
            .victims
            .iter()
            .flat_map(|v| start.version.values().drop_blocks(*v))
            .map(|b| b.block)
            .collect();
        let mut set = DropSet::load(&blocks, |b, each| (start.read_drop_block)(b, each))?;
        // Fewer distinct drop keys than garbage records, or a victim known to hold garbage
        // without drop keys: the set cannot name all the garbage, so records outside it are
        // looked up. (More keys than garbage proves nothing: a block placed through
        // inheritance is attached to every table that may hold one of its keys.)
        let uncovered = {
            let u = self.uncovered.lock();
            start.victims.iter().any(|n| u.contains(n))
        };
        if (set.len() as u64) < start.garbage.records || uncovered {
            set.set_partial();
        }
        let victim_bytes = start
            .victims
            .iter()
            .filter_map(|n| start.version.values().live(*n))
            .map(|m| m.file_size)
            .sum();
        Ok(Box::new(DropKeyJob {
            oracle: self,
            set,
            victims: start.victims.to_vec(),
            victim_bytes,
            garbage: start.garbage,
            answers: AtomicU64::new(0),
            answer_bytes: AtomicU64::new(0),
        }))
    }
}

/// The checks of one `novkv` job: its victims' drop set, and its answers so far.
struct DropKeyJob<'s> {
    oracle: &'s DropKeyOracle,
    set: DropSet,
    victims: Vec<u64>,
    /// Bytes of the victims' files.
    victim_bytes: u64,
    /// The victims' garbage, as the pinned version counts it.
    garbage: Garbage,
    /// Records found garbage by their drop keys, and their bytes.
    answers: AtomicU64,
    answer_bytes: AtomicU64,
}

impl DropKeyJob<'_> {
    /// Whether the job copied garbage it could not tell (see `finish`): its set looked
    /// complete but named fewer records than the victims' garbage.
    fn copied_garbage(&self) -> bool {
        !self.set.is_partial() && self.answers.load(Ordering::Relaxed) < self.garbage.records
    }
}

impl JobOracle for DropKeyJob<'_> {
    fn check(&self, record: &RecordRef<'_>, env: &OracleEnv<'_>) -> Result<Validity> {
        if self.set.contains(record.user_key, record.seq) {
            self.answers.fetch_add(1, Ordering::Relaxed);
            self.answer_bytes
                .fetch_add(record.location.len, Ordering::Relaxed);
            Ok(Validity::Dead)
        } else if self.set.is_partial() {
            self.oracle.fallback.check(record, env)
        } else {
            Ok(Validity::Live)
        }
    }

    /// The victims go into one table (the paper's SVTable): every drop block the job hands on
    /// then belongs to that one table, so each table's drop keys identify exactly its own
    /// garbage records.
    fn output_table_size(&self, target: u64) -> u64 {
        target.max(self.victim_bytes.saturating_add(1))
    }

    fn finish(&self, outputs: &[u64]) -> Result<Option<(u64, Garbage)>> {
        let expected = self.garbage;
        let found = self.answers.load(Ordering::Relaxed);
        let found_bytes = self.answer_bytes.load(Ordering::Relaxed);
        let victims = &self.victims;
        let name = || value_table_file_name(victims[0]);
        // Every drop key names a garbage record of the pinned version: more is damage.
        if found > expected.records || found_bytes > expected.bytes {
            return Err(Error::corruption(
                name(),
                0,
                format!(
                    "drop keys of value tables {victims:?} identify {found} records of \
                     {found_bytes} bytes, but their garbage is {} records of {} bytes",
                    expected.records, expected.bytes
                ),
            ));
        }
        // A partial set looked up every record it did not name: every garbage record of the
        // pinned version was dropped (a counted record is referenced by no key-table entry, so
        // no lookup finds it live). A complete one that found less than the garbage was fooled
        // by shared blocks: the rest is garbage without drop keys, copied into the one output,
        // which carries it; the next job on that output looks its records up.
        if self.copied_garbage() {
            let [output] = outputs else {
                return Err(Error::corruption(
                    name(),
                    0,
                    format!(
                        "value tables {victims:?} have {} garbage records, their drop keys \
                         name {found}, and the job wrote {} tables",
                        expected.records,
                        outputs.len()
                    ),
                ));
            };
            return Ok(Some((
                *output,
                Garbage {
                    records: expected.records - found,
                    bytes: expected.bytes - found_bytes,
                },
            )));
        }
        Ok(None)
    }

    fn drop_blocks_read(&self) -> Option<&BTreeSet<DropBlock>> {
        Some(self.set.blocks())
    }

    fn committed(&self, victims: &[u64], outputs: &[u64]) {
        let mut u = self.oracle.uncovered.lock();
        for v in victims {
            u.remove(v);
        }
        if self.copied_garbage() {
            // The one output carries that garbage, which its drop keys cannot tell: the next
            // job on it looks records up.
            u.extend(outputs.iter().copied());
        }
        drop(u);
        let s = &self.oracle.stats;
        s.answers
            .fetch_add(self.answers.load(Ordering::Relaxed), Ordering::Relaxed);
        s.block_bytes_read
            .fetch_add(self.set.bytes_read(), Ordering::Relaxed);
    }
}

/// What `novkv` counts, reported in `stats().gc.policy_stats` (committed jobs only).
#[derive(Debug, Default)]
pub struct NovKvStats {
    /// Records GC jobs found garbage by their drop keys, without any lookup.
    answers: AtomicU64,
    /// Bytes of drop blocks GC jobs read.
    block_bytes_read: AtomicU64,
}

/// Name in `stats().gc.policy_stats` of the records committed GC jobs found garbage by their
/// drop keys, without any lookup.
pub const DROP_KEY_ANSWERS: &str = "drop_key_answers";

/// Name in `stats().gc.policy_stats` of the bytes of drop blocks committed GC jobs read.
pub const DROP_KEY_BYTES_READ: &str = "drop_key_bytes_read";

/// Flushes and compactions record drop keys; the figures of GC jobs.
#[derive(Debug, Default)]
pub struct NovKvHooks {
    stats: Arc<NovKvStats>,
}

impl CompactionHooks for NovKvHooks {
    fn records_drop_keys(&self) -> bool {
        true
    }

    fn stats(&self) -> std::collections::BTreeMap<String, u64> {
        [
            (DROP_KEY_ANSWERS, &self.stats.answers),
            (DROP_KEY_BYTES_READ, &self.stats.block_bytes_read),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.load(Ordering::Relaxed)))
        .collect()
    }
}

/// Options only `novkv` reads: a switch to another policy drops them (docs/gc.md, "Switching
/// policies").
pub const OWN_OPTIONS: &[&str] = &["novkv_valid_threshold"];

/// The roles of `novkv`.
pub fn policy_set(opts: &Options) -> PolicySet {
    let stats = Arc::new(NovKvStats::default());
    PolicySet {
        name: opts.gc_policy().name().to_string(),
        picker: Box::new(ValidRatePicker {
            valid_threshold: opts.novkv_valid_threshold(),
        }),
        read_mode: GcReadMode::Full,
        oracle: Box::new(DropKeyOracle::new(
            if opts.index_decoupled_enabled() {
                LookupKind::GetKey
            } else {
                LookupKind::Get
            },
            Arc::clone(&stats),
        )),
        router: Arc::new(SingleClass::new(opts.min_separated_value_size())),
        commit: CommitStyle::Inheritance,
        hooks: Box::new(NovKvHooks { stats }),
        updates_handles_on_read: true,
    }
}

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
        assert!(p.hooks.stats().contains_key(DROP_KEY_ANSWERS));
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

    /// A value table of 10 records, 3 of them garbage, with a drop block of `keys` keys.
    fn victim(number: u64, keys: u64) -> crate::version::Version {
        let meta = crate::version::ValueTableMeta {
            number,
            file_size: 1000,
            records: 10,
            record_bytes: 200,
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            smallest_seq: 1,
            largest_seq: 99,
            class: 0,
            policy_meta: None,
            max_expiry: None,
        };
        crate::version::Version::new(7)
            .apply(
                &crate::version::VersionEdit {
                    new_value_tables: vec![meta],
                    value_garbage: vec![(
                        number,
                        Garbage {
                            records: 3,
                            bytes: 60,
                        },
                    )],
                    drop_blocks: vec![(
                        number,
                        DropBlock {
                            file: 1,
                            offset: 0,
                            len: 9,
                            keys,
                            named_table: number,
                        },
                    )],
                    ..Default::default()
                },
                "test",
                0,
            )
            .expect("apply")
    }

    /// An environment whose version and tables are empty: a lookup there finds nothing.
    fn with_env(version: &crate::version::Version, f: impl FnOnce(&OracleEnv<'_>)) {
        let cache = |fs: Arc<dyn crate::io::FileSystem>| {
            (
                fs,
                std::path::PathBuf::from("/none"),
                Arc::new(crate::io::IoStats::default()),
            )
        };
        let (fs, dir, io) = cache(Arc::new(crate::io::FaultFs::new(1)));
        let tables = crate::cache::TableCache::new(fs, dir, io, None, 16, false);
        let (fs, dir, io) = cache(Arc::new(crate::io::FaultFs::new(1)));
        let values = crate::cache::ValueTableCache::new(fs, dir, io, None, 16, false);
        let validity = crate::gc::ValidityContext::new(vec![], 0);
        f(&OracleEnv {
            memtables: &[],
            memtable_seq: 0,
            version,
            tables: &tables,
            values: &values,
            validity: &validity,
            ctx: crate::table::ReadCtx {
                class: crate::io::IoClass::GcLookup,
                fill_cache: false,
                readahead: 0,
                readahead_ramp: false,
            },
        });
    }

    fn record(key: &'static [u8], seq: SeqNo) -> RecordRef<'static> {
        RecordRef {
            user_key: key,
            seq,
            location: crate::value::ValueHandle {
                file_number: 3,
                offset: 0,
                len: 20,
            },
            expiry: None,
        }
    }

    /// Begins a job on table 3 of `version`, whose drop block holds `keys`.
    fn begin<'o>(
        oracle: &'o DropKeyOracle,
        version: &crate::version::Version,
        keys: &[(&'static [u8], SeqNo)],
    ) -> Box<dyn JobOracle + 'o> {
        let mut read = |b: &DropBlock, each: &mut dyn FnMut(&[u8], SeqNo)| {
            assert_eq!((b.file, b.named_table), (1, 3));
            keys.iter().for_each(|(k, s)| each(k, *s));
            Ok(())
        };
        oracle
            .begin_job(&mut JobStart {
                version,
                victims: &[3],
                garbage: version.values().garbage(3),
                read_drop_block: &mut read,
            })
            .expect("begin")
    }

    #[test]
    fn a_job_answers_from_its_drop_set_and_checks_the_count() {
        let stats = Arc::new(NovKvStats::default());
        let oracle = DropKeyOracle::new(LookupKind::Get, Arc::clone(&stats));
        let hooks = NovKvHooks {
            stats: Arc::clone(&stats),
        };
        let all: [(&[u8], SeqNo); 3] = [(b"a", 7), (b"b", 8), (b"c", 9)];
        let version = victim(3, 3);
        with_env(&version, |env| {
            // A set naming all the garbage: garbage exactly when named, nothing looked up.
            let job = begin(&oracle, &version, &all);
            assert_eq!(job.check(&record(b"a", 7), env).unwrap(), Validity::Dead);
            assert_eq!(job.check(&record(b"a", 6), env).unwrap(), Validity::Live);
            assert_eq!(job.check(&record(b"q", 1), env).unwrap(), Validity::Live);
            assert_eq!(job.output_table_size(10), 1001, "one output");
            // Fewer answers than garbage in a complete set: the one output carries the rest.
            assert_eq!(
                job.finish(&[20]).expect("finish"),
                Some((
                    20,
                    Garbage {
                        records: 2,
                        bytes: 40
                    }
                ))
            );
            // Nothing counts until the commit.
            assert_eq!(hooks.stats()[DROP_KEY_ANSWERS], 0);
            job.committed(&[3], &[20]);
            assert_eq!(hooks.stats()[DROP_KEY_ANSWERS], 1);
            assert!(job.drop_blocks_read().is_some_and(|b| b.len() == 1));
            // Two outputs could not say which one holds the uncounted garbage.
            let job = begin(&oracle, &version, &all);
            job.check(&record(b"a", 7), env).unwrap();
            assert!(matches!(
                job.finish(&[21, 22]),
                Err(Error::Corruption { .. })
            ));
            // More answers than garbage records is damage.
            let job = begin(&oracle, &version, &all);
            for (k, s) in all {
                job.check(&record(k, s), env).unwrap();
            }
            job.check(&record(b"a", 7), env).unwrap();
            assert!(matches!(job.finish(&[23]), Err(Error::Corruption { .. })));
        });
        // Fewer distinct keys than garbage: records the set does not name are looked up (the
        // empty tree holds no version of them, so they are garbage).
        let version = victim(3, 1);
        with_env(&version, |env| {
            let job = begin(&oracle, &version, &all[..1]);
            assert_eq!(job.check(&record(b"q", 1), env).unwrap(), Validity::Dead);
            assert_eq!(job.check(&record(b"a", 7), env).unwrap(), Validity::Dead);
            assert_eq!(
                job.finish(&[24]).expect("finish"),
                None,
                "a lookup found the rest"
            );
        });
        // The output that carried garbage is looked up in its next job, however many keys.
        let carried = victim(20, 3);
        with_env(&carried, |env| {
            let mut read = |_: &DropBlock, each: &mut dyn FnMut(&[u8], SeqNo)| {
                all.iter().for_each(|(k, s)| each(k, *s));
                Ok(())
            };
            let job = oracle
                .begin_job(&mut JobStart {
                    version: &carried,
                    victims: &[20],
                    garbage: carried.values().garbage(20),
                    read_drop_block: &mut read,
                })
                .expect("begin");
            assert_eq!(job.check(&record(b"q", 1), env).unwrap(), Validity::Dead);
        });
        // Outside a job, the index lookup decides.
        with_env(&version, |env| {
            assert_eq!(oracle.check(&record(b"a", 7), env).unwrap(), Validity::Dead);
        });
    }
}
