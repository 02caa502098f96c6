//! Running GC jobs: choosing and claiming victims, waiting out compactions that might still
//! drop handles into them uncounted, checking records against the index tree, and committing
//! outputs, inheritance records and late garbage in one manifest edit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Counters, DbInner, DbState};
use crate::error::{Error, Result};
use crate::gc::{
    CommitStyle, GcJobStats, OracleEnv, PickContext, RecordRef, ValidityContext, VictimCandidate,
    run_gc_job,
};
use crate::io::IoClass;
use crate::table::ReadCtx;
use crate::version::{Garbage, Inheritor, VersionEdit};

/// Longest single wait before GC re-checks its conditions.
const GC_WAIT: Duration = Duration::from_millis(100);

/// Victims a GC job has claimed.
pub(super) struct GcClaim {
    victims: Vec<u64>,
    /// Compactions with a smaller id were running at claim time; the job waits for them.
    epoch: u64,
}

/// What `Db::run_gc` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GcRunStats {
    /// Jobs run.
    pub jobs: u64,
    /// Summed figures of those jobs.
    pub totals: GcJobStats,
}

impl DbInner {
    /// Chooses victims with the policy and claims them (under the state lock).
    pub(super) fn claim_victims(&self, st: &mut DbState) -> Option<GcClaim> {
        let values = st.version.values();
        let candidates: Vec<VictimCandidate> = values
            .tables()
            .filter(|v| !st.gc_claimed.contains(&v.number) && !st.gc_failed.contains(&v.number))
            .map(|v| {
                let g = values.garbage(v.number);
                VictimCandidate {
                    number: v.number,
                    file_size: v.file_size,
                    records: v.records,
                    record_bytes: v.record_bytes,
                    garbage_records: g.records,
                    garbage_bytes: g.bytes,
                    class: v.class,
                    smallest_seq: v.smallest_seq,
                    largest_seq: v.largest_seq,
                }
            })
            .collect();
        let ctx = PickContext {
            max_input: self.opts.gc_max_input_size(),
            garbage_ratio: self.space.as_ref().map(|s| s.gc_ratio()),
            latest_seq: self.visible_seq.load(std::sync::atomic::Ordering::Acquire),
        };
        let victims = self.policy.picker.pick(&candidates, &ctx);
        if victims.is_empty() {
            return None;
        }
        st.gc_claimed.extend(victims.iter().copied());
        Some(GcClaim {
            victims,
            epoch: st.next_compaction_id,
        })
    }

    /// Waits for victims to collect (background GC worker `worker`, which only runs jobs while
    /// its index is below the number of GC threads in force); `None` at shutdown.
    pub(super) fn wait_for_gc(&self, worker: u32) -> Option<GcClaim> {
        loop {
            // The space throttle's directive (threads, victim ratio) follows disk usage even
            // when no write asks.
            self.space_tick();
            let mut st = self.state.lock();
            if st.shutting_down {
                return None;
            }
            if st.bg_error.is_none()
                && worker < self.active_gc_threads()
                && let Some(claim) = self.claim_victims(&mut st)
            {
                return Some(claim);
            }
            let wait = if self.space.is_some() {
                GC_WAIT
            } else {
                super::background::IDLE_WAIT
            };
            self.bg_cv.wait_for(&mut st, wait);
        }
    }

    /// Runs GC jobs on the caller's thread until the policy finds nothing more to collect.
    pub(super) fn run_gc_to_quiescence(&self) -> Result<GcRunStats> {
        let mut run = GcRunStats::default();
        // Each job removes its victims from the live set; this bounds the loop even if a
        // policy kept choosing.
        let limit = self.state.lock().version.values().len() as u64 + 1;
        while run.jobs < limit {
            let claim = {
                let mut st = self.state.lock();
                st.check_usable()?;
                self.claim_victims(&mut st)
            };
            let Some(claim) = claim else { break };
            let stats = self.run_gc_claim(claim)?;
            run.jobs += 1;
            run.totals.add(&stats);
        }
        Ok(run)
    }

    /// Runs one claimed job and commits it; the claim is released either way.
    pub(super) fn run_gc_claim(&self, claim: GcClaim) -> Result<GcJobStats> {
        let result = self.run_gc_job(&claim);
        let mut st = self.state.lock();
        for v in &claim.victims {
            st.gc_claimed.remove(v);
            st.late_drops.remove(v);
        }
        if let Err(e) = &result
            && e.is_corruption()
        {
            // A damaged victim would fail every job that picks it; leave it to `gleaner check`.
            st.gc_failed.extend(claim.victims.iter().copied());
        }
        drop(st);
        self.bg_cv.notify_all();
        self.progress_cv.notify_all();
        let stats = result?;
        self.record_gc(&stats);
        self.purge_obsolete_files();
        Ok(stats)
    }

