//! CRC32C (Castagnoli, hardware-accelerated where the CPU has it) and the masking applied to
//! every stored checksum.
//!
//! A CRC stored next to the data it covers is masked so that computing the CRC of a string
//! that itself contains embedded CRCs does not degenerate (the same trick as LevelDB).

use crc_fast::{CrcAlgorithm, Digest};

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// Extends a running CRC32C with more data: `crc32c_extend(crc32c(a), b)` is the CRC32C of `a`
/// followed by `b`.
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    // The register holds the CRC before its final inversion.
    let mut digest = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

/// Masks a CRC for storage.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // RFC 3720 test vectors for CRC32C.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(
            crc32c_extend(crc32c(b"1234"), b"56789"),
            crc32c(b"123456789")
        );
    }

    /// Every length up to a few blocks of the SIMD folding and past it, at every alignment up
    /// to a cache line, whole and split anywhere, agrees with an independent implementation.
    #[test]
    fn agrees_with_an_independent_crc32c() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let lens = (0..=600).chain([1023, 1024, 1025, 4095, 4096, 8192, 8230, 65_536, 69_000]);
        for len in lens {
            for offset in [0, 1, 3, 7, 8, 15, 31, 63] {
                let slice = &data[offset..offset + len];
                let expected = ::crc32c::crc32c(slice);
                assert_eq!(crc32c(slice), expected, "len {len} at {offset}");
                for cut in [0, 1, len / 3, len / 2, len.saturating_sub(1), len] {
                    let (a, b) = slice.split_at(cut.min(len));
                    assert_eq!(
                        crc32c_extend(crc32c(a), b),
                        expected,
                        "len {len} at {offset}, cut at {cut}"
                    );
                }
            }
        }
        assert_eq!(crc32c_extend(0, b""), 0);
        assert_eq!(crc32c_extend(0x1234_5678, b""), 0x1234_5678);
    }

    #[test]
    fn mask_round_trips_and_changes_value() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_ne!(mask(crc), crc);
            assert_ne!(mask(mask(crc)), crc);
            assert_eq!(unmask(mask(crc)), crc);
        }
    }
}
