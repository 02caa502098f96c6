//! Training samples (DumpKV §4.3): queue A from compactions out of L0 (a version's history and
//! the lifetime it turned out to have), queue B from GC jobs (a live version's history and its
//! age), both bounded, labelled only when a training takes them (with the lifetime points of
//! that moment), and drawn in equal numbers from each queue and each label.
//!
//! Each queue holds a uniform sample of what arrived since the last training (a new round
//! starts with each training, so a model learns from recent behaviour): of more samples than
//! it holds, those with the smallest [`coin`] stay. The set kept, and its order, are then a
//! function of which samples arrived, not of the order they arrived in: a GC job whose
//! verdicts come from several threads feeds the model the same rows at any schedule.

use std::collections::BinaryHeap;

use super::features::{FEATURES, Features};
use super::lifetime::{LifetimePoints, compaction_label, gc_label};
use crate::key::SeqNo;

/// One sample: a version's history and, for queue A, the lifetime it had; for queue B, its
/// age when a GC job found it live.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The version's history when it was written.
    pub features: Features,
    /// Queue A: its lifetime in writes; queue B: its age in writes.
    pub writes: SeqNo,
    /// Its rank in the round's uniform sample (a [`coin`] of its record): the smallest stay.
    pub rank: f64,
}

/// A sample ordered by rank (then by its other fields, so equal ranks order alike too).
#[derive(Debug)]
struct Ranked(Sample);

impl Ranked {
    fn key(&self) -> (f64, u64, bool, &[u64]) {
        let s = &self.0;
        (s.rank, s.writes, s.features.collected, &s.features.deltas)
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let (a, b) = (self.key(), other.key());
        a.0.total_cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(b.3))
            .then_with(|| {
                let (x, y) = (&self.0.features.edwcs, &other.0.features.edwcs);
                x.iter()
                    .zip(y)
                    .map(|(p, q)| p.total_cmp(q))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    }
}

/// The two bounded queues of one round.
#[derive(Debug)]
pub struct SampleQueues {
    /// Max-heaps by rank: the largest rank goes first when a queue is full.
    compaction: BinaryHeap<Ranked>,
    gc: BinaryHeap<Ranked>,
    capacity: usize,
    /// Samples offered since the last training (kept or not).
    fresh: u64,
}

/// A training set: inputs and labels (true = long).
pub type TrainingSet = (Vec<[f32; FEATURES]>, Vec<bool>);

impl SampleQueues {
    /// Queues of at most `capacity` samples each (at least 1).
    pub fn new(capacity: usize) -> Self {
        SampleQueues {
            compaction: BinaryHeap::new(),
            gc: BinaryHeap::new(),
            capacity: capacity.max(1),
            fresh: 0,
        }
    }

    fn push(queue: &mut BinaryHeap<Ranked>, capacity: usize, s: Sample) {
        let s = Ranked(s);
        if queue.len() < capacity {
            queue.push(s);
        } else if queue.peek().is_some_and(|top| s < *top) {
            queue.pop();
            queue.push(s);
        }
    }

    /// Adds a sample to queue A.
    pub fn add_compaction(&mut self, s: Sample) {
        Self::push(&mut self.compaction, self.capacity, s);
        self.fresh += 1;
    }

    /// Adds a sample to queue B.
    pub fn add_gc(&mut self, s: Sample) {
        Self::push(&mut self.gc, self.capacity, s);
        self.fresh += 1;
    }

    /// Samples in queue A and in queue B.
    pub fn lens(&self) -> (usize, usize) {
        (self.compaction.len(), self.gc.len())
    }

    /// Samples offered since the last [`SampleQueues::take_training_set`].
    pub fn fresh(&self) -> u64 {
        self.fresh
    }

