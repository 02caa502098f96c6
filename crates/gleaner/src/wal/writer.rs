//! Appends records to a log file.

use super::{BLOCK_SIZE, FragmentType, HEADER_SIZE, fragment_crc};
use crate::checksum::mask;
use crate::error::Result;
use crate::io::WritableFile;

/// Writes records in the log format to a file. The caller decides when to flush (hand bytes to
/// the OS) and when to sync (make them durable).
#[derive(Debug)]
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Bytes used in the current block.
    block_offset: usize,
}

impl LogWriter {
    /// Starts a log at the beginning of an empty file.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        LogWriter { file, block_offset }
    }

    /// Appends one record (fragmenting it across blocks as needed).
    pub fn add_record(&mut self, data: &[u8]) -> Result<()> {
        let mut rest = data;
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
            let len = rest.len().min(avail);
            let last = len == rest.len();
            let kind = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, false) => FragmentType::Middle,
                (false, true) => FragmentType::Last,
            };
            self.emit(kind, &rest[..len])?;
            rest = &rest[len..];
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    fn emit(&mut self, kind: FragmentType, payload: &[u8]) -> Result<()> {
        debug_assert!(payload.len() <= BLOCK_SIZE - HEADER_SIZE);
        let crc = mask(fragment_crc(kind as u8, payload));
        let mut header = [0u8; HEADER_SIZE];
        header[..4].copy_from_slice(&crc.to_le_bytes());
        header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        header[6] = kind as u8;
        self.file.append(&header)?;
        self.file.append(payload)?;
        self.block_offset += HEADER_SIZE + payload.len();
        Ok(())
    }

    /// Hands buffered bytes to the operating system.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes written to the file so far.
    pub fn file_size(&self) -> u64 {
        self.file.len()
    }
}
