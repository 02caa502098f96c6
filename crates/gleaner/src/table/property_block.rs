//! The property-block codec shared by key tables and value tables: a block of `name → value`
//! entries with plain byte-string keys in byte order; integers are varints spanning the whole
//! value. Unknown names are skipped (a later version may add properties); a known property that
//! is missing, repeated or malformed is `Error::Corruption` at the block's offset.

use std::sync::Arc;

use crate::coding::{decode_varint64, put_varint64};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;

use super::block::{Block, BlockIter};
use super::block_builder::BlockBuilder;

/// Adds properties to a block in name order (the caller adds them sorted).
pub(crate) struct PropertyWriter<'a> {
    block: &'a mut BlockBuilder,
    scratch: Vec<u8>,
}

impl<'a> PropertyWriter<'a> {
    /// Writes into `block` (an empty builder).
    pub(crate) fn new(block: &'a mut BlockBuilder) -> Self {
        PropertyWriter {
            block,
            scratch: Vec::with_capacity(16),
        }
    }

    /// An integer property.
    pub(crate) fn int(&mut self, name: &str, v: u64) {
        self.scratch.clear();
        put_varint64(&mut self.scratch, v);
        self.block.add(name.as_bytes(), &self.scratch);
    }

    /// A byte-string property.
    pub(crate) fn bytes(&mut self, name: &str, v: &[u8]) {
        self.block.add(name.as_bytes(), v);
    }
}

/// One known property's value as read from the block.
pub(crate) struct PropertyValue<'a> {
    name: &'static str,
    bytes: &'a [u8],
    file: &'a str,
    offset: u64,
}

impl PropertyValue<'_> {
    fn corrupt(&self, what: &str) -> Error {
        Error::corruption(
            self.file,
            self.offset,
            format!("property {} {what}", self.name),
        )
    }

    /// The value as an integer.
    pub(crate) fn int(&self) -> Result<u64> {
        match decode_varint64(self.bytes) {
            Some((v, n)) if n == self.bytes.len() => Ok(v),
            _ => Err(self.corrupt("is not a varint")),
        }
    }

    /// The value as an integer that must fit 32 bits.
    pub(crate) fn int32(&self) -> Result<u32> {
        u32::try_from(self.int()?).map_err(|_| self.corrupt("does not fit 32 bits"))
    }

    /// The value as UTF-8 text.
    pub(crate) fn text(&self) -> Result<String> {
        std::str::from_utf8(self.bytes)
            .map(str::to_owned)
            .map_err(|_| self.corrupt("is not UTF-8"))
    }

    /// The raw value.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.bytes.to_vec()
    }
}

/// Reads a property block whose known properties are `names`, calling `set(index into names,
/// value)` for each, and returns, per name, whether it appeared: the caller checks the ones it
/// requires, which may depend on a property's value (the table's format version). A repeated or malformed known property is still
/// `Error::Corruption`.
pub(crate) fn read_properties_partial(
    block: Arc<Block>,
    names: &[&'static str],
    mut set: impl FnMut(usize, &PropertyValue<'_>) -> Result<()>,
) -> Result<Vec<bool>> {
    let (file, offset) = (block.file_name().to_owned(), block.offset());
    let mut seen = vec![false; names.len()];
    let mut it = BlockIter::bytewise(block);
    it.seek_to_first()?;
    while it.valid() {
        if let Some(i) = names.iter().position(|n| n.as_bytes() == it.key()) {
            if std::mem::replace(&mut seen[i], true) {
                return Err(Error::corruption(
                    &file,
                    offset,
                    format!("property {} appears twice", names[i]),
                ));
            }
            let value = PropertyValue {
                name: names[i],
                bytes: it.value(),
                file: &file,
                offset,
            };
            set(i, &value)?;
        }
        it.next()?;
    }
    Ok(seen)
}
