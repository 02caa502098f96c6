//! CRC32C (Castagnoli, hardware-accelerated where the CPU has it) and the masking applied to
//! every stored checksum.
//!
//! A CRC stored next to the data it covers is masked so that computing the CRC of a string
//! that itself contains embedded CRCs does not degenerate (the same trick as LevelDB).

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends a running CRC32C with more data.
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
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

    #[test]
    fn mask_round_trips_and_changes_value() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_ne!(mask(crc), crc);
            assert_ne!(mask(mask(crc)), crc);
            assert_eq!(unmask(mask(crc)), crc);
        }
    }
}
