//! WAL records: `sync point: u64 | write batch` (docs/format.md, "WAL record"). Reading them is
//! shared by recovery, `gleaner check` and `gleaner dump`.

use super::{LogReader, WAL_SYNC_POINT_LEN, wal_sync_point};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::io::{CountedReader, IoClass};
use crate::key::MAX_SEQUENCE;
use crate::options::{MAX_BATCH_SIZE_LIMIT, WalRecoveryMode};

/// A reader over WAL `file_name` that knows the WAL's record limit and sync points.
pub fn wal_reader(
    file: CountedReader,
    file_name: String,
    class: IoClass,
    mode: WalRecoveryMode,
) -> Result<LogReader> {
    Ok(LogReader::new(
        file,
        file_name,
        class,
        mode,
        MAX_BATCH_SIZE_LIMIT as usize + WAL_SYNC_POINT_LEN,
    )?
    .with_sync_points(wal_sync_point))
}

/// Writes a *sync marker*: a record holding only a sync point, appended after a sync that no
/// later write will follow (at close), so the log itself records that everything before it is
/// durable. Call [`LogWriter::sync`](super::LogWriter::sync) first and again after.
pub fn write_sync_marker(writer: &mut super::LogWriter) -> Result<()> {
    let synced = writer.synced_size().to_le_bytes();
    writer.add_record(&synced)
}

/// Decodes one WAL record into its write batch, checking the batch's encoding and its sequence
/// range; `None` for a sync marker. `file` and `offset` locate the record for errors.
pub fn decode_wal_record(
    mut record: Vec<u8>,
    file: &str,
    offset: u64,
) -> Result<Option<WriteBatch>> {
    if record.len() < WAL_SYNC_POINT_LEN {
        return Err(Error::corruption(
            file,
            offset,
            "WAL record shorter than its sync point",
        ));
    }
    if record.len() == WAL_SYNC_POINT_LEN {
        return Ok(None);
    }
    record.drain(..WAL_SYNC_POINT_LEN);
    let batch = WriteBatch::decode(record, file, offset)?;
    let first = batch.sequence();
    if first == 0 || first.saturating_add(u64::from(batch.count())) > MAX_SEQUENCE {
        return Err(Error::corruption(
            file,
            offset,
            format!("batch sequence {first} out of range"),
        ));
    }
    Ok(Some(batch))
}
