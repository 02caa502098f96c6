//! A from-scratch recount of value-table garbage, to check the incremental accounting.

use std::collections::BTreeMap;

use super::DbInner;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, SeqNo, ValueKind, make_lookup_key};
use crate::table::ReadCtx;
use crate::value::StoredHandle;
use crate::version::Version;

/// Whether a version whose handle resolves to no record may have lost its record to GC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EarlyReclaim {
    /// A newer version hides it from every reader: GC reclaimed it early, rightly.
    Unread,
    /// The live snapshot at `snapshot` (the lowest at or above the version) can read it: no
    /// newer version lies between the two. `reads` is the version the snapshot's lookup finds.
    ReadBySnapshot {
        snapshot: SeqNo,
        reads: Option<SeqNo>,
    },
    /// No snapshot can read it, and it is the key's newest version in the tree: current reads
    /// see it.
    Newest,
}

/// Result of [`Db::recount_garbage`](super::Db::recount_garbage).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GarbageRecount {
    /// Value tables compared.
    pub tables: usize,
    /// Handles found in key tables.
    pub handles: u64,
    /// Of those, aliases (handle updates on read): checked to resolve, not
    /// counted as references, since each names a record its owner already references.
    pub aliases: u64,
    /// Of those, handles of shadowed versions whose record GC reclaimed early: a newer version
    /// of the key is in the tree and no live snapshot reads between the two, so nothing reads
    /// them. A handle that resolves to nothing while a live snapshot still reads its version
    /// is a mismatch naming the snapshot, not counted here.
    pub reclaimed_early: u64,
    /// Handles of versions expired for every reader whose record is gone (a table that expired
    /// whole, or a GC job that judged the record dead): nothing reads them, and compaction
    /// drops them without counting anything.
    pub expired: u64,
    /// Handles naming retired value tables (write-back commits): versions shadowed by the
    /// written-back ones, readable by older snapshots, with no garbage account.
    pub retired_refs: u64,
    /// Live value tables skipped because a write-back GC job is still installing them.
    pub awaiting_write_back: u64,
    /// Handles naming value segments still open (`separate_at=write`: their memtables are not
    /// flushed yet), which have no garbage account until their flush seals them.
    pub open_segment_refs: u64,
    /// Every disagreement between the recount and the recorded garbage, in words.
    pub mismatches: Vec<String>,
}

