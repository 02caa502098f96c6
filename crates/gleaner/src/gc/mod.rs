//! Garbage collection of value tables: the policy interface, the policies, and the GC job.

pub mod job;
pub mod policy;
pub mod reader;
pub mod scavenger;
pub mod validity;

pub use job::{GcJobOutput, GcJobStats, IsLive, Validity, run_gc_job};
pub use policy::{
    GcOutputRouting, GcPolicy, GcReadMode, GcValidity, IndexUpdate, VictimCandidate, policy_for,
};
pub use reader::VictimReader;
pub use scavenger::{ScavengerPolicy, Techniques};
pub use validity::{TreeCheck, ValidityContext};
