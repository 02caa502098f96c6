//! The TerarkDB family of GC policies (Scavenger paper §2.2, §3): value tables whose garbage
//! ratio reaches `gc_garbage_ratio` are collected, highest ratio first; live records are
//! rewritten in key order; handles are left as they are and resolved through inheritance
//! records.
//!
//! `terarkdb` is the family with every Scavenger technique off: each record is read in full and
//! checked with an index-tree lookup. `scavenger` turns the techniques on; each has its own
//! switch, so the paper's ablation variants (TDB-R, TDB-L, TDB-W, ...) are the same policy with
//! some switches flipped.

use super::policy::{
    GcOutputRouting, GcPolicy, GcReadMode, GcValidity, IndexUpdate, VictimCandidate, pick_by_ratio,
};

/// Which of Scavenger's techniques a policy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Techniques {
    /// Lazy read (§3.2, "R"): index first, live values only.
    pub lazy_read: bool,
    /// Index-decoupled lookups (§3.3, "L"): validity checked with GetKey, which reads handle
    /// blocks instead of data blocks of index-decoupled key tables.
    pub key_lookup: bool,
    /// Hotness-aware writing (§3.4, "W"): live records routed to hot and cold outputs by the
    /// DropCache.
    pub hotness: bool,
}

/// A TerarkDB-family policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScavengerPolicy {
    name: &'static str,
    garbage_ratio: f64,
    techniques: Techniques,
}

impl ScavengerPolicy {
    /// The policy called `name` (as in option `gc_policy`) with victim threshold
    /// `garbage_ratio` (option `gc_garbage_ratio`) and `techniques`.
    pub fn new(name: &'static str, garbage_ratio: f64, techniques: Techniques) -> Self {
        ScavengerPolicy {
            name,
            garbage_ratio,
            techniques,
        }
    }

    /// The techniques in use.
    pub fn techniques(&self) -> Techniques {
        self.techniques
    }
}

impl GcPolicy for ScavengerPolicy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn pick_victims(
        &self,
        candidates: &[VictimCandidate],
        max_input: u64,
        garbage_ratio: Option<f64>,
    ) -> Vec<u64> {
        pick_by_ratio(
            candidates,
            garbage_ratio.unwrap_or(self.garbage_ratio),
            max_input,
        )
    }

    fn read_mode(&self) -> GcReadMode {
        if self.techniques.lazy_read {
            GcReadMode::Lazy
        } else {
            GcReadMode::Full
        }
    }

    fn validity(&self) -> GcValidity {
        if self.techniques.key_lookup {
            GcValidity::KeyLookup
        } else {
            GcValidity::IndexLookup
        }
    }

    fn output_routing(&self) -> GcOutputRouting {
        if self.techniques.hotness {
            GcOutputRouting::HotCold
        } else {
            GcOutputRouting::SingleRun
        }
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

    fn terarkdb(ratio: f64) -> ScavengerPolicy {
        ScavengerPolicy::new("terarkdb", ratio, Techniques::default())
    }

    #[test]
    fn victims_by_ratio_highest_first_within_the_input_bound() {
        let p = terarkdb(0.2);
        let cands = [
            cand(1, 100, 10),
            cand(2, 100, 90),
            cand(3, 100, 50),
            cand(4, 100, 20),
            cand(5, 100, 0),
        ];
        assert_eq!(
            p.pick_victims(&cands, 1000, None),
            vec![2, 3, 4],
            "1 is below 0.2, 5 has none"
        );
        assert_eq!(p.pick_victims(&cands, 250, None), vec![2, 3]);
        assert_eq!(
            p.pick_victims(&cands, 10, None),
            vec![2],
            "a single large victim is still taken"
        );
        assert!(terarkdb(0.95).pick_victims(&cands, 1000, None).is_empty());
        // Ratio 0 still requires some garbage: collecting a clean table frees nothing.
        assert_eq!(
            terarkdb(0.0).pick_victims(&cands, 1000, None),
            vec![2, 3, 4, 1]
        );
        // The throttle's urgent ratio overrides the policy's.
        assert_eq!(p.pick_victims(&cands, 1000, Some(0.1)), vec![2, 3, 4, 1]);
    }

    #[test]
    fn switches_select_the_read_mode_and_the_validity_check() {
        assert_eq!(terarkdb(0.2).read_mode(), GcReadMode::Full);
        let r = ScavengerPolicy::new(
            "scavenger",
            0.2,
            Techniques {
                lazy_read: true,
                key_lookup: false,
                hotness: false,
            },
        );
        assert_eq!(r.read_mode(), GcReadMode::Lazy);
        assert_eq!(r.validity(), GcValidity::IndexLookup);
        assert_eq!(r.name(), "scavenger");
        let l = ScavengerPolicy::new(
            "terarkdb",
            0.2,
            Techniques {
                lazy_read: false,
                key_lookup: true,
                hotness: true,
            },
        );
        assert_eq!(
            (l.read_mode(), l.validity(), l.output_routing()),
            (
                GcReadMode::Full,
                GcValidity::KeyLookup,
                GcOutputRouting::HotCold
            )
        );
    }
}
