//! Numeric SCAN cursors mapped to resume keys on the server, as Kvrocks's
//! `redis-cursor-compatible` does: redis-cli and most client libraries parse the cursor as an
//! unsigned integer, but an ordered store resumes a scan at a key.
//!
//! Each SCAN that stops before the end registers the next key it would have examined under a
//! fresh, unguessable cursor number; the next SCAN with that number resumes at that key. The table is bounded
//! ([`MAX_CURSORS`] entries, [`MAX_CURSOR_KEY_BYTES`] bytes of keys); the oldest entries are
//! evicted first. A cursor that is not in the table (evicted, never issued, or issued before a
//! restart) is *stale*: SCAN answers it with an error rather than silently restarting from the
//! first key (which Kvrocks does), so a client never loops or sees a partial walk as complete.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};

use parking_lot::Mutex;

/// Most cursors remembered at once: 16,384 (as Kvrocks's cursor dictionary).
pub const MAX_CURSORS: usize = 16_384;
/// Most bytes of resume keys remembered at once: 16 MiB.
pub const MAX_CURSOR_KEY_BYTES: usize = 16 << 20;

/// Cursor numbers stay below 2^62, so clients that parse them as signed 64-bit integers work
/// too; 0 is never issued (it means "start" and "done").
const CURSOR_MASK: u64 = (1 << 62) - 1;

/// The table of live cursors. Shared by all connections: a cursor may be continued on another
/// connection, as in Redis.
#[derive(Debug)]
pub struct ScanCursors {
    inner: Mutex<Table>,
    max_cursors: usize,
    max_bytes: usize,
}

#[derive(Debug)]
struct Table {
    keys: HashMap<u64, Vec<u8>>,
    /// Cursor numbers, oldest first.
    order: VecDeque<u64>,
    bytes: usize,
    counter: u64,
    /// Per-process random salt: cursor numbers are not guessable from one another, and the
    /// numbers of an earlier run of the server are not valid in this one.
    salt: u64,
}

impl Default for ScanCursors {
    fn default() -> Self {
        Self::with_bounds(MAX_CURSORS, MAX_CURSOR_KEY_BYTES)
    }
}

impl ScanCursors {
    /// A table bounded to `max_cursors` entries and `max_bytes` bytes of keys.
    pub fn with_bounds(max_cursors: usize, max_bytes: usize) -> Self {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id().into());
        ScanCursors {
            inner: Mutex::new(Table {
                keys: HashMap::new(),
                order: VecDeque::new(),
                bytes: 0,
                counter: 0,
                salt: h.finish(),
            }),
            max_cursors: max_cursors.max(1),
            max_bytes,
        }
    }

    /// Registers `resume_at` (the next key a SCAN would have examined) and returns its cursor
    /// number, evicting the oldest cursors beyond the bounds.
    pub fn register(&self, resume_at: Vec<u8>) -> u64 {
        let mut t = self.inner.lock();
        let cursor = loop {
            t.counter += 1;
            let c = mix(t.counter ^ t.salt) & CURSOR_MASK;
            if c != 0 && !t.keys.contains_key(&c) {
                break c;
            }
        };
        t.bytes += resume_at.len();
        t.keys.insert(cursor, resume_at);
        t.order.push_back(cursor);
        while t.order.len() > self.max_cursors || (t.bytes > self.max_bytes && t.order.len() > 1) {
            let Some(old) = t.order.pop_front() else {
                break;
            };
            if let Some(k) = t.keys.remove(&old) {
                t.bytes -= k.len();
            }
        }
        cursor
    }

    /// The key to resume at for `cursor`, or `None` when the cursor is stale. The entry
    /// stays: a client may repeat a SCAN call (after a timeout, say).
    pub fn resume_key(&self, cursor: u64) -> Option<Vec<u8>> {
        self.inner.lock().keys.get(&cursor).cloned()
    }

    /// Cursors remembered now.
    pub fn len(&self) -> usize {
        self.inner.lock().keys.len()
    }

    /// True when no cursor is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// splitmix64's finalizer: a bijection on u64 that scatters consecutive counters.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_resume_and_go_stale_when_evicted() {
        let cursors = ScanCursors::with_bounds(3, 1 << 20);
        let ids: Vec<u64> = (0..4u8).map(|i| cursors.register(vec![i])).collect();
        assert!(ids.iter().all(|&c| c != 0 && c <= CURSOR_MASK));
        assert_eq!(cursors.resume_key(ids[0]), None, "oldest evicted");
        assert_eq!(cursors.resume_key(ids[3]), Some(vec![3]));
        assert_eq!(cursors.resume_key(ids[3]), Some(vec![3]), "reusable");
        assert_eq!(cursors.len(), 3);
        assert_eq!(cursors.resume_key(12345), None);
    }

    #[test]
    fn key_bytes_are_bounded() {
        let cursors = ScanCursors::with_bounds(100, 10);
        let a = cursors.register(vec![0; 6]);
        let b = cursors.register(vec![0; 6]);
        assert_eq!(cursors.resume_key(a), None);
        assert!(cursors.resume_key(b).is_some());
        // A single key larger than the byte bound is still kept (the newest entry always is).
        let c = cursors.register(vec![0; 64]);
        assert!(cursors.resume_key(c).is_some());
        assert_eq!(cursors.len(), 1);
    }
}
