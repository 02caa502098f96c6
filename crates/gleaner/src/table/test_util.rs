//! In-memory files for the key-table tests (the fault-injecting file system lives elsewhere).

use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::io::accounting::CountedReader;
use crate::io::{IoStats, RandomAccessFile, WritableFile};

/// A growable byte buffer shared between a writer and any number of readers.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemFile {
    data: Arc<Mutex<Vec<u8>>>,
    pub(crate) syncs: Arc<Mutex<usize>>,
}

impl MemFile {
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Self {
        MemFile {
            data: Arc::new(Mutex::new(bytes)),
            syncs: Arc::default(),
        }
    }

    pub(crate) fn writer(&self) -> MemWriter {
        MemWriter(self.clone())
    }

    pub(crate) fn reader(&self) -> CountedReader {
        self.reader_with_stats(Arc::default())
    }

    pub(crate) fn reader_with_stats(&self, stats: Arc<IoStats>) -> CountedReader {
        CountedReader::new(Arc::new(self.clone()), stats)
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.data.lock().clone()
    }

    pub(crate) fn len(&self) -> u64 {
        self.data.lock().len() as u64
    }

    pub(crate) fn flip(&self, at: usize, mask: u8) {
        self.data.lock()[at] ^= mask;
    }
}

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let data = self.data.lock();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| data.get(start..end))
        {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::io(
                "reading memory file",
                io::Error::from(io::ErrorKind::UnexpectedEof),
            )),
        }
    }

    fn size(&self) -> Result<u64> {
        Ok(self.len())
    }
}

/// The writing side of a [`MemFile`].
#[derive(Debug)]
pub(crate) struct MemWriter(MemFile);

impl WritableFile for MemWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.0.data.lock().extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        *self.0.syncs.lock() += 1;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.0.len()
    }
}
