//! The `terarkdb` policy (Scavenger paper §2.2, §2.5): value tables whose garbage ratio reaches
//! `gc_garbage_ratio` are collected, highest ratio first; every record is read and checked with
//! an index lookup; live records are rewritten in key order; handles are left as they are and
//! resolved through inheritance records.

use super::policy::{
    GcOutputRouting, GcPolicy, GcReadMode, GcValidity, IndexUpdate, VictimCandidate, pick_by_ratio,
};

/// TerarkDB's GC.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TerarkDbPolicy {
    garbage_ratio: f64,
}

impl TerarkDbPolicy {
    /// The policy with victim threshold `garbage_ratio` (option `gc_garbage_ratio`).
    pub fn new(garbage_ratio: f64) -> Self {
        TerarkDbPolicy { garbage_ratio }
    }
}

impl GcPolicy for TerarkDbPolicy {
    fn name(&self) -> &'static str {
        "terarkdb"
    }

    fn pick_victims(&self, candidates: &[VictimCandidate], max_input: u64) -> Vec<u64> {
        pick_by_ratio(candidates, self.garbage_ratio, max_input)
    }

    fn read_mode(&self) -> GcReadMode {
        GcReadMode::Full
    }

    fn validity(&self) -> GcValidity {
        GcValidity::IndexLookup
    }

    fn output_routing(&self) -> GcOutputRouting {
        GcOutputRouting::SingleRun
    }

    fn index_update(&self) -> IndexUpdate {
        IndexUpdate::Inheritance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(number: u64, size: u64, garbage: u64) -> VictimCandidate {
        VictimCandidate {
            number,
            file_size: size,
            records: 10,
            record_bytes: size,
            garbage_records: 1,
            garbage_bytes: garbage,
            class: 0,
        }
    }

    #[test]
    fn victims_by_ratio_highest_first_within_the_input_bound() {
        let p = TerarkDbPolicy::new(0.2);
        let cands = [
            cand(1, 100, 10),
            cand(2, 100, 90),
            cand(3, 100, 50),
            cand(4, 100, 20),
            cand(5, 100, 0),
        ];
        assert_eq!(
            p.pick_victims(&cands, 1000),
            vec![2, 3, 4],
            "1 is below 0.2, 5 has none"
        );
        assert_eq!(p.pick_victims(&cands, 250), vec![2, 3]);
        assert_eq!(
            p.pick_victims(&cands, 10),
            vec![2],
            "a single large victim is still taken"
        );
        assert!(
            TerarkDbPolicy::new(0.95)
                .pick_victims(&cands, 1000)
                .is_empty()
        );
        // Ratio 0 still requires some garbage: collecting a clean table frees nothing.
        assert_eq!(
            TerarkDbPolicy::new(0.0).pick_victims(&cands, 1000),
            vec![2, 3, 4, 1]
        );
    }
}