impl DbInner {
    /// Walks every entry of every memtable and key table of the current state, places each
    /// handle's record in its live value table, and compares the references found with each
    /// table's records minus its recorded garbage. A handle that resolves to no record passes only as a shadowed
    /// version no live snapshot reads ([`early_reclaim_verdict`](Self::early_reclaim_verdict)).
    pub(super) fn recount_garbage(&self) -> Result<GarbageRecount> {
        let sv = self.super_version.load_full();
        // The memtables keep taking writes: only versions up to this sequence number, which
        // the pinned version's tables can account for, are counted (as a read sees them).
        let pinned_seq = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        let version = std::sync::Arc::clone(&sv.version);
        // Read after the version is pinned: a snapshot taken later reads at or above every
        // version in that tree, so it cannot fall between a record and the version hiding it
        // (the same argument GC's validity checks rest on, docs/gc.md).
        let readers = self.snapshots.reader_times(&self.time);
        let snapshots = readers.sequences();
        let values = version.values();
        let ctx = ReadCtx {
            class: IoClass::Other,
            fill_cache: false,
            readahead: 0,
            readahead_ramp: false,
        };
        // Memtables hold handles where a GC wrote them back (write-back commits): those reference
        // records as key-table entries do.
        let mut sources: Vec<(String, Box<dyn InternalIterator>)> = std::iter::once(&sv.mem)
            .chain(sv.imm.iter())
            .map(|m| {
                (
                    format!("memtable of WAL {}", m.wal_number()),
                    Box::new(m.iter()) as Box<dyn InternalIterator>,
                )
            })
            .collect();
        for (_, f) in version.all_files() {
            let table = self.tables.get(f.number, f.file_size, IoClass::Other)?;
            sources.push((format!("table {}", f.number), Box::new(table.iter(ctx))));
        }
        drop(sv);
        let mut referenced: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut report = GarbageRecount::default();
        for (source, mut it) in sources {
            it.seek_to_first()?;
            while it.valid() {
                let key = ParsedKey::parse(it.key())
                    .ok_or_else(|| Error::corruption(&source, 0, "malformed internal key"))?;
                if key.kind == ValueKind::ValueHandle && key.seq <= pinned_seq {
                    let stored = StoredHandle::decode(it.value(), &source, 0)?;
                    let handle = stored.location;
                    report.handles += 1;
                    match values.try_locate(
                        &self.values,
                        key.user_key,
                        stored.record_seq(key.seq),
                        handle,
                        IoClass::Other,
                        false,
                    ) {
                        Ok(Some(_)) if stored.alias => report.aliases += 1,
                        Ok(Some(at)) => {
                            let r = referenced.entry(at.handle.file_number).or_default();
                            r.0 += 1;
                            r.1 += at.handle.len;
                        }
                        // A value segment the memtable walked holds open, without an account
                        // until its flush seals it.
                        Ok(None) if self.values.open_table(handle.file_number).is_some() => {
                            report.open_segment_refs += 1;
                        }
                        Ok(None) if readers.expired_for_all(key.seq, stored.expiry) => {
                            report.expired += 1;
                        }
                        Ok(None) => match self.early_reclaim_verdict(
                            &version,
                            &snapshots,
                            key.user_key,
                            key.seq,
                            ctx,
                        )? {
                            EarlyReclaim::Unread => report.reclaimed_early += 1,
                            EarlyReclaim::ReadBySnapshot { snapshot, reads } => {
                                let e = values.dangling(key.user_key, key.seq, handle);
                                let reads = match reads {
                                    Some(s) if s == key.seq => "this version".to_string(),
                                    Some(s) => format!("the version at sequence {s}"),
                                    None => "no version".to_string(),
                                };
                                report.mismatches.push(format!(
                                    "handle in {source} for sequence {} does not resolve, but the \
                                     live snapshot at sequence {snapshot} reads {reads} of its \
                                     key: GC reclaimed a record a snapshot can read: {e}",
                                    key.seq
                                ));
                            }
                            EarlyReclaim::Newest => {
                                let e = values.dangling(key.user_key, key.seq, handle);
                                report.mismatches.push(format!(
                                    "handle in {source} for sequence {} does not resolve: {e}",
                                    key.seq
                                ));
                            }
                        },
                        Err(e) => report.mismatches.push(format!(
                            "handle in {source} for sequence {} does not resolve: {e}",
                            key.seq
                        )),
                    }
                }
                it.next()?;
            }
        }
        for v in values.tables() {
            report.tables += 1;
            let g = values.garbage(v.number);
            let (records, bytes) = referenced.remove(&v.number).unwrap_or_default();
            if values.awaiting_write_back().contains(&v.number) {
                // A write-back GC job is installing it: its references are still being written
                // (its garbage is settled when the job finishes, or at the next open).
                report.awaiting_write_back += 1;
                continue;
            }
            let expect = (v.records - g.records, v.record_bytes - g.bytes);
            if (records, bytes) != expect {
                report.mismatches.push(format!(
                    "value table {}: key tables reference {records} records / {bytes} bytes, but the \
                     accounting says {} / {} are live ({} records, {} garbage)",
                    v.number, expect.0, expect.1, v.records, g.records
                ));
            }
        }
        for (n, (records, _)) in referenced {
            if values.retired_table(n).is_some() {
                // Versions a newer one shadows still name it; it has no account.
                report.retired_refs += records;
                continue;
            }

            report.mismatches.push(format!(
                "{records} handles resolve to value table {n}, which is not live"
            ));
        }
        Ok(report)
    }
}

