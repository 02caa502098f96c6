//! Striped key locks that make read-modify-write commands atomic.
//!
//! The engine applies each write batch atomically but has no transactions: `SET k v NX` (read,
//! then write), `DEL` (which counts the keys it removed) and `MULTI/EXEC` would race with a
//! concurrent write to the same key between their read and their write. Every write takes the
//! stripes of its keys: plain writes (`SET` without conditions, `MSET`) shared, so concurrent
//! plain writes still meet in the engine's group commit; read-modify-write commands
//! exclusively. Reads take nothing (the engine gives every read a consistent state). Stripes
//! are taken in ascending order, all at once, so two commands never wait for each other.
//!
//! Commands that change whole databases (`FLUSHDB`, `FLUSHALL`) take the keyspace lock
//! exclusively ([`KeyLocks::lock_all`]); every keyed write holds it shared while it holds its
//! stripes (taken first, so the order is always keyspace, then stripes). A read-modify-write
//! command therefore runs wholly before or wholly after a flush, never across it.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Number of stripes: 4,096 (keys share a stripe by hash; a false share only serializes two
/// writes that could have run side by side).
pub const STRIPES: usize = 4096;

/// How a command locks its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Plain writes: exclude read-modify-write commands, not each other.
    Shared,
    /// Read-modify-write commands: exclude every other write of the keys.
    Exclusive,
}

/// The stripes.
#[derive(Debug)]
pub struct KeyLocks {
    /// Shared by keyed writes, exclusive for whole-database changes.
    keyspace: RwLock<()>,
    stripes: Vec<RwLock<()>>,
    hasher: RandomState,
}

/// Held stripes; dropping it releases them.
#[derive(Debug)]
pub struct KeyGuard<'a> {
    _keyspace: KeyspaceGuard<'a>,
    _shared: Vec<RwLockReadGuard<'a, ()>>,
    _exclusive: Vec<RwLockWriteGuard<'a, ()>>,
}

/// The keyspace lock as a guard holds it.
#[derive(Debug)]
enum KeyspaceGuard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            keyspace: RwLock::new(()),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl KeyLocks {
    /// Locks the stripes of `keys` in `mode`, waiting for conflicting holders.
    pub fn lock<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: impl IntoIterator<Item = K>,
        mode: LockMode,
    ) -> KeyGuard<'a> {
        let mut stripes: Vec<usize> = keys
            .into_iter()
            .map(|k| (self.hasher.hash_one(k.as_ref()) as usize) % self.stripes.len())
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let keyspace = KeyspaceGuard::Shared(self.keyspace.read());
        match mode {
            LockMode::Shared => KeyGuard {
                _keyspace: keyspace,
                _shared: stripes.iter().map(|&s| self.stripes[s].read()).collect(),
                _exclusive: Vec::new(),
            },
            LockMode::Exclusive => KeyGuard {
                _keyspace: keyspace,
                _shared: Vec::new(),
                _exclusive: stripes.iter().map(|&s| self.stripes[s].write()).collect(),
            },
        }
    }
}

impl KeyLocks {
    /// Locks the whole keyspace: waits for every keyed write to finish and holds new ones
    /// off until the guard is dropped.
    pub fn lock_all(&self) -> KeyGuard<'_> {
        KeyGuard {
            _keyspace: KeyspaceGuard::Exclusive(self.keyspace.write()),
            _shared: Vec::new(),
            _exclusive: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_excludes_and_shared_shares() {
        let locks = KeyLocks::default();
        let a = locks.lock([b"k1", b"k2"], LockMode::Shared);
        let b = locks.lock([b"k2"], LockMode::Shared);
        let stripe = (locks.hasher.hash_one(&b"k2"[..]) as usize) % STRIPES;
        assert!(locks.stripes[stripe].try_write().is_none());
        drop((a, b));
        let _x = locks.lock([b"k2", b"k2"], LockMode::Exclusive);
        assert!(locks.stripes[stripe].try_read().is_none());
    }
}
