//! Point reads: memtable, immutable memtables, then the index tree — newest data first.

use std::sync::atomic::Ordering;

use super::{Counters, DbInner, ReadOptions};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::{SeqNo, make_lookup_key};
use crate::memtable::MemLookup;
use crate::options::MAX_KEY_SIZE;
use crate::table::ReadCtx;
use crate::version::TreeLookup;

impl DbInner {
    /// The sequence number a read with `opts` sees. Loaded before the super version: every
    /// write at or below it is in a memtable or table that super version holds.
    pub(super) fn read_sequence(&self, opts: &ReadOptions<'_>) -> SeqNo {
        match opts.snapshot {
            Some(s) => s.sequence(),
            None => self.visible_seq.load(Ordering::Acquire),
        }
    }

    pub(super) fn get(&self, key: &[u8], opts: &ReadOptions<'_>) -> Result<Option<Vec<u8>>> {
        if key.len() > MAX_KEY_SIZE {
            return Err(Error::invalid(format!(
                "key of {} bytes exceeds the key size limit of {MAX_KEY_SIZE} bytes",
                key.len()
            )));
        }
        Counters::add(&self.counters.gets, 1);
        let seq = self.read_sequence(opts);
        let sv = self.super_version.load();
        let from_mem = sv
            .mem
            .get(key, seq)
            .or_else(|| sv.imm.iter().find_map(|m| m.get(key, seq)));
        match from_mem {
            Some(MemLookup::Value(v)) => return Ok(Some(v)),
            Some(MemLookup::Deleted) => return Ok(None),
            None => {}
        }
        let ctx = ReadCtx {
            class: IoClass::UserRead,
            fill_cache: opts.fill_cache,
        };
        match sv
            .version
            .get(&self.tables, &make_lookup_key(key, seq), ctx)?
        {
            Some(TreeLookup::Value(v)) => Ok(Some(v)),
            Some(TreeLookup::Deleted) | None => Ok(None),
        }
    }
}
