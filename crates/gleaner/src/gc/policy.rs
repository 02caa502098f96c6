//! The GC-policy interface: every garbage-collection scheme Gleaner implements (DESIGN.md, "GC
//! policies") is one implementation of [`GcPolicy`] over the same job runner.

use crate::options::{GcPolicyKind, Options};

/// What a policy sees of one live value table when choosing victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VictimCandidate {
    /// Table number.
    pub number: u64,
    /// File size in bytes.
    pub file_size: u64,
    /// Records in the table.
    pub records: u64,
    /// Bytes of those records.
    pub record_bytes: u64,
    /// Records known to be garbage.
    pub garbage_records: u64,
    /// Bytes of those records.
    pub garbage_bytes: u64,
    /// Class tag of the table.
    pub class: u32,
}

impl VictimCandidate {
    /// Garbage bytes ÷ record bytes (1 for an empty table).
    pub fn garbage_ratio(&self) -> f64 {
        if self.record_bytes == 0 {
            1.0
        } else {
            self.garbage_bytes as f64 / self.record_bytes as f64
        }
    }
}

/// How a GC job reads its victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcReadMode {
    /// Every record, value included, in one sequential pass (TerarkDB).
    Full,
    /// The dense index first; only live records' values, adjacent ones coalesced (Scavenger's
    /// lazy read, §3.2).
    Lazy,
}

/// How a GC job decides whether a record is still referenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcValidity {
    /// A point lookup in the index tree: the record is live when the tree still holds the
    /// version `(key, seq)` as a handle.
    IndexLookup,
    /// The same question asked with GetKey, which reads no value and, in index-decoupled key
    /// tables, handle blocks instead of data blocks (Scavenger §3.3).
    KeyLookup,
}

/// Where a job writes the live records it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcOutputRouting {
    /// One sorted run of output tables (class 0); the outputs of one job have disjoint key
    /// ranges, so an inheritance record resolves a key to exactly one of them.
    SingleRun,
    /// A hot and a cold run (Scavenger §3.4): records of keys the DropCache knows as hot go to
    /// hot tables, the rest to cold ones. The runs overlap, so a handle naming a victim is
    /// resolved by looking the record up in the candidates.
    HotCold,
}

/// How references to moved records are kept valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexUpdate {
    /// The index tree is not touched: inheritance records map the victim to its outputs, and
    /// compaction rewrites stale handles as it passes them.
    Inheritance,
}

/// A garbage-collection scheme. Victim choice is a pure function of the candidates, so policies
/// are testable without I/O; the job runner does the reading, checking and writing the policy
/// asks for.
pub trait GcPolicy: Send + Sync + std::fmt::Debug {
    /// The policy's name (as in option `gc_policy`).
    fn name(&self) -> &'static str;

    /// Chooses the victims of the next job among `candidates` (live tables no job is
    /// collecting), reading at most `max_input` bytes of them (a single larger table is still
    /// chosen alone). `garbage_ratio`, when given, replaces the policy's own victim threshold
    /// (the space throttle lowers it while writes are stopped). Empty when nothing is worth
    /// collecting.
    fn pick_victims(
        &self,
        candidates: &[VictimCandidate],
        max_input: u64,
        garbage_ratio: Option<f64>,
    ) -> Vec<u64>;

    /// How victims are read.
    fn read_mode(&self) -> GcReadMode;

    /// How validity is checked.
    fn validity(&self) -> GcValidity;

    /// Where live records go.
    fn output_routing(&self) -> GcOutputRouting;

    /// How references to moved records stay valid.
    fn index_update(&self) -> IndexUpdate;
}

/// The policy selected by `opts`.
pub fn policy_for(opts: &Options) -> Box<dyn GcPolicy> {
    let techniques = super::scavenger::Techniques {
        lazy_read: opts.lazy_read_enabled(),
        key_lookup: opts.index_decoupled_enabled(),
        hotness: opts.hotness_enabled(),
    };
    match opts.gc_policy() {
        kind @ (GcPolicyKind::Terarkdb | GcPolicyKind::Scavenger) => {
            Box::new(super::scavenger::ScavengerPolicy::new(
                kind.name(),
                opts.gc_garbage_ratio(),
                techniques,
            ))
        }
    }
}

/// Picks candidates whose garbage ratio is at least `threshold`, highest ratio first, while
/// their file sizes fit in `max_input` (the first always fits).
pub fn pick_by_ratio(candidates: &[VictimCandidate], threshold: f64, max_input: u64) -> Vec<u64> {
    let mut eligible: Vec<&VictimCandidate> = candidates
        .iter()
        .filter(|c| c.garbage_bytes > 0 && c.garbage_ratio() >= threshold)
        .collect();
    // Highest ratio first; at equal ratio hot tables first (Scavenger §3.4: their garbage
    // keeps growing, so they are the better victims), then the oldest.
    let hot = |c: &VictimCandidate| c.class == crate::hotness::CLASS_HOT;
    eligible.sort_by(|a, b| {
        b.garbage_ratio()
            .total_cmp(&a.garbage_ratio())
            .then(hot(b).cmp(&hot(a)))
            .then(a.number.cmp(&b.number))
    });
    let mut total = 0u64;
    let mut out = Vec::new();
    for c in eligible {
        if !out.is_empty() && total.saturating_add(c.file_size) > max_input {
            break;
        }
        total = total.saturating_add(c.file_size);
        out.push(c.number);
    }
    out
}
