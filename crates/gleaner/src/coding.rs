//! Little-endian fixed-width integers and LEB128 varints: the primitive encodings of every
//! on-disk format (see docs/format.md, "Primitive encodings").

/// Longest encoding of a `u64` varint.
pub const MAX_VARINT64_LEN: usize = 10;

/// Appends `v` as a LEB128 varint.
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `v` as a LEB128 varint.
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Appends a little-endian `u32`.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends a little-endian `u64`.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian `u32` from the first four bytes. Callers check the length.
pub fn decode_fixed32(src: &[u8]) -> u32 {
    u32::from_le_bytes([src[0], src[1], src[2], src[3]])
}

/// Reads a little-endian `u64` from the first eight bytes. Callers check the length.
pub fn decode_fixed64(src: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&src[..8]);
    u64::from_le_bytes(b)
}

/// Decodes a varint at the start of `src`; returns the value and the bytes consumed, or `None`
/// when the input is truncated or the encoding is longer than ten bytes / overflows.
#[inline]
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    // One byte is the common case (block entry headers are small lengths): decided without
    // the loop.
    match src.first() {
        Some(&byte) if byte < 0x80 => Some((u64::from(byte), 1)),
        Some(_) => decode_varint64_long(src),
        None => None,
    }
}

/// [`decode_varint64`] for encodings of two bytes or more.
fn decode_varint64_long(src: &[u8]) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().enumerate().take(MAX_VARINT64_LEN) {
        let part = u64::from(byte & 0x7f);
        if i == MAX_VARINT64_LEN - 1 && part > 1 {
            return None;
        }
        result |= part << (7 * i);
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in 32 bits.
#[inline]
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = decode_varint64(src)?;
    u32::try_from(v).ok().map(|v| (v, n))
}

/// A forward-only reader over a byte slice whose every method fails with `None` instead of
/// panicking on truncated input; decoders turn `None` into `Error::Corruption`.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Reads a varint.
    #[inline]
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }

    /// Reads a varint that must fit in 32 bits.
    #[inline]
    pub fn varint32(&mut self) -> Option<u32> {
        u32::try_from(self.varint64()?).ok()
    }

    /// Reads a varint used as a length or count, which must fit in `usize`.
    pub fn varint_usize(&mut self) -> Option<usize> {
        usize::try_from(self.varint64()?).ok()
    }

    /// Reads a little-endian `u32`.
    pub fn fixed32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(decode_fixed32(b))
    }

    /// Reads a little-endian `u64`.
    pub fn fixed64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        Some(decode_fixed64(b))
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads exactly `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// Reads a varint length and that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = self.varint_usize()?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_at_boundaries() {
        let values = [
            0u64,
            1,
            127,
            128,
            255,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &v in &values {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert!(buf.len() <= MAX_VARINT64_LEN);
            assert_eq!(decode_varint64(&buf), Some((v, buf.len())), "value {v}");
            // Every strict prefix is truncated input.
            for cut in 0..buf.len() {
                assert_eq!(decode_varint64(&buf[..cut]), None);
            }
        }
    }

    #[test]
    fn overlong_varint_is_rejected() {
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        // Ten bytes whose last carries more than the one remaining bit overflows u64.
        let mut buf = vec![0xff; 9];
        buf.push(0x02);
        assert_eq!(decode_varint64(&buf), None);
        assert_eq!(decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
    }

    #[test]
    fn decoder_never_reads_past_the_end() {
        let mut buf = Vec::new();
        put_length_prefixed(&mut buf, b"hello");
        put_fixed32(&mut buf, 7);
        let mut d = Decoder::new(&buf);
        assert_eq!(d.length_prefixed(), Some(&b"hello"[..]));
        assert_eq!(d.fixed32(), Some(7));
        assert!(d.is_empty());
        assert_eq!(d.u8(), None);
        assert_eq!(d.fixed64(), None);
        let mut bad = Vec::new();
        put_varint64(&mut bad, 1 << 40);
        assert_eq!(Decoder::new(&bad).length_prefixed(), None);
    }
}
