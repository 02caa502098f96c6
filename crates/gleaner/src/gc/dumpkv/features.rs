//! A key's write history, kept as the payload of its handle (DumpKV §4.2, Fig. 4; format in
//! docs/format.md, "DumpKV features"): the intervals between its last writes (deltas) and its
//! exponentially decayed write counters (EDWCs), from which the model's input is made.
//!
//! Time is counted in sequence numbers (writes), scaled by option `dumpkv_time_unit` (the
//! paper's 1M): deltas enter the model as log2 buckets of the unit, and EDWC `i` decays over
//! `unit << i` writes.

use crate::coding::{decode_varint64, put_varint64};
use crate::key::SeqNo;
use crate::value::HandlePayload;

/// Most deltas a key keeps (the paper's 32): older ones are dropped.
pub const MAX_DELTAS: usize = 32;

/// EDWCs a key keeps (the paper's 10), windows `unit << 0` to `unit << 9`.
pub const EDWCS: usize = 10;

/// Inputs of the model: the age bucket, 32 delta buckets, the 10 decayed counters. (The paper's optional value size is left out: a GC job knows a record's length in
/// its table, not its value's, and a feature measured two ways would mislead the model.)
pub const FEATURES: usize = 1 + MAX_DELTAS + EDWCS;

/// Bit of the first byte: the history was folded in by a compaction out of L0 (a flush writes
/// the byte without it: what came before is not known yet).
const COLLECTED: u8 = 0x40;

/// Bits of the first byte that no format of this build sets: a payload with one is not ours.
const UNKNOWN_BITS: u8 = 0x80;

/// Most bytes of an encoded history: the first byte, 32 ten-byte varints, 10 four-byte floats.
pub const MAX_FEATURE_BYTES: usize = 1 + MAX_DELTAS * 10 + EDWCS * 4;

/// The write history of one version of a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// Whether a compaction out of L0 folded the key's history in (a flushed entry's history
    /// is empty until then).
    pub collected: bool,
    /// Intervals in writes between consecutive writes of the key, newest first: `deltas[0]`
    /// is the interval between this version and the one before it.
    pub deltas: Vec<u64>,
    /// The decayed write counters at this version's write (all 1 for a key written once: the
    /// write itself).
    pub edwcs: [f32; EDWCS],
}

impl Features {
    /// A key's first known write: no delta, every counter 1. `collected` as given.
    pub fn first_write(collected: bool) -> Features {
        Features {
            collected,
            deltas: Vec::new(),
            edwcs: [1.0; EDWCS],
        }
    }

    /// What a flush writes: a first write, not collected.
    pub fn flushed() -> Features {
        Features::first_write(false)
    }

    /// The history of a version written `delta` writes after this one: the delta prepended
    /// (at most [`MAX_DELTAS`] kept) and each counter decayed over `delta` and incremented
    /// (paper Eq. 1); `collected`.
    pub fn next_write(&self, delta: u64, unit: u64) -> Features {
        let mut deltas = Vec::with_capacity((self.deltas.len() + 1).min(MAX_DELTAS));
        deltas.push(delta);
        deltas.extend(self.deltas.iter().take(MAX_DELTAS - 1));
        let mut edwcs = self.decayed(delta, unit);
        for e in &mut edwcs {
            *e += 1.0;
        }
        Features {
            collected: true,
            deltas,
            edwcs,
        }
    }

    /// The counters decayed over `age` writes without a write: `EDWC_i · 2^(−age / (unit << i))`.
    pub fn decayed(&self, age: u64, unit: u64) -> [f32; EDWCS] {
        let mut out = self.edwcs;
        for (i, e) in out.iter_mut().enumerate() {
            *e = (f64::from(*e) * decay(age, window(unit, i))) as f32;
        }
        out
    }

    /// Whether the key was written once as far as its history knows.
    pub fn written_once(&self) -> bool {
        self.deltas.is_empty()
    }

    /// The model's input for this version seen `age` writes after its write: the age bucket,
    /// the delta buckets (NaN where the key has fewer), the counters decayed over `age`.
    pub fn model_input(&self, age: u64, unit: u64) -> [f32; FEATURES] {
        let mut x = [f32::NAN; FEATURES];
        x[0] = bucket(age, unit) as f32;
        for (slot, d) in x[1..=MAX_DELTAS].iter_mut().zip(&self.deltas) {
            *slot = bucket(*d, unit) as f32;
        }
        x[1 + MAX_DELTAS..].copy_from_slice(&self.decayed(age, unit));
        x
    }

