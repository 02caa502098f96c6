//! Compaction: the pure picker, the compaction iterator with its drop events, output table
//! writing, and the flush and compaction jobs built from them.

pub mod iterator;
pub mod job;
pub mod output;
pub mod picker;

pub use iterator::{CompactionIterator, DropCounter, DropEvent, DropListener, DropReason};
pub use job::{JobStats, flush_memtables, run_compaction};
pub use output::{OutputConfig, TableOutputs};
pub use picker::{
    CompactionPlan, CompactionReason, PickerConfig, RunningCompaction, pick_compaction, plan_manual,
};
