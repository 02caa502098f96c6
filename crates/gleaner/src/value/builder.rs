//! Writes a value table from records added in internal-key order.
//!
//! File layout: records, dense index blocks, top index block, properties block, footer. Records
//! are appended as they are added (a header-and-key buffer, then the value slice itself, so a
//! value is never copied by the builder); the dense index is kept in memory, compressed block by
//! block, until [`ValueTableBuilder::finish`] writes it after the last record.

use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::table::block_io::write_block;
use crate::table::format::MAX_BLOCK_SIZE;
use crate::table::{BlockBuilder, Compression};

use super::format::{FOOTER_LEN, FORMAT_VERSION, FORMAT_VERSION_EXPIRY, Footer};
use super::index::{DEFAULT_INDEX_BLOCK_SIZE, DenseIndexBuilder};
use super::properties::ValueTableProperties;
use super::record::{check_record_limits, write_record};

/// How a value table is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueTableBuilderOptions {
    /// A dense index block is cut once its uncompressed size (restart array included) reaches
    /// this many bytes. Default 4096; must be in `1..=64 MiB`.
    pub index_block_size: usize,
    /// Compression of the index blocks and the properties block. Default
    /// [`Compression::Lz4`]. Records are never compressed.
    pub compression: Compression,
    /// Placement class stored in the table's properties (0 = default; GC policies use other
    /// values for hot/cold or lifetime classes). Default 0.
    pub class: u32,
}

impl Default for ValueTableBuilderOptions {
    fn default() -> Self {
        ValueTableBuilderOptions {
            index_block_size: DEFAULT_INDEX_BLOCK_SIZE,
            compression: Compression::Lz4,
            class: 0,
        }
    }
}

impl ValueTableBuilderOptions {
    /// Checks every option against its documented range; `Error::InvalidArgument` naming the
    /// option otherwise.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_BLOCK_SIZE).contains(&self.index_block_size) {
            return Err(Error::invalid(format!(
                "index_block_size {} is outside 1..={MAX_BLOCK_SIZE}",
                self.index_block_size
            )));
        }
        Ok(())
    }
}

/// What [`ValueTableBuilder::finish`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedValueTable {
    /// The properties stored in the table.
    pub properties: ValueTableProperties,
    /// Size of the complete file in bytes (the value
    /// [`ValueTable::open`](super::ValueTable::open) expects).
    pub file_size: u64,
}

/// Builds one value table. Records must be added in strictly increasing internal-key order:
/// user key ascending, and for equal user keys sequence number descending.
///
/// After an I/O error the builder is unusable: every later call returns the same error, and the
/// caller should delete the partial file. Refused arguments (`Error::InvalidArgument`) write
/// nothing and leave the builder usable.
#[derive(Debug)]
pub struct ValueTableBuilder {
    file: Box<dyn WritableFile>,
    opts: ValueTableBuilderOptions,
    /// Bytes written so far: the offset of the next record.
    offset: u64,
    index: DenseIndexBuilder,
    /// The previous record's user key and sequence number, for the order check.
    last_key: Vec<u8>,
    last_seq: u64,
    /// Reused buffer for one record's CRC, header and key.
    record_buf: Vec<u8>,
    props: ValueTableProperties,
    error: Option<Error>,
}

impl ValueTableBuilder {
    /// Starts a value table in `file`, which must be empty (records start at offset 0).
    /// Fails with `Error::InvalidArgument` when `opts` is out of range (see
    /// [`ValueTableBuilderOptions`]) or the file is not empty.
    pub fn new(
        file: Box<dyn WritableFile>,
        opts: ValueTableBuilderOptions,
    ) -> Result<ValueTableBuilder> {
        opts.validate()?;
        if !file.is_empty() {
            return Err(Error::invalid(format!(
                "a value table must start in an empty file, this one holds {} bytes",
                file.len()
            )));
        }
        Ok(ValueTableBuilder {
            file,
            opts,
            offset: 0,
            index: DenseIndexBuilder::new(opts.index_block_size, opts.compression),
            last_key: Vec::new(),
            last_seq: 0,
            record_buf: Vec::new(),
            props: ValueTableProperties::default(),
            error: None,
        })
    }

    /// Appends the record `(user_key, seq, value)` and returns its location `(offset, len)`:
    /// the record's first byte and its whole length, from which the caller builds a value
    /// handle.
    ///
    /// `Error::InvalidArgument`, with nothing written, when `user_key` exceeds 64 KiB
    /// ([`MAX_KEY_SIZE`](crate::options::MAX_KEY_SIZE)), `value` exceeds 256 MiB
    /// ([`MAX_VALUE_LEN`](crate::table::format::MAX_VALUE_LEN)), `seq` exceeds
    /// [`MAX_SEQUENCE`](crate::key::MAX_SEQUENCE), `(user_key, seq)` does not sort strictly
    /// after the previous record, or the table's top index would outgrow its block limit. I/O
    /// errors are returned as they happen and poison the builder.
    pub fn add(&mut self, user_key: &[u8], seq: u64, value: &[u8]) -> Result<(u64, u64)> {
        self.add_expiring(user_key, seq, value, None)
    }

