//! The whole-table bloom filter over user keys.
//!
//! Filter block: `bits[m/8] | k: u8`, where `m` is a multiple of 8 and at least 64. Key `x` sets
//! bits `(h1 + i * h2) mod m` for `i` in `0..k`, with `h = bloom_hash(x)`, `h1 = h & 0xffff_ffff`,
//! `h2 = h >> 32` (Kirsch–Mitzenmacher double hashing). [`bloom_hash`] and this probe sequence
//! are an on-disk contract: changing either makes every existing filter answer wrongly.
//!
//! An index-decoupled table (format version 2) adds a second, independent probe family to the same
//! bit array: user keys that have at least one entry in the table's data part (an inline value or
//! a tombstone) are also added with [`inline_bloom_hash`], a differently seeded MurmurHash64A, and
//! the same `k` and probe sequence. [`BloomFilter::may_contain_inline`] asks that family, so a GC
//! validity lookup can skip the data part without reading a data block.

use crate::error::{Error, Result};

/// Default bits of filter per key (about 0.8% false positives).
pub const DEFAULT_BITS_PER_KEY: u32 = 10;

/// Largest accepted bits-per-key; more buys nothing (k is capped at 30 probes).
pub const MAX_BITS_PER_KEY: u32 = 64;

/// Most probes per key a filter may use; a stored `k` outside `1..=MAX_PROBES` is corruption.
pub const MAX_PROBES: u32 = 30;

/// Smallest bit array (64 bits), so tiny tables still get a useful false-positive rate.
const MIN_BITS: u64 = 64;

const SEED: u64 = 0x6c65_6e72_6b74_626c;

/// Seed of the inline probe family: ASCII `"glnrinln"` read big-endian.
const INLINE_SEED: u64 = 0x676c_6e72_696e_6c6e;

/// MurmurHash64A (Austin Appleby) with seed `0x6c65_6e72_6b74_626c`, reading 8-byte blocks as
/// little-endian on every platform. Frozen: it is part of the on-disk filter format.
pub fn bloom_hash(data: &[u8]) -> u64 {
    murmur_hash64a(data, SEED)
}

/// The hash of the inline probe family (format version 2): MurmurHash64A with seed
/// `0x676c_6e72_696e_6c6e`. Frozen like [`bloom_hash`]; independent of it because the seed enters
/// every round of the mix.
pub fn inline_bloom_hash(data: &[u8]) -> u64 {
    murmur_hash64a(data, INLINE_SEED)
}

/// MurmurHash64A with an explicit seed (separate so tests can check it against published
/// vectors).
fn murmur_hash64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        let mut k = u64::from_le_bytes(b);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Number of probes for `bits_per_key`: `round(bits_per_key * ln 2)` clamped to `1..=30`.
pub fn num_probes(bits_per_key: u32) -> u32 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32;
    k.clamp(1, MAX_PROBES)
}

/// The bit positions of a key with hash `h` in a filter of `num_bits` bits.
fn probes(h: u64, num_bits: u64, k: u32) -> impl Iterator<Item = u64> {
    let h1 = h & 0xffff_ffff;
    let h2 = h >> 32;
    // h1 + i * h2 < 2^32 * 31, far from overflow.
    (0..u64::from(k)).map(move |i| (h1 + i * h2) % num_bits)
}

