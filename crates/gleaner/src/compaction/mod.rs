//! Compaction: the compaction strategies (pure planners: leveled and tiered), the compaction
//! iterator with its drop events, output table writing, and the flush and compaction jobs built
//! from them.

pub mod drop_keys;
pub mod garbage;
pub mod hooks;
pub mod iterator;
pub mod job;
pub(crate) mod leveled;
pub mod output;
pub mod pending;
pub mod plan;
pub mod read_ahead;
pub mod relocate;
pub mod router;
pub mod split;
pub(crate) mod stale_handles;
pub(crate) mod strategy;
#[cfg(test)]
mod strategy_sim;
pub(crate) mod style;
pub(crate) mod tiered;
pub(crate) mod trees;
pub mod value_output;

pub use drop_keys::{DropFileConfig, DropKeyCollector, WrittenDropKeys};
pub use garbage::{ClaimedDrop, GarbageListener, HandleRewriter, LateDrop, Settled};
pub use iterator::{
    CompactionIterator, DropCounter, DropEvent, DropListener, DropReason, FanOut, TeeListener,
};
pub use job::{
    CompactionResult, JobStats, RelocationSetup, Separation, flush_memtables, flush_split,
    run_compaction,
};
pub use output::{FinishedOutputs, OutputConfig, TableOutputs};
pub use pending::PendingFiles;
pub use plan::{CompactionPlan, CompactionReason, PickerConfig, RunInputs, RunningCompaction};
pub use relocate::RelocationStats;
pub use split::FlushPart;
pub use value_output::{
    ClassedFinish, ClassedValueOutputs, MAX_OPEN_EXPIRY_GROUPS, ValueOutputConfig, ValueOutputs,
};
