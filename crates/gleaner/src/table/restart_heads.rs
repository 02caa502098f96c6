//! A flat search array over a block's restart keys, so a point lookup's binary search reads one
//! small array instead of a restart offset and then an entry at that offset for every probe.
//!
//! A block of internal keys (data, handle and index blocks of key tables, dense index blocks
//! of value tables) is searched by binary search over its restart points. Each probe reads the
//! restart array and then the entry the offset points at, two cache misses in a block that is
//! not in the CPU's caches; with the block cache in memory, those misses were the largest part
//! of a point lookup's key-table search (`Block::decode_header` and the key compares, about a
//! fifth of an 8 KiB point read's CPU: docs/benchmarks.md). The *heads* are, for each restart
//! point, the 8 bytes of its user key that follow the prefix every restart key of the block
//! shares, as a big-endian `u64`: comparing two heads orders their keys whenever the heads
//! differ, and only equal heads need the keys themselves. Built from the block once, at its
//! second seek (`table/block.rs`); kept in memory only (nothing on disk changes). The prefix
//! is not copied: it is named where it lies in the block, in the first restart key (stored
//! whole, as every restart key is), so the heads cost exactly [`HEAD_BYTES`] per restart
//! point, what the block cache charges for them, however long the keys.

/// Bytes of memory a head costs (the block cache charges them with the block).
pub(crate) const HEAD_BYTES: usize = 8;

/// The heads of one block's restart keys.
#[derive(Debug)]
pub(crate) struct RestartHeads {
    /// Where, in the block's contents, lies what every restart key's user key starts with (the
    /// common prefix of the first and the last: the keys are sorted, so every key between
    /// starts with it too), as the start of the first key's bytes there.
    prefix: std::ops::Range<usize>,
    /// Per restart point, in order, the head of its user key.
    heads: Box<[u64]>,
}

impl RestartHeads {
    /// The heads of `user_keys`, the restart points' user keys in block order (sorted
    /// ascending, as a block's are), the first of them at `first_at` in the block's contents.
    /// `None` when a key does not start with the prefix of the first and the last, which sorted
    /// keys always do: a damaged block is searched by its keys, which report the damage.
    pub(crate) fn new(user_keys: &[&[u8]], first_at: usize) -> Option<Self> {
        let (first, last) = match user_keys {
            [] => (&[][..], &[][..]),
            [one] => (*one, *one),
            [first, .., last] => (*first, *last),
        };
        let shared = first
            .iter()
            .zip(last)
            .take_while(|(a, b)| a == b)
            .count();
        let prefix = &first[..shared];
        let heads = user_keys
            .iter()
            .map(|k| k.strip_prefix(prefix).map(head))
            .collect::<Option<_>>()?;
        Some(RestartHeads {
            prefix: first_at..first_at + shared,
            heads,
        })
    }

    /// The head of `user_key` to compare with these heads, which were built from the block
    /// whose contents are `contents`; `None` when the key does not start with their prefix
    /// (the search then compares keys).
    pub(crate) fn head_of(&self, contents: &[u8], user_key: &[u8]) -> Option<u64> {
        user_key
            .strip_prefix(contents.get(self.prefix.clone())?)
            .map(head)
    }

    /// The head of restart point `i`.
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.heads[i]
    }
}

/// The first 8 bytes of `rest`, zero-padded, as a big-endian number. For user keys `a` and `b`
/// after a shared prefix, `head(a) < head(b)` implies `a < b` (bytewise): the first byte where
/// the padded forms differ is either a real byte of both, or a real byte of the larger against
/// the padding of a shorter key that is then a prefix of it. Equal heads decide nothing.
fn head(rest: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = rest.len().min(8);
    bytes[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn heads_skip_the_shared_prefix() {
        // The contents as a block holds them: the first key after 3 bytes of its entry header.
        let contents = b"\0\x0e\0key:0000000012";
        let keys: [&[u8]; 3] = [&contents[3..], b"key:0000000345", b"key:0000009999"];
        let h = RestartHeads::new(&keys, 3).expect("sorted");
        assert_eq!(&contents[h.prefix.clone()], b"key:000000");
        assert_eq!(h.get(0), u64::from_be_bytes(*b"0012\0\0\0\0"));
        assert_eq!(h.get(2), u64::from_be_bytes(*b"9999\0\0\0\0"));
        assert_eq!(
            h.head_of(contents, b"key:0000000100"),
            Some(u64::from_be_bytes(*b"0100\0\0\0\0"))
        );
        assert_eq!(h.head_of(contents, b"kez"), None, "outside the prefix");
        assert_eq!(h.head_of(contents, b"key:"), None, "shorter than the prefix");
        assert_eq!(h.head_of(b"short", b"key:0000000100"), None, "other contents");
        let unsorted: [&[u8]; 3] = [b"ab", b"b", b"ac"];
        assert!(RestartHeads::new(&unsorted, 0).is_none(), "a key outside the prefix");
    }

    /// A strict order of heads is the order of the keys: random short keys over a tiny
    /// alphabet with zero bytes, so prefixes, padding look-alikes and ties are common.
    #[test]
    fn different_heads_order_keys_as_the_keys_do() {
        let mut rng = StdRng::seed_from_u64(5);
        let key = |rng: &mut StdRng| -> Vec<u8> {
            let len = rng.random_range(0..12);
            (0..len).map(|_| rng.random_range(0..3u8)).collect()
        };
        let mut decided = 0;
        for _ in 0..20_000 {
            let (a, b) = (key(&mut rng), key(&mut rng));
            let (ha, hb) = (head(&a), head(&b));
            if ha != hb {
                assert_eq!(ha.cmp(&hb), a.cmp(&b), "{a:?} {b:?}");
                decided += 1;
            }
        }
        assert!(decided > 10_000, "most pairs are decided by their heads: {decided}");
    }
}