    fn run_gc_job(&self, claim: &GcClaim) -> Result<GcJobStats> {
        // Compactions that started before the claim count their drops into the victims as plain
        // garbage; wait until they are done so the index tree shows those drops.
        {
            let mut st = self.state.lock();
            while st.running.iter().any(|r| r.id < claim.epoch) {
                st.check_usable()?;
                self.progress_cv.wait_for(&mut st, GC_WAIT);
            }
            st.check_usable()?;
        }
        let version = Arc::clone(&self.super_version.load().version);
        // A victim may have been deleted meanwhile: a compaction that was committing while the
        // claim was made can still have found it entirely garbage. There is nothing left to do
        // for such a table.
        let live: Vec<u64> = claim
            .victims
            .iter()
            .copied()
            .filter(|n| version.values().live(*n).is_some())
            .collect();
        if live.is_empty() {
            return Ok(GcJobStats::default());
        }
        let mut victims = Vec::with_capacity(live.len());
        for n in &live {
            let meta = version.values().live(*n).expect("filtered to live tables");
            victims.push(
                self.values
                    .get(meta.number, meta.file_size, IoClass::GcRead)?,
            );
        }
        let durable_seq = version
            .all_files()
            .map(|(_, f)| f.largest_seq)
            .max()
            .unwrap_or(0);
        // Snapshots read after the version was pinned: later ones read above all of its tables.
        let validity = ValidityContext::new(self.snapshots.sequences(), durable_seq);
        let env = OracleEnv {
            version: &version,
            tables: &self.tables,
            validity: &validity,
            ctx: ReadCtx {
                class: IoClass::GcLookup,
                fill_cache: true,
            },
        };
        let oracle = self.policy.oracle.as_ref();
        let mut is_live = |record: &RecordRef<'_>| oracle.check(record, &env);
        let out = run_gc_job(
            &victims,
            self.policy.read_mode,
            &mut is_live,
            self.value_output_config(IoClass::GcWrite),
            Arc::clone(&self.policy.router),
            self.opts.gc_read_gap(),
            Some(&self.shutting_down),
        )?;
        drop(victims);
        match self.policy.commit {
            CommitStyle::Inheritance => self.commit_gc(&live, out),
        }
    }

    /// Installs a job's outputs in one edit: outputs added, victims removed, inheritance
    /// recorded, and garbage that compactions found in copied records while the job ran moved
    /// onto the outputs.
    fn commit_gc(&self, victims: &[u64], out: crate::gc::GcJobOutput) -> Result<GcJobStats> {
        let children: Vec<Inheritor> = out
            .tables
            .iter()
            .map(|t| Inheritor {
                number: t.number,
                smallest_key: t.smallest_key.clone(),
                largest_key: t.largest_key.clone(),
            })
            .collect();
        let mut edit = VersionEdit {
            new_value_tables: out.tables,
            deleted_value_tables: victims.to_vec(),
            ..Default::default()
        };
        if !children.is_empty() {
            edit.inheritance = victims.iter().map(|v| (*v, children.clone())).collect();
        }
        let mut versions = self.versions.lock();
        // Closing: give up before the edit (the outputs are deleted as `out` drops).
        self.check_open()?;
        {
            // Holding the manifest lock: no compaction can commit more drops until this edit is in.
            let st = self.state.lock();
            let mut garbage: BTreeMap<u64, Garbage> = BTreeMap::new();
            for v in victims {
                for d in st.late_drops.get(v).into_iter().flatten() {
                    if let Some(t) = out.copied.get(&d.seq) {
                        let g = garbage.entry(*t).or_default();
                        g.records += 1;
                        g.bytes += d.len;
                    }
                }
            }
            edit.value_garbage = garbage.into_iter().collect();
        }
        // A failed manifest write may still have put the edit on disk (a failed sync, say), and
        // a reopen then needs the outputs it names: keep them either way. An edit that did not
        // land leaves them orphans, which the next open deletes.
        let result = versions.log_and_apply(edit);
        out.pending.keep();
        let version = match result {
            Ok(v) => v,
            Err(e) => {
                drop(versions);
                self.set_bg_error(e.clone());
                return Err(e);
            }
        };
        {
            let mut st = self.state.lock();
            st.version = version;
            self.install_super_version(&st);
        }
        drop(versions);
        Ok(out.stats)
    }

    /// Records a failed GC job for `stats()`.
    pub(super) fn note_gc_error(&self, e: &Error) {
        if !matches!(e, Error::Closed) {
            Counters::add(&self.counters.gc_errors, 1);
            *self.last_gc_error.lock() = Some(e.to_string());
        }
    }

    fn record_gc(&self, s: &GcJobStats) {
        let c = &self.counters;
        Counters::add(&c.gc_jobs, 1);
        Counters::add(&c.gc_victims, s.victims);
        Counters::add(&c.gc_records_read, s.records_read);
        Counters::add(&c.gc_records_dropped, s.records_dropped);
        Counters::add(&c.gc_records_written, s.records_written);
        Counters::add(&c.gc_bytes_read, s.bytes_read);
        Counters::add(&c.gc_drop_cache_answers, s.drop_cache_answers);
        Counters::add(&c.gc_bytes_written, s.bytes_written);
        for (counter, bytes) in c.gc_bytes_by_class.iter().zip(s.bytes_written_by_class) {
            Counters::add(counter, bytes);
        }
        Counters::add(&c.gc_read_micros, s.read_micros);
        Counters::add(&c.gc_lookup_micros, s.lookup_micros);
        Counters::add(&c.gc_write_micros, s.write_micros);
    }
}