    /// [`ValueTableBuilder::add`] of a record whose version expires at `expiry` (milliseconds
    /// since the Unix epoch), if it does: the dense index keeps the expiry, and a table holding
    /// any such record is written in format 2 (docs/format.md).
    ///
    /// Errors: those of `add`, and `Error::InvalidArgument` for an expiry later than
    /// [`MAX_EXPIRY_MS`](crate::expiry::MAX_EXPIRY_MS).
    pub fn add_expiring(
        &mut self,
        user_key: &[u8],
        seq: u64,
        value: &[u8],
        expiry: Option<u64>,
    ) -> Result<(u64, u64)> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.check_args(user_key, seq, value)?;
        if let Some(e) = expiry {
            crate::expiry::check_expiry(e)?;
        }

        let offset = self.offset;
        let written = write_record(&mut *self.file, &mut self.record_buf, user_key, seq, value);
        let len = self.record(written)?;
        self.offset += len;
        let indexed = self.index.add(user_key, seq, offset, len, expiry);
        self.record(indexed)?;

        let p = &mut self.props;
        if p.num_records == 0 {
            p.smallest_key = user_key.to_vec();
            p.smallest_seq = seq;
            p.largest_seq = seq;
        }
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        p.num_records += 1;
        if let Some(e) = expiry {
            p.expiring_records += 1;
            p.max_expiry = p.max_expiry.max(e);
        }
        p.key_bytes += user_key.len() as u64;
        p.value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(user_key);
        self.last_seq = seq;
        Ok((offset, len))
    }

    /// Number of records added so far.
    pub fn num_records(&self) -> u64 {
        self.props.num_records
    }

    /// What the file would roughly measure if finished now: the records written plus the
    /// dense index built so far (finished blocks as stored, the pending block uncompressed).
    /// The top index, the properties block and the 64-byte footer are not counted.
    pub fn estimated_file_size(&self) -> u64 {
        self.offset + self.index.estimated_size()
    }

    /// Writes the dense index blocks, the top index block, the properties block and the footer
    /// after the last record, then syncs the file. Returns the properties and the file size.
    /// An empty table (no records) is valid. Errors: the builder's earlier I/O error, or any
    /// I/O error while writing or syncing.
    pub fn finish(mut self) -> Result<FinishedValueTable> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.props.largest_key = std::mem::take(&mut self.last_key);
        // The oldest format that holds the table, so tables without expiring records read as
        // they always did.
        self.props.format_version = if self.props.expiring_records > 0 {
            FORMAT_VERSION_EXPIRY
        } else {
            FORMAT_VERSION
        };
        write_tail(
            &mut *self.file,
            self.offset,
            self.index,
            self.props,
            &self.opts,
        )
    }

    /// The argument checks of [`ValueTableBuilder::add`].
    fn check_args(&self, user_key: &[u8], seq: u64, value: &[u8]) -> Result<()> {
        check_record_limits(user_key, seq, value)?;
        if self.props.num_records > 0 {
            let in_order = match user_key.cmp(&self.last_key) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => seq < self.last_seq,
                std::cmp::Ordering::Less => false,
            };
            if !in_order {
                return Err(Error::invalid(format!(
                    "value-table records must be added in strictly increasing internal-key order \
                     (user key ascending, then sequence descending): seq {seq} after seq {}",
                    self.last_seq
                )));
            }
        }
        self.index.check_room(user_key.len())
    }

    /// Remembers a failure so that later calls report it instead of writing a broken table.
    fn record<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }
}