    /// The encoded history (docs/format.md, "DumpKV features"): one byte (the delta count,
    /// with bit 0x40 when collected), the deltas as varints, and, when there is a delta, the
    /// counters as little-endian `f32`s. One byte for a key written once.
    pub fn encode(&self) -> Vec<u8> {
        debug_assert!(self.deltas.len() <= MAX_DELTAS);
        let mut out = Vec::with_capacity(1 + self.deltas.len() * 4 + EDWCS * 4);
        out.push(self.deltas.len() as u8 | if self.collected { COLLECTED } else { 0 });
        for d in &self.deltas {
            put_varint64(&mut out, *d);
        }
        if !self.deltas.is_empty() {
            for e in self.edwcs {
                out.extend_from_slice(&e.to_le_bytes());
            }
        }
        debug_assert!(out.len() <= MAX_FEATURE_BYTES);
        out
    }

    /// As a handle payload.
    pub fn to_payload(&self) -> HandlePayload {
        HandlePayload::new(&self.encode()).expect("a history is 1 to MAX_FEATURE_BYTES bytes")
    }

    /// The history `bytes` encode; `None` for bytes that are not one (a payload another policy
    /// wrote, or a format this build does not know): the key is then treated as written once.
    pub fn decode(bytes: &[u8]) -> Option<Features> {
        let (&first, mut rest) = bytes.split_first()?;
        if first & UNKNOWN_BITS != 0 {
            return None;
        }
        let count = usize::from(first & !COLLECTED);
        if count > MAX_DELTAS {
            return None;
        }
        let mut deltas = Vec::with_capacity(count);
        for _ in 0..count {
            let (d, n) = decode_varint64(rest)?;
            deltas.push(d);
            rest = &rest[n..];
        }
        let mut edwcs = [1.0; EDWCS];
        if count > 0 {
            if rest.len() != EDWCS * 4 {
                return None;
            }
            for (e, b) in edwcs.iter_mut().zip(rest.chunks_exact(4)) {
                *e = f32::from_le_bytes(b.try_into().expect("four bytes"));
                if !e.is_finite() || *e < 0.0 {
                    return None;
                }
            }
        } else if !rest.is_empty() {
            return None;
        }
        Some(Features {
            collected: first & COLLECTED != 0,
            deltas,
            edwcs,
        })
    }

    /// The history a payload holds, a first write (not collected) for none or one that is
    /// not a history.
    pub fn of_payload(payload: Option<&HandlePayload>) -> Features {
        payload
            .and_then(|p| Features::decode(p.as_bytes()))
            .unwrap_or_else(Features::flushed)
    }
}

/// The window of EDWC `i`, in writes: `unit << i` (the authors' `2^(20+i)` for a unit of 2^20).
pub fn window(unit: u64, i: usize) -> u64 {
    unit.saturating_mul(1 << i)
}

/// `2^(−age / window)`.
fn decay(age: u64, window: u64) -> f64 {
    (-(age as f64) / window as f64).exp2()
}

/// The log2 bucket of an interval of `writes`: 0 below one unit, then `k + 1` for
/// `[unit·2^k, unit·2^(k+1))` (the paper maps 3M to 2 with a unit of 1M).
pub fn bucket(writes: u64, unit: u64) -> u32 {
    let units = writes / unit.max(1);
    if units == 0 {
        0
    } else {
        64 - units.leading_zeros()
    }
}