impl DbInner {
    /// Decides whether the record of version `(user_key, seq)`, which some key table still
    /// holds, could rightly have been reclaimed by GC. A snapshot at `x` reads the newest
    /// version at or below `x`, so the record is readable exactly while some live snapshot `x`
    /// has `seq <= x < S`, `S` the next newer version of the key in the tree, or while it is the
    /// newest version. Only the lowest snapshot at or above `seq` needs asking: if it reads a
    /// newer version, then `S` is at or below it and every higher snapshot too.
    fn early_reclaim_verdict(
        &self,
        version: &Version,
        snapshots: &[SeqNo],
        user_key: &[u8],
        seq: SeqNo,
        ctx: ReadCtx,
    ) -> Result<EarlyReclaim> {
        let lowest = snapshots.partition_point(|&x| x < seq);
        if let Some(&snapshot) = snapshots.get(lowest) {
            let lookup = make_lookup_key(user_key, snapshot);
            let reads = version
                .get_key(&self.tables, &lookup, ctx)?
                .map(|found| found.seq());
            return Ok(match reads {
                Some(s) if s > seq => EarlyReclaim::Unread,
                _ => EarlyReclaim::ReadBySnapshot { snapshot, reads },
            });
        }
        Ok(if version.is_shadowed(&self.tables, user_key, seq, ctx)? {
            EarlyReclaim::Unread
        } else {
            EarlyReclaim::Newest
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use crate::gc::validity::test_hook::IgnoreSnapshots;
    use crate::io::FaultFs;
    use crate::{Db, GcPolicyKind, Options, ReadOptions, Snapshot, Switch};

    const KEYS: u32 = 120;

    fn options(fs: &FaultFs) -> Options {
        Options::default()
            .with_file_system(Arc::new(fs.clone()))
            .with_memtable_size(1 << 20)
            .with_key_table_size(16 << 10)
            .with_level_base_size(64 << 10)
            .with_value_table_size(64 << 10)
            .with_min_separated_value_size(256)
            .with_gc_garbage_ratio(0.2)
            .with_gc_threads(0)
            .with_gc_policy(GcPolicyKind::Terarkdb)
            .with_hotness_aware_writes(Switch::Off)
    }

    fn key(i: u32) -> String {
        format!("key{i:04}")
    }

    fn value(i: u32, round: u32) -> Vec<u8> {
        let mut v = format!("value {i} round {round} ").into_bytes();
        v.resize(1000 + (i as usize % 7) * 100, b'a' + round as u8);
        v
    }

    /// Keys whose round-0 version the snapshot of [`build`] reads although a newer version is in
    /// the tree: the odd keys round 1 left alone.
    fn read_by_snapshot_only(i: u32) -> bool {
        i % 2 == 1 && !i.is_multiple_of(3)
    }

    /// Round 0 writes every key; round 1 overwrites every third key and is compacted, so the
    /// round-0 tables show a third of their records as garbage and GC picks them. Then a
    /// snapshot is taken, and round 2 overwrites the odd keys and is flushed: their round-0
    /// versions are shadowed in the tree, and the snapshot still reads them.
    fn build(db: &Db) -> Snapshot {
        for i in 0..KEYS {
            db.put(key(i), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..KEYS).filter(|i| i.is_multiple_of(3)) {
            db.put(key(i), value(i, 1)).expect("put");
        }
        db.compact_range(None, None).expect("compact");
        let snap = db.snapshot();
        for i in (0..KEYS).filter(|i| i % 2 == 1) {
            db.put(key(i), value(i, 2)).expect("put");
        }
        db.flush().expect("flush");
        snap
    }

    fn at_snapshot(i: u32) -> u32 {
        if i.is_multiple_of(3) { 1 } else { 0 }
    }

    /// Honest GC keeps what the snapshot reads, and the recount agrees with it.
    #[test]
    fn the_recount_accepts_gc_that_keeps_what_a_snapshot_reads() {
        let fs = FaultFs::new(1);
        let db = Db::open(Path::new("/recount-honest"), options(&fs)).expect("open");
        let snap = build(&db);
        let run = db.run_gc().expect("gc");
        assert!(run.jobs > 0, "{run:?}");
        for i in 0..KEYS {
            let got = db
                .get_with(key(i), &ReadOptions::default().at(&snap))
                .expect("get at the snapshot");
            assert_eq!(got, Some(value(i, at_snapshot(i))), "{}", key(i));
        }
        let r = db.recount_garbage().expect("recount");
        assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
        assert_eq!(r.reclaimed_early, 0);
    }

    /// A GC job that ignores the live snapshot (the test hook) reclaims the round-0 records the
    /// snapshot still reads; their handles stay in the tree, shadowed by round 2. The recount used
    /// to accept every such handle as "reclaimed early" because a newer version exists; it must
    /// report each one, naming the snapshot. Once the snapshot is gone, the same handles are
    /// rightly unread.
    #[test]
    fn the_recount_reports_a_record_gc_reclaimed_under_a_live_snapshot() {
        let fs = FaultFs::new(2);
        let db = Db::open(Path::new("/recount-wrong-gc"), options(&fs)).expect("open");
        let snap = build(&db);
        let run = {
            let _fault = IgnoreSnapshots::new();
            db.run_gc().expect("gc")
        };
        assert!(run.jobs > 0, "{run:?}");
        let lost: Vec<u32> = (0..KEYS).filter(|&i| read_by_snapshot_only(i)).collect();
        // The damage is real: the snapshot can no longer read those versions.
        for &i in &lost {
            let got = db.get_with(key(i), &ReadOptions::default().at(&snap));
            assert!(
                !matches!(&got, Ok(Some(v)) if *v == value(i, 0)),
                "{} still reads at the snapshot: the hook did not make GC reclaim it",
                key(i)
            );
        }
        let r = db.recount_garbage().expect("recount");
        assert_eq!(
            r.mismatches.len(),
            lost.len(),
            "one mismatch per record the snapshot lost: {:#?}",
            r.mismatches
        );
        let named = format!(
            "live snapshot at sequence {} reads this version",
            snap.sequence()
        );
        for m in &r.mismatches {
            assert!(m.contains(&named), "{m}");
        }
        assert_eq!(r.reclaimed_early, 0);
        drop(snap);
        let r = db.recount_garbage().expect("recount");
        assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
        assert_eq!(r.reclaimed_early, lost.len() as u64);
    }
}