/// Writes what follows a value table's records, which end at `data_end`: the dense index
/// blocks, the top index block, the properties block and the footer; then syncs the file.
/// `props` holds the record statistics, the key range and the format version; the layout
/// fields and the class are set here. Shared by [`ValueTableBuilder::finish`] and the seal of a
/// value segment, whose records are not in key order but whose index is.
pub(crate) fn write_tail(
    file: &mut dyn WritableFile,
    data_end: u64,
    index: DenseIndexBuilder,
    mut props: ValueTableProperties,
    opts: &ValueTableBuilderOptions,
) -> Result<FinishedValueTable> {
    let mut offset = data_end;
    let (top_index, index_bytes) = index.finish(file, &mut offset)?;
    props.record_bytes = data_end;
    props.data_end = data_end;
    props.index_bytes = index_bytes;
    props.class = opts.class;
    let mut props_block = BlockBuilder::new(1);
    props.encode_to(&mut props_block);
    let properties = write_block(
        file,
        &mut offset,
        props_block.finish(),
        opts.compression,
        &mut Vec::new(),
    )?;
    let footer = Footer {
        top_index,
        properties,
        format_version: props.format_version,
    };
    file.append(&footer.encode())?;
    offset += FOOTER_LEN as u64;
    file.sync()?;
    Ok(FinishedValueTable {
        properties: props,
        file_size: offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::MAX_SEQUENCE;
    use crate::options::MAX_KEY_SIZE;
    use crate::table::test_util::MemFile;
    use crate::value::record::{RecordIter, encoded_record_len};

    fn builder(file: &MemFile) -> ValueTableBuilder {
        ValueTableBuilder::new(Box::new(file.writer()), ValueTableBuilderOptions::default())
            .unwrap()
    }

    #[test]
    fn options_are_validated() {
        assert!(ValueTableBuilderOptions::default().validate().is_ok());
        for bad in [0, MAX_BLOCK_SIZE + 1] {
            let opts = ValueTableBuilderOptions {
                index_block_size: bad,
                ..Default::default()
            };
            let err = opts.validate().unwrap_err();
            assert!(err.to_string().contains("index_block_size"), "{err}");
            let file = MemFile::default();
            assert!(ValueTableBuilder::new(Box::new(file.writer()), opts).is_err());
        }
        let file = MemFile::from_bytes(vec![1]);
        assert!(matches!(
            ValueTableBuilder::new(Box::new(file.writer()), Default::default()),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn records_are_laid_out_back_to_back() {
        let file = MemFile::default();
        let mut b = builder(&file);
        let mut want = Vec::new();
        for (k, s, v) in [
            (&b"a"[..], 9, &b"one"[..]),
            (b"a", 3, b""),
            (b"b", 5, b"xyz"),
        ] {
            let (offset, len) = b.add(k, s, v).unwrap();
            assert_eq!(offset, want.len() as u64);
            assert_eq!(len, encoded_record_len(k.len(), v.len()));
            crate::value::record::encode_record(&mut want, k, s, v);
        }
        assert_eq!(b.num_records(), 3);
        assert!(b.estimated_file_size() >= want.len() as u64);
        let done = b.finish().unwrap();
        let bytes = file.bytes();
        assert_eq!(done.file_size, bytes.len() as u64);
        assert_eq!(&bytes[..want.len()], &want[..]);
        assert_eq!(*file.syncs.lock(), 1);
        let p = &done.properties;
        assert_eq!(p.data_end, want.len() as u64);
        assert_eq!(p.record_bytes, p.data_end);
        assert_eq!((p.num_records, p.key_bytes, p.value_bytes), (3, 3, 6));
        assert_eq!((p.smallest_seq, p.largest_seq), (3, 9));
        assert_eq!(
            (&p.smallest_key[..], &p.largest_key[..]),
            (&b"a"[..], &b"b"[..])
        );
        assert_eq!(p.format_version, FORMAT_VERSION);
        let n = RecordIter::new(&bytes[..want.len()], 0, "t").count();
        assert_eq!(n, 3);
    }

    #[test]
    fn out_of_order_records_and_limits_are_refused_without_writing() {
        let file = MemFile::default();
        let mut b = builder(&file);
        b.add(b"m", 10, b"v").unwrap();
        let len = file.len();
        for (k, s) in [
            (&b"m"[..], 10),
            (b"m", 11),
            (b"a", 1),
            (b"l", u64::from(u32::MAX)),
            (b"", 5),
        ] {
            let err = b.add(k, s, b"x").unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{k:?}@{s}: {err}");
        }
        assert!(b.add(b"z", MAX_SEQUENCE + 1, b"").is_err());
        assert!(b.add(&vec![b'z'; MAX_KEY_SIZE + 1], 1, b"").is_err());
        assert_eq!(file.len(), len);
        // Still usable: later keys and older versions of the same key are accepted.
        b.add(b"m", 9, b"").unwrap();
        b.add(b"m\0", 100, b"").unwrap();
        b.add(&vec![b'z'; MAX_KEY_SIZE], MAX_SEQUENCE, b"").unwrap();
        assert_eq!(b.num_records(), 4);
        b.finish().unwrap();
    }

    #[test]
    fn an_empty_table_has_only_metadata() {
        let file = MemFile::default();
        let done = builder(&file).finish().unwrap();
        assert_eq!(done.properties.num_records, 0);
        assert_eq!(done.properties.data_end, 0);
        assert_eq!(done.file_size, file.len());
    }
}
