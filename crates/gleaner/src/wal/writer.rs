//! Appends records to a log file.

use super::{BLOCK_SIZE, FragmentType, HEADER_SIZE};
use crate::checksum::{crc32c, crc32c_extend, mask};
use crate::error::Result;
use crate::io::WritableFile;

/// Writes records in the log format to a file. The caller decides when to flush (hand bytes to
/// the OS) and when to sync (make them durable).
#[derive(Debug)]
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Bytes used in the current block.
    block_offset: usize,
    /// File size at the last successful sync.
    synced_size: u64,
}

impl LogWriter {
    /// Starts a log at the beginning of an empty file.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        let synced_size = file.len();
        LogWriter {
            file,
            block_offset,
            synced_size,
        }
    }

    /// Appends one record (fragmenting it across blocks as needed).
    pub fn add_record(&mut self, data: &[u8]) -> Result<()> {
        self.add_record_parts(&[data])
    }

    /// Appends one record made of the concatenation of `parts`, without copying them into one
    /// buffer first (the group-commit leader writes a header and each batch's operations).
    pub fn add_record_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        let mut remaining: usize = parts.iter().map(|p| p.len()).sum();
        let mut cursor = (0usize, 0usize);
        let mut first = true;
        loop {
            let left_in_block = BLOCK_SIZE - self.block_offset;
            if left_in_block < HEADER_SIZE {
                // Too small for a header: pad with zeros and start a new block.
                if left_in_block > 0 {
                    self.file.append(&[0u8; HEADER_SIZE][..left_in_block])?;
                }
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let len = remaining.min(avail);
            let last = len == remaining;
            let kind = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, false) => FragmentType::Middle,
                (false, true) => FragmentType::Last,
            };
            // Two passes over the fragment's slices: the CRC goes in the header, which is written
            // first.
            let mut crc = crc32c(&[kind as u8]);
            walk(parts, cursor, len, |s| {
                crc = crc32c_extend(crc, s);
                Ok(())
            })?;
            self.emit_header(kind, len, crc)?;
            let file = &mut self.file;
            cursor = walk(parts, cursor, len, |s| file.append(s))?;
            self.block_offset += HEADER_SIZE + len;
            remaining -= len;
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    fn emit_header(&mut self, kind: FragmentType, len: usize, crc: u32) -> Result<()> {
        debug_assert!(len <= BLOCK_SIZE - HEADER_SIZE);
        let mut header = [0u8; HEADER_SIZE];
        header[..4].copy_from_slice(&mask(crc).to_le_bytes());
        header[4..6].copy_from_slice(&(len as u16).to_le_bytes());
        header[6] = kind as u8;
        self.file.append(&header)
    }

    /// Hands buffered bytes to the operating system.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()?;
        self.synced_size = self.file.len();
        Ok(())
    }

    /// File size at the last successful sync: every byte below it is durable.
    pub fn synced_size(&self) -> u64 {
        self.synced_size
    }

    /// Bytes written to the file so far.
    pub fn file_size(&self) -> u64 {
        self.file.len()
    }
}

/// Calls `f` on consecutive slices covering `len` bytes of the concatenation of `parts`,
/// starting at `cursor` (part index, offset in part); returns the cursor after them.
fn walk(
    parts: &[&[u8]],
    mut cursor: (usize, usize),
    mut len: usize,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(usize, usize)> {
    while len > 0 {
        let (i, off) = cursor;
        let part = &parts[i][off..];
        let take = part.len().min(len);
        if take > 0 {
            f(&part[..take])?;
        }
        len -= take;
        cursor = if off + take == parts[i].len() {
            (i + 1, 0)
        } else {
            (i, off + take)
        };
    }
    Ok(cursor)
}
