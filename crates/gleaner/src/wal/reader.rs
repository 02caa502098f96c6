//! Reads records back from a log file, deciding what damage means.
//!
//! Damage is anything that is not a well-formed, checksum-valid fragment in the expected
//! FIRST/MIDDLE/LAST order. When damage is found, the reader looks for any valid fragment after
//! it. None means the damage is a torn tail (writes in flight at a crash): it is cut off and
//! reported in [`LogReader::dropped`]. A valid fragment after it means the damage is in the
//! middle of written data: under [`WalRecoveryMode::TolerateCorruptedTail`] that is
//! `Error::Corruption`; under [`WalRecoveryMode::SkipAnyCorruptedRecords`] the damaged region is
//! skipped, reported, and reading resumes at the valid fragment.

use super::{BLOCK_SIZE, FragmentType, HEADER_SIZE, fragment_crc};
use crate::checksum::unmask;
use crate::coding::decode_fixed32;
use crate::error::{Error, Result};
use crate::io::{CountedReader, IoClass};
use crate::options::WalRecoveryMode;

/// Extracts the sync point from a record payload (`None` when the payload is too short).
pub type SyncPointFn = fn(&[u8]) -> Option<u64>;

/// A region of a log that recovery could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRegion {
    /// File offset where the region starts.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Why it was dropped.
    pub reason: String,
}

enum Fragment {
    Ok {
        offset: u64,
        kind: FragmentType,
        start: usize,
        len: usize,
    },
    Bad {
        offset: u64,
        reason: &'static str,
    },
    Eof,
}

/// Reads the records of one log file in order.
#[derive(Debug)]
pub struct LogReader {
    file: CountedReader,
    file_name: String,
    file_size: u64,
    class: IoClass,
    mode: WalRecoveryMode,
    max_record_size: usize,
    sync_point: Option<SyncPointFn>,
    block: Vec<u8>,
    block_start: u64,
    next_block_start: u64,
    pos: usize,
    dropped: Vec<DroppedRegion>,
    done: bool,
}

impl LogReader {
    /// A reader over `file` (named `file_name` in errors). Records larger than
    /// `max_record_size` are damage. Reads are counted under `class`.
    pub fn new(
        file: CountedReader,
        file_name: String,
        class: IoClass,
        mode: WalRecoveryMode,
        max_record_size: usize,
    ) -> Result<Self> {
        let file_size = file.size()?;
        Ok(Self::with_size(
            file,
            file_name,
            file_size,
            class,
            mode,
            max_record_size,
        ))
    }

    fn with_size(
        file: CountedReader,
        file_name: String,
        file_size: u64,
        class: IoClass,
        mode: WalRecoveryMode,
        max_record_size: usize,
    ) -> Self {
        LogReader {
            file,
            file_name,
            file_size,
            class,
            mode,
            max_record_size,
            sync_point: None,
            block: Vec::with_capacity(BLOCK_SIZE),
            block_start: 0,
            next_block_start: 0,
            pos: 0,
            dropped: Vec::new(),
            done: false,
        }
    }

    /// Tells the reader how to find, in a record's payload, the log offset up to which the log
    /// was durable when the record was written (the WAL records it; the manifest, synced after
    /// every record, does not need it). With it, damage followed by intact records is treated
    /// as a torn tail unless a later record proves the damaged bytes had been synced.
    #[must_use]
    pub fn with_sync_points(mut self, f: SyncPointFn) -> Self {
        self.sync_point = Some(f);
        self
    }

    /// Regions that were cut off or skipped so far.
    pub fn dropped(&self) -> &[DroppedRegion] {
        &self.dropped
    }

