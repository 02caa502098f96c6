//! Value tables (`.vst`) and value handles: where separated values live.
//!
//! A value table is an immutable file of *records* `(key, seq, value)` in internal-key order
//! (Scavenger's RecordBasedTable), followed by a *dense index* with one entry per record,
//! `internal key → (offset, len)`, in prefix-compressed blocks; a *top index* with one entry per
//! dense block; a properties block; and a fixed 64-byte footer:
//!
//! ```text
//! record* | dense index blocks | top index block | properties block | footer
//! ```
//!
//! A value handle `{file_number, offset, len}` names one record, which is read with exactly one
//! positional read of `len` bytes ([`ValueTable::read_record`]). GC's lazy read walks the dense
//! index alone ([`ValueTable::index_iter`]), decides what is live, and then reads only live
//! records, coalescing adjacent ones ([`ValueTable::read_range`] and [`RecordIter`]).
//! docs/format.md ("Value table") is the byte-level specification.

pub mod builder;
pub mod drop_keys;
pub mod format;
pub mod index;
pub mod iter;
pub mod properties;
pub mod reader;
pub mod record;
pub mod segment;

#[cfg(test)]
mod tests;

pub use builder::{FinishedValueTable, ValueTableBuilder, ValueTableBuilderOptions};
pub use drop_keys::{DropFileReader, DropKey, WalkItem, WrittenBlock, write_drop_file};
pub use format::{FORMAT_VERSION, FORMAT_VERSION_EXPIRY, FORMAT_VERSION_WRITE_ORDER};
pub use index::{DEFAULT_INDEX_BLOCK_SIZE, IndexEntry};
pub use iter::ValueIndexIter;
pub use properties::ValueTableProperties;
pub use reader::ValueTable;
pub use record::{OwnedRecord, RecordIter, RecordRef, decode_record};
mod handle;

pub use handle::{HandlePayload, MAX_HANDLE_LEN, MAX_HANDLE_PAYLOAD, StoredHandle, ValueHandle};
