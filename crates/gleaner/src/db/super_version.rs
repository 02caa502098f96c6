//! The super version: what a reader needs to see one consistent state — the active memtable,
//! the immutable memtables and the version — swapped atomically as one `Arc`.

use std::sync::Arc;

use crate::cache::TableCache;
use crate::error::Result;
use crate::key::SeqNo;
use crate::lookup::{KeyLookup, Lookup, newest_key, newest_version};
use crate::memtable::MemTable;
use crate::table::ReadCtx;
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

impl SuperVersion {
    /// The memtables, newest first.
    pub fn memtables(&self) -> Vec<Arc<MemTable>> {
        std::iter::once(Arc::clone(&self.mem))
            .chain(self.imm.iter().cloned())
            .collect()
    }

    /// The newest version of `user_key` at or below `seq` in this state.
    ///
    /// Errors: reading a key table fails, or an entry there is damaged.
    pub fn get(
        &self,
        tables: &TableCache,
        user_key: &[u8],
        seq: SeqNo,
        ctx: ReadCtx,
    ) -> Result<Option<Lookup>> {
        let memtables = std::iter::once(&self.mem).chain(&self.imm);
        newest_version(memtables, &self.version, tables, user_key, seq, ctx)
    }

    /// [`SuperVersion::get`] without the value ([`newest_key`]): reads no value table.
    ///
    /// Errors: reading a key table fails, or an entry there is damaged.
    pub fn get_key(
        &self,
        tables: &TableCache,
        user_key: &[u8],
        seq: SeqNo,
        ctx: ReadCtx,
    ) -> Result<Option<KeyLookup>> {
        let memtables = std::iter::once(&self.mem).chain(&self.imm);
        newest_key(memtables, &self.version, tables, user_key, seq, ctx)
    }
}
