//! Garbage collection of value tables: the roles a policy is composed of, the policies, and
//! the GC job.

pub mod blobdb;
pub mod hooks;
pub mod job;
pub mod novkv;
pub mod oracle;
pub mod pacing;
mod parallel;
pub mod picker;
pub mod policy;
pub mod policy_file;
pub mod reader;
mod registry;
pub mod runtime;
pub mod scavenger;
pub mod titan;
pub mod validity;

pub use crate::compaction::router::{
    MAX_VALUE_CLASSES, Placement, RouteContext, RouteOrigin, SingleClass, ValueRouter, by_size,
};
pub use hooks::{
    CompactionContext, CompactionHooks, EntryHooks, GcReport, GcVerdict, KeptEntry, ListenOnly,
    NoHooks,
};
pub use job::{
    Checkpoint, GcJobOutput, GcJobStats, IsLive, JobEnd, JobPlan, MovedRecord, run_gc_job,
};
pub use oracle::{
    EachRecord, IndexOracle, JobOracle, JobStart, LookupKind, OracleEnv, ReadDropBlock, RecordRef,
    Validity, ValidityOracle,
};
pub(crate) use parallel::LazyGcIoPool;
pub use parallel::{GcIoPool, MAX_GC_IO_THREADS};
pub use picker::{PickContext, RatioPicker, VictimCandidate, VictimPicker, pick_by_ratio};
pub use policy::{CommitStyle, GcReadMode, PolicyFactory, PolicySet};
pub use policy_file::{MAX_POLICY_FILE, PolicyFiles};
pub use reader::VictimReader;
pub use registry::{check_options, own_options, policy_name, policy_set};
pub use runtime::{MAX_POLICY_TASKS, PolicyContext, PolicyTasks, TaskStop};
pub use validity::ValidityContext;
