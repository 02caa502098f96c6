//! The super version: what a reader needs to see one consistent state — the active memtable,
//! the immutable memtables and the version — swapped atomically as one `Arc`.

use std::sync::Arc;

use crate::memtable::MemTable;
use crate::version::Version;

/// One consistent read state.
#[derive(Debug)]
pub struct SuperVersion {
    /// The memtable receiving writes.
    pub mem: Arc<MemTable>,
    /// Immutable memtables, newest first.
    pub imm: Vec<Arc<MemTable>>,
    /// The key tables.
    pub version: Arc<Version>,
}
