//! The log format shared by the write-ahead log and the manifest: 32 KiB blocks of fragments,
//! each `masked crc32c: u32 LE | length: u16 LE | type: u8 | payload`. A record larger than the
//! space left in a block is split into FIRST / MIDDLE* / LAST fragments; a record that fits is
//! one FULL fragment. A block tail shorter than a header is zero-filled. See docs/format.md,
//! "Log format".

mod chain;
mod reader;
mod record;
mod writer;

pub(crate) use chain::{Cut, CutKind, LogChain, check_cut_unsynced};
pub use reader::{DroppedRegion, LogReader, SyncPointFn};
pub use record::{decode_wal_record, wal_reader, write_sync_marker};
pub use writer::LogWriter;

/// Size of a log block.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Size of a fragment header.
pub const HEADER_SIZE: usize = 7;

/// Bytes before the write batch in every WAL record: the WAL's synced size when the record was
/// written (u64 LE). See [`LogReader::with_sync_points`].
pub const WAL_SYNC_POINT_LEN: usize = 8;

/// At most the bytes a WAL record for a write batch of `batch_len` encoded bytes adds to the
/// log: the payload (the sync point, then the batch) plus, per block it touches, one fragment
/// header and a zero-filled block tail shorter than a header. The space throttle counts a write
/// at this size, so a write it lets in never adds more than it counted.
pub fn max_wal_record_bytes(batch_len: u64) -> u64 {
    let payload = batch_len + WAL_SYNC_POINT_LEN as u64;
    let per_block = (BLOCK_SIZE - HEADER_SIZE) as u64;
    // A record can start at any offset of a block, so it may touch one block more than its
    // length alone needs.
    let blocks = payload.div_ceil(per_block) + 1;
    payload + blocks * (2 * HEADER_SIZE as u64 - 1)
}

/// The sync point of a WAL record payload.
pub fn wal_sync_point(payload: &[u8]) -> Option<u64> {
    payload
        .get(..WAL_SYNC_POINT_LEN)
        .map(crate::coding::decode_fixed64)
}

/// Fragment types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FragmentType {
    Full = 1,
    First = 2,
    Middle = 3,
    Last = 4,
}

impl FragmentType {
    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(FragmentType::Full),
            2 => Some(FragmentType::First),
            3 => Some(FragmentType::Middle),
            4 => Some(FragmentType::Last),
            _ => None,
        }
    }
}

/// CRC of a fragment: covers the type byte and the payload.
fn fragment_crc(kind: u8, payload: &[u8]) -> u32 {
    crate::checksum::crc32c_extend(crate::checksum::crc32c(&[kind]), payload)
}

#[cfg(test)]
mod tests;