    /// The training set of at most `size` rows from this round's samples, which it ends (the
    /// queues are emptied): each queue's samples by rank, labelled with `points`, up to
    /// `size / 2` from each queue (the paper's equal share; a queue short of its share leaves
    /// the rest unused) and then at most `size / 2` of each label. Queue A samples are seen at
    /// age `l_d`, when a flush's table falls due; queue B samples at the age the GC job met
    /// them.
    pub fn take_training_set(&mut self, size: usize, points: &LifetimePoints, unit: u64) -> TrainingSet {
        self.fresh = 0;
        let half = (size / 2).max(1);
        let a = std::mem::take(&mut self.compaction).into_sorted_vec();
        let b = std::mem::take(&mut self.gc).into_sorted_vec();
        let from_a = a.iter().map(|r| &r.0).filter_map(|s| {
            compaction_label(s.writes, points).map(|l| (s.features.model_input(points.default, unit), l))
        });
        let from_b = b.iter().map(|r| &r.0).map(|s| {
            (
                s.features.model_input(s.writes, unit),
                gc_label(&s.features, s.writes, points, unit),
            )
        });
        let mut rows = Vec::new();
        let mut labels = Vec::new();
        let mut per_label = [0usize; 2];
        for (x, long) in from_a.take(half).chain(from_b.take(half)) {
            let n = &mut per_label[usize::from(long)];
            if *n >= half {
                continue;
            }
            *n += 1;
            rows.push(x);
            labels.push(long);
        }
        (rows, labels)
    }
}

/// A number in `[0, 1)` that is a function of a record's identity and `salt` alone: the coin
/// of a sampling decision that a replayed run takes again (FNV-1a, then a SplitMix64 finish).
pub fn coin(key: &[u8], seq: SeqNo, salt: u64) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
    for b in key.iter().chain(&seq.to_le_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> LifetimePoints {
        LifetimePoints {
            short: 100,
            long: 1000,
            default: 50,
        }
    }

    fn sample(writes: SeqNo, rank: f64) -> Sample {
        Sample {
            features: Features::first_write(true).next_write(7, 10),
            writes,
            rank,
        }
    }

    #[test]
    fn queues_are_bounded_and_keep_the_smallest_ranks_in_any_order() {
        let ranks = [0.9, 0.1, 0.5, 0.3, 0.7];
        let mut forward = SampleQueues::new(3);
        let mut backward = SampleQueues::new(3);
        for (i, r) in ranks.iter().enumerate() {
            forward.add_compaction(sample(100 + i as u64, *r));
        }
        for (i, r) in ranks.iter().enumerate().rev() {
            backward.add_compaction(sample(100 + i as u64, *r));
        }
        assert_eq!(forward.lens(), (3, 0));
        assert_eq!(forward.fresh(), 5);
        let p = LifetimePoints {
            short: 10,
            long: 100,
            default: 50,
        };
        let f = forward.take_training_set(10, &p, 10);
        let b = backward.take_training_set(10, &p, 10);
        assert_eq!(f.1, b.1);
        assert_eq!(format!("{:?}", f.0), format!("{:?}", b.0));
        // Ranks 0.1, 0.3, 0.5: writes 101, 103, 102; all long (remaining 51+ > 10).
        assert_eq!(f.1, vec![true; 3]);
        // The round ended.
        assert_eq!(forward.lens(), (0, 0));
        assert_eq!(forward.fresh(), 0);
    }

    #[test]
    fn training_sets_take_equal_shares_of_queues_and_labels() {
        let mut q = SampleQueues::new(1000);
        let p = points();
        // Queue A: 300 short (lifetime 60: 10 past l_d), 300 long (lifetime 500), 100 under
        // l_d (no sample); ranks interleave them.
        for i in 0..700u64 {
            let writes = match i % 7 {
                0..=2 => 60,
                3..=5 => 500,
                _ => 10,
            };
            q.add_compaction(sample(writes, i as f64 / 700.0));
        }
        // Queue B: written-once keys, all long.
        for i in 0..400 {
            q.add_gc(Sample {
                features: Features::first_write(true),
                writes: 5,
                rank: f64::from(i) / 400.0,
            });
        }
        let (rows, labels) = q.take_training_set(400, &p, 10);
        assert_eq!(q.fresh(), 0);
        // 200 from A by rank (groups of 7 from rank 0: 3 short, 3 long, 1 none; 33 groups
        // and 2 shorts: 101 short, 99 long), then B's longs until longs reach 200.
        let longs = labels.iter().filter(|l| **l).count();
        assert_eq!(longs, 200);
        assert_eq!(labels.len() - longs, 101);
        assert_eq!(rows.len(), labels.len());
        // A's rows are seen at age l_d: bucket of 50 writes in units of 10 = 3.
        assert_eq!(rows[0][0], 3.0);
    }

    #[test]
    fn coins_are_uniform_and_replay() {
        assert_eq!(coin(b"k", 1, 0), coin(b"k", 1, 0));
        assert_ne!(coin(b"k", 1, 0), coin(b"k", 1, 1));
        let n = 10_000;
        let below = (0..n).filter(|i| coin(b"key", *i, 7) < 0.25).count();
        assert!((2300..2700).contains(&below), "{below}");
    }
}
