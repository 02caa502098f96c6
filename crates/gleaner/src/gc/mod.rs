//! Garbage collection of value tables: the roles a GC policy is composed of, to build a scheme of
//! one's own ([`PolicyFactory`], registered with
//! [`Options::with_custom_policy`](crate::Options::with_custom_policy); docs/architecture.md,
//! "Adding a GC scheme"). **Unstable**: the roles change as the schemes that use them arrive.
//!
//! A policy is a [`PolicySet`]: a victim picker ([`VictimPicker`]), a read mode
//! ([`GcReadMode`]), a validity oracle ([`ValidityOracle`], per job a [`JobOracle`]), a value
//! router ([`ValueRouter`]), a commit style ([`CommitStyle`]), hooks into flushes, compactions
//! and GC jobs ([`CompactionHooks`]), and whether reads update stale handles. Its factory gets a
//! [`PolicyContext`]: the options, the directory, the recovered version, files of its own
//! ([`PolicyFiles`]) and background tasks ([`PolicyTasks`]).
//!
//! The engine's own policies and the GC job are not API (the `internals` feature shows them).

internal_modules! {
    blobdb;
    diffkv;
    dumpkv;
    hooks;
    job;
    novkv;
    oracle;
    pacing;
    parallel;
    picker;
    policy;
    policy_file;
    reader;
    registry;
    runtime;
    scavenger;
    titan;
    validity;
}

pub use crate::compaction::iterator::{DropEvent, DropListener, DropReason};
pub use crate::compaction::job::JobStats;
pub use crate::compaction::router::{
    MAX_VALUE_CLASSES, Placement, RouteContext, RouteOrigin, SingleClass, TableOrigin, ValueRouter,
    by_size,
};
pub use crate::key::{ParsedKey, SeqNo, ValueKind};
pub use crate::lookup::Lookup;
pub use crate::value::{HandlePayload, MAX_HANDLE_PAYLOAD, StoredHandle, ValueHandle};
pub use crate::version::{
    DropBlock, Garbage, MAX_POLICY_TABLE_META, PolicyTableMeta, ValueTableMeta, Version,
};
pub use hooks::{
    CompactionContext, CompactionHooks, EntryHooks, GcReport, GcVerdict, KeptEntry, ListenOnly,
    NoHooks,
};
pub use job::GcJobStats;
pub(crate) use job::{GcJobOutput, JobEnd, JobPlan, MovedRecord, micros_since, run_gc_job};
pub use oracle::{
    EachRecord, IndexOracle, JobOracle, JobStart, LookupKind, OracleEnv, ReadDropBlock, RecordRef,
    Validity, ValidityOracle, Verdict,
};
pub(crate) use parallel::LazyGcIoPool;
pub use picker::{PickContext, RatioPicker, VictimCandidate, VictimPicker, pick_by_ratio};
pub use policy::{CommitStyle, GcReadMode, PolicyFactory, PolicySet};
pub use policy_file::{MAX_POLICY_FILE, PolicyFiles};
pub(crate) use reader::VictimReader;
pub(crate) use registry::{check_options, own_options, policy_name, policy_set};
pub use runtime::{MAX_POLICY_TASKS, PolicyContext, PolicyTasks, TaskStop};
pub use validity::ValidityContext;