/// Collects key hashes while a table is built and writes the filter block at the end.
#[derive(Debug, Clone)]
pub struct BloomBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// A builder using `bits_per_key` bits per key (callers validate it is in
    /// `1..=MAX_BITS_PER_KEY`).
    pub fn new(bits_per_key: u32) -> Self {
        BloomBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Adds a user key. Callers add each distinct user key once (the filter answers the same
    /// either way, but duplicates would size it too large).
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(bloom_hash(user_key));
    }

    /// Adds a user key to the inline probe family (index-decoupled tables: keys with at least
    /// one data-part entry). Each such key once, in addition to [`BloomBuilder::add_key`]; the
    /// filter is sized for both families together.
    pub fn add_inline_key(&mut self, user_key: &[u8]) {
        self.hashes.push(inline_bloom_hash(user_key));
    }

    /// Number of keys added, counting each probe family separately (what the filter is sized
    /// for).
    pub fn num_keys(&self) -> usize {
        self.hashes.len()
    }

    /// Appends the filter block contents to `dst`.
    pub fn finish(&self, dst: &mut Vec<u8>) {
        let wanted = (self.hashes.len() as u64).saturating_mul(u64::from(self.bits_per_key));
        let num_bytes = wanted.max(MIN_BITS).div_ceil(8);
        let num_bits = num_bytes * 8;
        let k = num_probes(self.bits_per_key);
        let start = dst.len();
        dst.resize(start + num_bytes as usize, 0);
        let bits = &mut dst[start..];
        for &h in &self.hashes {
            for bit in probes(h, num_bits, k) {
                bits[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        dst.push(k as u8);
    }
}

/// A parsed filter block.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    /// Bit array followed by the k byte.
    data: Vec<u8>,
    num_bits: u64,
    k: u32,
}

impl BloomFilter {
    /// Parses filter block contents read from `offset` of `file`. A block without at least one
    /// byte of bits and the k byte, or with k outside `1..=30`, is `Error::Corruption`.
    pub fn parse(data: Vec<u8>, file: &str, offset: u64) -> Result<BloomFilter> {
        let Some((&k, bits)) = data.split_last() else {
            return Err(Error::corruption(file, offset, "filter block is empty"));
        };
        if bits.is_empty() {
            return Err(Error::corruption(file, offset, "filter block has no bits"));
        }
        if !(1..=MAX_PROBES as u8).contains(&k) {
            return Err(Error::corruption(
                file,
                offset,
                format!("filter block has an unsupported probe count {k}"),
            ));
        }
        Ok(BloomFilter {
            num_bits: bits.len() as u64 * 8,
            k: u32::from(k),
            data,
        })
    }

    /// False when `user_key` was certainly not added; true when it may have been.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.probe(bloom_hash(user_key))
    }

    /// False when `user_key` was certainly not added to the inline probe family (so an
    /// index-decoupled table holds no data-part entry for it); true when it may have been. Only
    /// meaningful for filters of format version 2 tables.
    pub fn may_contain_inline(&self, user_key: &[u8]) -> bool {
        self.probe(inline_bloom_hash(user_key))
    }

    fn probe(&self, h: u64) -> bool {
        probes(h, self.num_bits, self.k)
            .all(|bit| self.data[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }

    /// Size of the filter in bytes.
    pub fn size(&self) -> usize {
        self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: u32) -> BloomFilter {
        let mut b = BloomBuilder::new(bits_per_key);
        for k in keys {
            b.add_key(&k);
        }
        let mut out = Vec::new();
        b.finish(&mut out);
        BloomFilter::parse(out, "t", 0).unwrap()
    }

    #[test]
    fn murmur_matches_published_vectors() {
        assert_eq!(murmur_hash64a(b"", 0), 0);
        assert_eq!(murmur_hash64a(b"fransisco", 1), 0x083f_daf4_a6d0_d3d9);
        assert_eq!(murmur_hash64a(b"aaaa", 0x9747_b28c), 0x41da_53fd_abaf_04c8);
        assert_eq!(murmur_hash64a(b"hash me", 22), 15_828_218_858_260_124_487);
    }

    #[test]
    fn hash_is_frozen() {
        // These values are part of the on-disk format: if this test fails, the hash changed and
        // every existing filter is wrong. Do not update them.
        assert_eq!(bloom_hash(b""), 0x104d_1c5d_2c57_9804);
        assert_eq!(bloom_hash(b"a"), 0xaefb_ffde_54c3_5031);
        assert_eq!(bloom_hash(b"gleaner"), 0x01fb_0a8f_7d8e_c9a0);
        assert_eq!(bloom_hash(b"0123456789abcdef!"), 0x18c3_d107_e497_796e);
        assert_eq!(inline_bloom_hash(b""), 0x70c8_fa38_9812_b87f);
        assert_eq!(inline_bloom_hash(b"a"), 0x6c74_07c7_43e9_a318);
        assert_eq!(inline_bloom_hash(b"gleaner"), 0x011d_d5e5_0f8c_f2a3);
        assert_eq!(
            inline_bloom_hash(b"0123456789abcdef!"),
            0x629f_b52d_456c_4969
        );
    }

    #[test]
    fn inline_family_is_independent_of_the_key_family() {
        // Every key in the key family, every third key also in the inline family.
        let n: usize = 10_000;
        let mut b = BloomBuilder::new(10);
        for i in 0..n {
            let k = format!("key{i}");
            b.add_key(k.as_bytes());
            if i % 3 == 0 {
                b.add_inline_key(k.as_bytes());
            }
        }
        assert_eq!(b.num_keys(), n + n.div_ceil(3));
        let mut out = Vec::new();
        b.finish(&mut out);
        let f = BloomFilter::parse(out, "t", 0).unwrap();
        let mut fp = 0;
        for i in 0..n {
            let k = format!("key{i}");
            assert!(f.may_contain(k.as_bytes()));
            if i % 3 == 0 {
                assert!(f.may_contain_inline(k.as_bytes()), "{i}");
            } else {
                fp += usize::from(f.may_contain_inline(k.as_bytes()));
            }
        }
        // Keys of the key family do not leak into the inline family beyond the usual rate.
        let rate = fp as f64 / (n - n.div_ceil(3)) as f64;
        assert!(rate < 0.02, "inline false-positive rate {rate}");
        let absent = (0..n)
            .filter(|i| f.may_contain(format!("absent{i}").as_bytes()))
            .count();
        assert!((absent as f64 / n as f64) < 0.02, "{absent}");
    }

    #[test]
    fn probe_counts() {
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(10), 7);
        assert_eq!(num_probes(20), 14);
        assert_eq!(num_probes(64), 30);
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        for n in [0usize, 1, 10, 100, 10_000] {
            let f = filter((0..n).map(|i| format!("key{i}").into_bytes()), 10);
            for i in 0..n {
                assert!(f.may_contain(format!("key{i}").as_bytes()), "n {n} key {i}");
            }
            let probes = 10_000;
            let fp = (0..probes)
                .filter(|i| f.may_contain(format!("absent{i}").as_bytes()))
                .count();
            let rate = fp as f64 / probes as f64;
            assert!(rate < 0.02, "n {n}: false-positive rate {rate}");
        }
    }

    #[test]
    fn unparseable_filters_are_corruption() {
        assert!(
            BloomFilter::parse(vec![], "t", 0)
                .unwrap_err()
                .is_corruption()
        );
        assert!(
            BloomFilter::parse(vec![6], "t", 0)
                .unwrap_err()
                .is_corruption()
        );
        assert!(
            BloomFilter::parse(vec![0; 9], "t", 0)
                .unwrap_err()
                .is_corruption()
        );
        let mut v = vec![0; 8];
        v.push(31);
        assert!(BloomFilter::parse(v, "t", 0).unwrap_err().is_corruption());
        let mut v = vec![0xff; 8];
        v.push(30);
        assert!(BloomFilter::parse(v, "t", 0).unwrap().may_contain(b"x"));
    }
}
