//! The live set: the length and digest of the current value of every key the workload has
//! written, so the harness knows the live bytes (the denominator of space amplification) and
//! can check that reads return the value last written.

use std::ops::Range;
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

    /// Locks every key of `keys` for a range delete: hold the guards across the engine's
    /// range delete and the [`LiveSet::remove`] of each key. The stripes are taken in ascending
    /// order, so two range deletes cannot deadlock; a single-key write holds one stripe and
    /// waits for no other, so it cannot close a cycle either. At most one guard per stripe.
    pub fn lock_range(&self, keys: Range<u64>) -> Vec<MutexGuard<'_, ()>> {
        let stripes = STRIPES as u64;
        let mut wanted: Vec<usize> = if keys.end.saturating_sub(keys.start) >= stripes {
            (0..STRIPES).collect()
        } else {
            keys.map(|k| (k % stripes) as usize).collect()
        };
        wanted.sort_unstable();
        wanted.into_iter().map(|i| self.stripes[i].lock()).collect()
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

    /// Records that key `key` was deleted (call under [`LiveSet::lock_range`]); returns the
    /// value it held, `None` if it held none (never written, or deleted already).
    pub fn remove(&self, key: u64) -> Option<Found> {
        let old = self.values.get(key as usize)?.swap(0, Ordering::Relaxed);
        if old == 0 {
            return None;
        }
        let len = (old >> 32) - 1;
        self.live_keys.fetch_sub(1, Ordering::Relaxed);
        self.live_bytes
            .fetch_sub(self.key_size + len, Ordering::Relaxed);
        Some(Found {
            len: len as usize,
            digest: old as u32,
        })
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
    fn removed_keys_leave_the_live_figures_and_can_come_back() {
        let live = LiveSet::new(4, 4, 24);
        live.set(0, v(100));
        live.set(1, v(50));
        live.set(2, v(7));
        {
            let _guards = live.lock_range(0..3);
            assert_eq!(live.remove(1), Some(v(50)));
            assert_eq!(live.remove(3), None, "never written");
        }
        assert_eq!(live.remove(1), None, "deleted already");
        assert_eq!(live.remove(99), None, "beyond the set");
        assert_eq!(live.get(1), None);
        assert_eq!((live.live_keys(), live.live_bytes()), (2, 24 * 2 + 107));
        live.set(1, v(5));
        assert_eq!((live.live_keys(), live.live_bytes()), (3, 24 * 3 + 112));
    }

    #[test]
    fn range_locks_exclude_writers_of_their_keys_only() {
        let live = LiveSet::new(4096, 4096, 8);
        let guards = live.lock_range(1020..1030);
        assert_eq!(
            guards.len(),
            10,
            "one stripe per key, wrapping past the last stripe"
        );
        assert!(live.stripes[1023].try_lock().is_none());
        assert!(
            live.stripes[5].try_lock().is_none(),
            "key 1029 wraps to stripe 5"
        );
        assert!(live.stripes[6].try_lock().is_some());
        drop(guards);
        // A range of more keys than stripes takes each stripe once.
        assert_eq!(live.lock_range(0..5000).len(), STRIPES);
        assert!(live.lock_range(7..7).is_empty());
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
