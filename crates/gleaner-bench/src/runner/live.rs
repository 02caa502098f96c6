//! The live set: the length and digest of the current value of every key the workload has
//! written, so the harness knows the live bytes (the denominator of space amplification) and
//! can check that reads return the value last written.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::engine::Found;

/// Write-lock stripes: a write to the engine and the live-set update after it happen under the
/// key's stripe, so two clients writing one key cannot leave the live set disagreeing with the
/// engine about which write came last.
const STRIPES: usize = 1024;

/// Current values by key number (length and digest), plus their total. Key numbers beyond the
/// loaded keys are handed out by [`LiveSet::insert_slot`] (YCSB D and E insert new keys).
#[derive(Debug)]
pub struct LiveSet {
    /// `(length + 1) << 32 | digest` for present keys; 0 for keys never written.
    values: Vec<AtomicU64>,
    stripes: Vec<Mutex<()>>,
    key_size: u64,
    live_bytes: AtomicU64,
    live_keys: AtomicU64,
    /// The next key number an insert takes.
    next_insert: AtomicU64,
}

impl LiveSet {
    /// A live set with room for `capacity` keys, of which the first `loaded` will be written by
    /// the load phase (inserts start after them).
    ///
    /// # Panics
    /// If `loaded > capacity` (a planning bug).
    pub fn new(capacity: u64, loaded: u64, key_size: usize) -> Self {
        assert!(
            loaded <= capacity,
            "live set: {loaded} loaded keys exceed capacity {capacity}"
        );
        LiveSet {
            values: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            key_size: key_size as u64,
            live_bytes: AtomicU64::new(0),
            live_keys: AtomicU64::new(0),
            next_insert: AtomicU64::new(loaded),
        }
    }

    /// Locks `key` for a write: hold the guard across the engine's write and [`LiveSet::set`].
    pub fn lock(&self, key: u64) -> MutexGuard<'_, ()> {
        self.stripes[(key % STRIPES as u64) as usize].lock()
    }

    /// Records that key `key` now holds `value` (call under [`LiveSet::lock`]).
    pub fn set(&self, key: u64, value: Found) {
        let len = value.len;
        let len32 = u32::try_from(len).expect("value sizes are bounded by MAX_VALUE_SIZE");
        let packed = (u64::from(len32) + 1) << 32 | u64::from(value.digest);
        let old = self.values[key as usize].swap(packed, Ordering::Relaxed);
        if old == 0 {
            self.live_keys.fetch_add(1, Ordering::Relaxed);
            self.live_bytes
                .fetch_add(self.key_size + len as u64, Ordering::Relaxed);
        } else {
            let old_len = (old >> 32) - 1;
            let new_len = len as u64;
            if new_len >= old_len {
                self.live_bytes
                    .fetch_add(new_len - old_len, Ordering::Relaxed);
            } else {
                self.live_bytes
                    .fetch_sub(old_len - new_len, Ordering::Relaxed);
            }
        }
    }

    /// The current value of `key`, if it was written.
    pub fn get(&self, key: u64) -> Option<Found> {
        match self.values.get(key as usize)?.load(Ordering::Relaxed) {
            0 => None,
            n => Some(Found {
                len: ((n >> 32) - 1) as usize,
                digest: n as u32,
            }),
        }
    }

    /// Takes the next key number for an insert; `None` when the set is full.
    pub fn insert_slot(&self) -> Option<u64> {
        let k = self.next_insert.fetch_add(1, Ordering::Relaxed);
        (k < self.values.len() as u64).then_some(k)
    }

    /// Key numbers handed out so far (loaded keys and inserts): reads choose among these.
    pub fn key_count(&self) -> u64 {
        self.next_insert
            .load(Ordering::Relaxed)
            .min(self.values.len() as u64)
    }

    /// Bytes of keys and current values.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    /// Keys holding a value.
    pub fn live_keys(&self) -> u64 {
        self.live_keys.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(len: usize) -> Found {
        Found {
            len,
            digest: len as u32 ^ 0xdead_beef,
        }
    }

    #[test]
    fn live_bytes_follow_overwrites() {
        let live = LiveSet::new(4, 2, 24);
        live.set(0, v(100));
        live.set(1, v(50));
        assert_eq!(live.live_bytes(), 24 * 2 + 150);
        live.set(0, v(10));
        assert_eq!(live.live_bytes(), 24 * 2 + 60);
        live.set(1, v(500));
        assert_eq!(live.live_bytes(), 24 * 2 + 510);
        assert_eq!(live.live_keys(), 2);
        assert_eq!(live.get(0), Some(v(10)));
        assert_eq!(live.get(3), None);
        assert_eq!(live.get(99), None);
        live.set(0, Found { len: 0, digest: 0 });
        assert_eq!(
            live.get(0),
            Some(Found { len: 0, digest: 0 }),
            "an empty value is present"
        );
        let _guard = live.lock(1);
        live.set(1, v(64 << 20));
        assert_eq!(live.get(1), Some(v(64 << 20)), "the largest value fits");
    }

    #[test]
    fn inserts_take_slots_after_the_loaded_keys_until_full() {
        let live = LiveSet::new(4, 2, 8);
        assert_eq!(live.key_count(), 2);
        assert_eq!(live.insert_slot(), Some(2));
        assert_eq!(live.insert_slot(), Some(3));
        assert_eq!(live.insert_slot(), None);
        assert_eq!(live.key_count(), 4);
    }
}
