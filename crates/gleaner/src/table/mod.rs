//! Key tables: the immutable sorted files of the index tree (`.sst`).
//!
//! A key table is a sequence of prefix-compressed data blocks, an optional whole-table bloom
//! filter over user keys, an index block with one entry per data block, a properties block and a
//! fixed-size footer. Every block carries a type byte (compression) and a masked CRC32C.
//! docs/format.md ("Key table") is the byte-level specification.

pub mod block;
pub mod block_builder;
pub(crate) mod block_io;
pub mod bloom;
pub mod builder;
pub mod format;
pub mod iter;
pub mod properties;
pub(crate) mod property_block;
pub mod reader;

#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockIter, Comparator};
pub use block_builder::{BlockBuilder, DEFAULT_RESTART_INTERVAL};
pub use bloom::{BloomBuilder, BloomFilter, DEFAULT_BITS_PER_KEY};
pub use builder::{DEFAULT_BLOCK_SIZE, FinishedTable, TableBuilder, TableBuilderOptions};
pub use format::{BlockHandle, Compression, FORMAT_VERSION, Footer};
pub use iter::TableIter;
pub use properties::TableProperties;
pub use reader::{ReadCtx, Table};