/// The EDWC window whose span first reaches `lifetime` writes (the paper's `s_idx` for `l_s`,
/// `l_idx` for `l_l`), the last one for longer lifetimes.
pub fn window_index(lifetime: SeqNo, unit: u64) -> usize {
    (0..EDWCS)
        .find(|&i| window(unit, i) >= lifetime)
        .unwrap_or(EDWCS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: u64 = 1 << 20;

    #[test]
    fn buckets_are_log2_of_units() {
        assert_eq!(bucket(0, UNIT), 0);
        assert_eq!(bucket(UNIT - 1, UNIT), 0);
        assert_eq!(bucket(UNIT, UNIT), 1);
        // The paper's example: 3M with a unit of 1M is bucket 2.
        assert_eq!(bucket(3 * UNIT, UNIT), 2);
        assert_eq!(bucket(4 * UNIT, UNIT), 3);
        assert_eq!(bucket(u64::MAX, 1), 64);
        assert_eq!(window_index(1, UNIT), 0);
        assert_eq!(window_index(UNIT + 1, UNIT), 1);
        assert_eq!(window_index(u64::MAX, UNIT), EDWCS - 1);
    }

    #[test]
    fn edwcs_decay_and_count_by_hand() {
        let first = Features::first_write(true);
        // Written again one window-0 later: EDWC_0 = 1 + 1·2^-1 = 1.5; EDWC_1 = 1 + 2^-0.5.
        let second = first.next_write(UNIT, UNIT);
        assert_eq!(second.deltas, vec![UNIT]);
        assert!((second.edwcs[0] - 1.5).abs() < 1e-6, "{:?}", second.edwcs);
        assert!((second.edwcs[1] - (1.0 + 0.5f32.sqrt())).abs() < 1e-6);
        assert!((second.edwcs[9] - (1.0 + 2f32.powf(-1.0 / 512.0))).abs() < 1e-6);
        // Again right away: EDWC_0 = 1 + 1.5·2^0 = 2.5.
        let third = second.next_write(0, UNIT);
        assert_eq!(third.deltas, vec![0, UNIT]);
        assert!((third.edwcs[0] - 2.5).abs() < 1e-6);
        // Decay without a write: 2.5 · 2^-2 over two windows.
        assert!((third.decayed(2 * UNIT, UNIT)[0] - 0.625).abs() < 1e-6);
        // The deltas keep the newest 32.
        let mut f = Features::first_write(true);
        for d in 0..40 {
            f = f.next_write(d, UNIT);
        }
        assert_eq!(f.deltas.len(), MAX_DELTAS);
        assert_eq!(f.deltas[0], 39);
        assert_eq!(f.deltas[31], 8);
    }

    #[test]
    fn the_codec_round_trips_and_sizes_match_the_paper() {
        // One byte for a key written once (Table 2).
        assert_eq!(Features::flushed().encode(), vec![0]);
        assert_eq!(Features::first_write(true).encode(), vec![COLLECTED]);
        let mut f = Features::first_write(true);
        // One past write of about a million writes: 1 + 3 + 40 bytes (the paper's 49 stores
        // its delta as a wider integer).
        f = f.next_write(UNIT, UNIT);
        assert_eq!(f.encode().len(), 1 + 3 + 40);
        for d in 0..40u64 {
            f = f.next_write(d << 30, UNIT);
        }
        let bytes = f.encode();
        assert!(bytes.len() <= MAX_FEATURE_BYTES && bytes.len() <= 297, "{}", bytes.len());
        assert_eq!(Features::decode(&bytes), Some(f.clone()));
        assert_eq!(Features::of_payload(Some(&f.to_payload())), f);
        // Not a history: read as a first write.
        for bad in [
            &[][..],
            &[0x80],
            &[33],
            &[1, 5],
            &[0, 1],
            &[1, 0x80],
            &bytes[..bytes.len() - 1],
        ] {
            assert_eq!(Features::decode(bad), None, "{bad:?}");
        }
        let nan = {
            let mut b = vec![1, 7];
            for _ in 0..EDWCS {
                b.extend_from_slice(&f32::NAN.to_le_bytes());
            }
            b
        };
        assert_eq!(Features::decode(&nan), None);
        assert_eq!(Features::of_payload(None), Features::flushed());
    }

    #[test]
    fn the_model_input_lays_out_age_deltas_and_decayed_counters() {
        let f = Features::first_write(true)
            .next_write(3 * UNIT, UNIT)
            .next_write(UNIT / 2, UNIT);
        let x = f.model_input(2 * UNIT, UNIT);
        assert_eq!(x[0], 2.0);
        assert_eq!(x[1], 0.0);
        assert_eq!(x[2], 2.0);
        assert!(x[3].is_nan() && x[MAX_DELTAS].is_nan());
        let d = f.decayed(2 * UNIT, UNIT);
        assert_eq!(&x[1 + MAX_DELTAS..], &d[..]);
    }
}