    /// Reads the next record: `Some((offset, payload))`, or `None` at the end of the usable
    /// log.
    pub fn read_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        let mut record: Vec<u8> = Vec::new();
        let mut record_start: Option<u64> = None;
        loop {
            let fragment = self.next_fragment()?;
            let (offset, kind, start, len) = match fragment {
                Fragment::Eof => {
                    if let Some(rs) = record_start {
                        self.cut_tail(rs, "record truncated at end of file");
                    }
                    self.done = true;
                    return Ok(None);
                }
                Fragment::Bad { offset, reason } => {
                    let region_start = record_start.unwrap_or(offset);
                    record.clear();
                    record_start = None;
                    if !self.resync(region_start, offset + 1, reason)? {
                        return Ok(None);
                    }
                    continue;
                }
                Fragment::Ok {
                    offset,
                    kind,
                    start,
                    len,
                } => (offset, kind, start, len),
            };
            let in_record = record_start.is_some();
            match (kind, in_record) {
                (FragmentType::Full | FragmentType::First, true) => {
                    // A new record began before the previous one ended.
                    let region_start = record_start.take().unwrap_or(offset);
                    record.clear();
                    if !self.resync(region_start, offset, "record interrupted by a new record")? {
                        return Ok(None);
                    }
                    continue;
                }
                (FragmentType::Middle | FragmentType::Last, false) => {
                    if !self.resync(offset, offset + 1, "continuation fragment without a start")? {
                        return Ok(None);
                    }
                    continue;
                }
                _ => {}
            }
            if record.len() + len > self.max_record_size {
                let region_start = record_start.unwrap_or(offset);
                record.clear();
                record_start = None;
                if !self.resync(region_start, offset + 1, "record exceeds the size limit")? {
                    return Ok(None);
                }
                continue;
            }
            record.extend_from_slice(&self.block[start..start + len]);
            match kind {
                FragmentType::Full => return Ok(Some((offset, record))),
                FragmentType::First => record_start = Some(offset),
                FragmentType::Middle => {}
                FragmentType::Last => {
                    let rs = record_start.unwrap_or(offset);
                    return Ok(Some((rs, record)));
                }
            }
        }
    }

    fn cut_tail(&mut self, from: u64, reason: &str) {
        if from < self.file_size {
            self.dropped.push(DroppedRegion {
                offset: from,
                len: self.file_size - from,
                reason: reason.to_string(),
            });
        }
    }

    /// Handles damage found at `region_start`; the search for intact data starts at
    /// `search_from`. Returns `Ok(true)` when reading continues, `Ok(false)` at the end of the
    /// usable log.
    fn resync(
        &mut self,
        region_start: u64,
        search_from: u64,
        reason: &'static str,
    ) -> Result<bool> {
        match self.find_valid_fragment(search_from)? {
            None => {
                self.cut_tail(region_start, reason);
                self.done = true;
                Ok(false)
            }
            Some(next) => match self.mode {
                WalRecoveryMode::TolerateCorruptedTail => {
                    // Intact records after damage are normal in the unsynced tail (the OS may
                    // write pages back out of order before a power loss). Only if a later record
                    // proves the damaged bytes had been synced is the damage real corruption.
                    if let Some(sync_point) = self.sync_point {
                        let synced = self.max_sync_point_from(next, sync_point)?;
                        if synced <= region_start {
                            self.cut_tail(region_start, reason);
                            self.done = true;
                            return Ok(false);
                        }
                        return Err(Error::corruption(
                            &self.file_name,
                            region_start,
                            format!(
                                "{reason} in data that was synced (a later record says the log was durable up to offset {synced})"
                            ),
                        ));
                    }
                    Err(Error::corruption(
                        &self.file_name,
                        region_start,
                        format!("{reason}, followed by intact records at offset {next}"),
                    ))
                }
                WalRecoveryMode::SkipAnyCorruptedRecords => {
                    self.dropped.push(DroppedRegion {
                        offset: region_start,
                        len: next - region_start,
                        reason: reason.to_string(),
                    });
                    self.seek_to(next)?;
                    Ok(true)
                }
            },
        }
    }

    /// The largest sync point named by any intact record at or after `from`.
    fn max_sync_point_from(&self, from: u64, sync_point: SyncPointFn) -> Result<u64> {
        let mut probe = Self::with_size(
            self.file.clone(),
            self.file_name.clone(),
            self.file_size,
            self.class,
            WalRecoveryMode::SkipAnyCorruptedRecords,
            self.max_record_size,
        );
        probe.seek_to(from)?;
        let mut max = 0;
        while let Some((_, record)) = probe.read_record()? {
            if let Some(s) = sync_point(&record) {
                max = max.max(s);
            }
        }
        Ok(max)
    }

    fn load_block(&mut self, block_start: u64) -> Result<()> {
        let len = (self.file_size - block_start).min(BLOCK_SIZE as u64) as usize;
        self.block.resize(len, 0);
        self.file
            .read_exact_at(&mut self.block, block_start, self.class)?;
        self.block_start = block_start;
        self.next_block_start = block_start + BLOCK_SIZE as u64;
        Ok(())
    }

    fn seek_to(&mut self, offset: u64) -> Result<()> {
        let block_start = offset - offset % BLOCK_SIZE as u64;
        self.load_block(block_start)?;
        self.pos = (offset - block_start) as usize;
        Ok(())
    }

    fn next_fragment(&mut self) -> Result<Fragment> {
        loop {
            if self.pos + HEADER_SIZE > self.block.len() {
                if self.pos < self.block.len() && self.block.len() < BLOCK_SIZE {
                    // Bytes at the end of the file too short for a header: a torn header (the
                    // writer pads only blocks it completes).
                    return Ok(Fragment::Bad {
                        offset: self.block_start + self.pos as u64,
                        reason: "truncated fragment header",
                    });
                }
                // The block is used up, or only its zero padding is left.
                if self.next_block_start >= self.file_size {
                    return Ok(Fragment::Eof);
                }
                self.load_block(self.next_block_start)?;
                self.pos = 0;
                continue;
            }
            let offset = self.block_start + self.pos as u64;
            let header = &self.block[self.pos..self.pos + HEADER_SIZE];
            let stored_crc = unmask(decode_fixed32(&header[..4]));
            let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let kind_byte = header[6];
            let start = self.pos + HEADER_SIZE;
            if start + len > self.block.len() {
                return Ok(Fragment::Bad {
                    offset,
                    reason: if self.block.len() < BLOCK_SIZE && start + len <= BLOCK_SIZE {
                        "fragment truncated at end of file"
                    } else {
                        "fragment length runs past its block"
                    },
                });
            }
            let Some(kind) = FragmentType::from_byte(kind_byte) else {
                return Ok(Fragment::Bad {
                    offset,
                    reason: "unknown fragment type",
                });
            };
            if fragment_crc(kind_byte, &self.block[start..start + len]) != stored_crc {
                return Ok(Fragment::Bad {
                    offset,
                    reason: "fragment checksum mismatch",
                });
            }
            self.pos = start + len;
            return Ok(Fragment::Ok {
                offset,
                kind,
                start,
                len,
            });
        }
    }

    /// Offset of the first checksum-valid fragment at or after `from`, if any.
    fn find_valid_fragment(&self, from: u64) -> Result<Option<u64>> {
        let mut block_start = from - from % BLOCK_SIZE as u64;
        let mut first = (from - block_start) as usize;
        let mut buf = Vec::new();
        while block_start < self.file_size {
            let len = (self.file_size - block_start).min(BLOCK_SIZE as u64) as usize;
            buf.resize(len, 0);
            self.file.read_exact_at(&mut buf, block_start, self.class)?;
            let mut p = first;
            while p + HEADER_SIZE <= buf.len() {
                if valid_fragment_at(&buf, p) {
                    return Ok(Some(block_start + p as u64));
                }
                p += 1;
            }
            block_start += BLOCK_SIZE as u64;
            first = 0;
        }
        Ok(None)
    }
}

fn valid_fragment_at(block: &[u8], p: usize) -> bool {
    let header = &block[p..p + HEADER_SIZE];
    let kind = header[6];
    if FragmentType::from_byte(kind).is_none() {
        return false;
    }
    let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
    let start = p + HEADER_SIZE;
    if start + len > block.len() {
        return false;
    }
    fragment_crc(kind, &block[start..start + len]) == unmask(decode_fixed32(&header[..4]))
}
