//! Key tables: the immutable sorted files of the index tree (`.sst`).
//!
//! A key table is a sequence of prefix-compressed data blocks, an optional whole-table bloom
//! filter over user keys, an index block with one entry per data block, a properties block and a
//! fixed-size footer. Every block carries a type byte (compression) and a masked CRC32C.
//!
//! Two layouts exist, each its own footer format version ([`KeyTableLayout`]): *mixed*
//! (version 1), where inline values, tombstones and value handles share the data blocks, and
//! *index-decoupled* (version 2, Scavenger's IndexDecoupledTable), where value handles live in
//! separate handle blocks with their own index, and the filter has a second probe family that
//! tells whether a key has any inline entry. A GC validity lookup ([`Table::get_key`]) on an
//! index-decoupled table then touches only the filter, the pinned indexes and a handle block.
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
mod restart_heads;

#[cfg(test)]
mod decoupled_tests;
#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockIter, Comparator};
pub use block_builder::{BlockBuilder, DEFAULT_RESTART_INTERVAL};
pub use bloom::{BloomBuilder, BloomFilter, DEFAULT_BITS_PER_KEY};
pub use builder::{DEFAULT_BLOCK_SIZE, FinishedTable, TableBuilder, TableBuilderOptions};
pub use format::{
    BlockHandle, Compression, FORMAT_VERSION, FORMAT_VERSION_INDEX_DECOUPLED, FORMAT_VERSION_MIXED,
    Footer, KeyTableLayout, TablePart,
};
pub use iter::TableIter;
pub use properties::TableProperties;
pub use reader::{KeyEntry, ReadCtx, Table};
