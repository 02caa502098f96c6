//! The `delete-range` phase: which operation each position of the phase runs, and which keys a
//! range delete removes.
//!
//! A phase of N range deletes runs N rounds of [`OPS_PER_ROUND`] operations: one range delete of
//! `--delete-range-keys` consecutive existing keys, then [`UPDATES_PER_ROUND`] updates and
//! [`READS_PER_ROUND`] point reads, alternating (update first), of keys chosen by the run's key
//! distribution. The point operations are what a store that drops ranges (a tenant, an expired
//! time window) keeps serving meanwhile: reads meet deleted and live keys, and updates write some
//! deleted keys back, so the phase does not simply empty the store. The operation at a position
//! depends on the position alone, so the phase runs exactly N range deletes whatever the threads
//! do, like every phase draws its keys from streams tied to positions.

use std::ops::Range;

use super::keys::KeyFormat;

/// Keys one range delete removes unless `--delete-range-keys` says otherwise.
pub const DEFAULT_RANGE_KEYS: u64 = 100;
/// Updates after each range delete.
pub const UPDATES_PER_ROUND: u64 = 10;
/// Point reads after each range delete.
pub const READS_PER_ROUND: u64 = 10;
/// Operations per range delete: the range delete, its updates and its reads.
pub const OPS_PER_ROUND: u64 = 1 + UPDATES_PER_ROUND + READS_PER_ROUND;

// Updates and reads alternate within a round ([`RangeStep::at`]): that needs as many of each.
const _: () = assert!(UPDATES_PER_ROUND == READS_PER_ROUND);

/// One operation of a `delete-range` phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeStep {
    /// Remove a range of consecutive keys ([`key_range`]).
    DeleteRange,
    /// Overwrite (or write back) a key chosen by the key distribution.
    Update,
    /// Point read of a key chosen by the key distribution.
    Read,
}

impl RangeStep {
    /// The operation at `position` of the phase: each round of [`OPS_PER_ROUND`] opens with its
    /// range delete, then updates (odd slots) and reads (even slots) alternate.
    pub fn at(position: u64) -> RangeStep {
        match position % OPS_PER_ROUND {
            0 => RangeStep::DeleteRange,
            slot if slot % 2 == 1 => RangeStep::Update,
            _ => RangeStep::Read,
        }
    }
}

/// Operations of a phase of `range_deletes` range deletes (`None` on overflow).
pub fn phase_ops(range_deletes: u64) -> Option<u64> {
    range_deletes.checked_mul(OPS_PER_ROUND)
}

/// The key numbers one range delete removes: `range_keys` consecutive numbers from `chosen` (a
/// number the key distribution drew among the `key_count` existing ones), moved down when they
/// would run past the last key, so the range always spans `range_keys` existing keys (all of
/// them when there are fewer). Key order is number order ([`KeyFormat`]), so these numbers are
/// also the keys in `[start, end)` of [`write_bounds`]. Empty only when `key_count` or
/// `range_keys` is 0.
pub fn key_range(chosen: u64, key_count: u64, range_keys: u64) -> Range<u64> {
    let len = range_keys.min(key_count);
    let first = chosen.min(key_count - len);
    first..first + len
}

/// Writes the bounds of the range delete of `numbers` (non-empty) into `start` (the first key,
/// included) and `end` (excluded: [`KeyFormat::write_range_end`] after the last key).
///
/// # Panics
/// If `numbers` is empty: an engine refuses a range whose start does not sort before its end.
pub fn write_bounds(
    keys: &KeyFormat,
    numbers: &Range<u64>,
    start: &mut Vec<u8>,
    end: &mut Vec<u8>,
) {
    assert!(!numbers.is_empty(), "a range delete of no keys");
    keys.write(numbers.start, start);
    keys.write_range_end(numbers.end - 1, end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_is_one_range_delete_then_alternating_updates_and_reads() {
        let steps: Vec<RangeStep> = (0..OPS_PER_ROUND).map(RangeStep::at).collect();
        assert_eq!(steps[0], RangeStep::DeleteRange);
        assert_eq!(
            &steps[1..4],
            [RangeStep::Update, RangeStep::Read, RangeStep::Update]
        );
        let count = |kind| steps.iter().filter(|&&s| s == kind).count() as u64;
        assert_eq!(count(RangeStep::DeleteRange), 1);
        assert_eq!(count(RangeStep::Update), UPDATES_PER_ROUND);
        assert_eq!(count(RangeStep::Read), READS_PER_ROUND);
        // Rounds repeat: 7 rounds hold exactly 7 range deletes, one at each round's start.
        let deletes: Vec<u64> = (0..7 * OPS_PER_ROUND)
            .filter(|&p| RangeStep::at(p) == RangeStep::DeleteRange)
            .collect();
        assert_eq!(
            deletes,
            (0..7).map(|r| r * OPS_PER_ROUND).collect::<Vec<_>>()
        );
        assert_eq!(phase_ops(7), Some(7 * OPS_PER_ROUND));
        assert_eq!(phase_ops(u64::MAX), None);
    }

    #[test]
    fn a_range_covers_exactly_its_keys_in_byte_order() {
        let count = 1_000u64;
        let keys = KeyFormat::default();
        let all: Vec<Vec<u8>> = (0..count).map(|n| keys.key(n)).collect();
        let (mut start, mut end) = (Vec::new(), Vec::new());
        for (chosen, range_keys) in [
            (0, 100),
            (123, 100),
            (899, 100),
            (900, 100),
            (950, 100),
            (999, 100),
            (500, 1),
            (999, 1),
            (10, 1_000),
            (10, 5_000),
        ] {
            let numbers = key_range(chosen, count, range_keys);
            let expected = range_keys.min(count);
            assert_eq!(
                numbers.end - numbers.start,
                expected,
                "{chosen} {range_keys}"
            );
            assert!(numbers.end <= count, "{numbers:?} past the last key");
            if chosen + expected <= count {
                assert_eq!(
                    numbers.start, chosen,
                    "a range that fits starts where chosen"
                );
            }
            write_bounds(&keys, &numbers, &mut start, &mut end);
            assert!(start < end);
            // Bytewise, as the engines compare: exactly the keys of `numbers` fall inside.
            let inside: Vec<u64> = (0..count)
                .filter(|&n| {
                    let k = &all[n as usize];
                    start.as_slice() <= k.as_slice() && k.as_slice() < end.as_slice()
                })
                .collect();
            assert_eq!(
                inside,
                numbers.clone().collect::<Vec<_>>(),
                "{chosen} {range_keys}"
            );
        }
        assert!(key_range(3, 0, 100).is_empty());
        assert!(key_range(3, 10, 0).is_empty());
    }
}
