//! Versions of the index tree: version edits, the manifest that logs them, the version set that
//! installs them, and the lifetime of the tables they reference.

mod current;
pub mod edit;
pub mod file_meta;
pub mod level_iter;
mod run;
pub mod set;
pub mod value_read;
pub mod value_set;
#[expect(
    clippy::module_inception,
    reason = "the version module's central type is Version"
)]
pub mod version;

pub use current::{read_current, set_current};
pub use edit::{NewTable, VersionEdit};
pub use file_meta::{FileKind, FileMetaData, ObsoleteFileSink, TableMeta};
pub use run::{RunId, SortedRun};
pub use set::{RecoveredCounters, VersionSet, VersionSetConfig};
pub use value_read::{Located, check_record};
pub use value_set::{
    Dependence, DropBlock, DropBlockRef, DropFile, Garbage, Inheritor, Resolved, ValueFile,
    ValueSet, ValueTableMeta,
};
pub use version::Version;

/// Most levels any database may have (the upper bound of option `num_levels`).
pub const MAX_LEVELS: usize = 12;
