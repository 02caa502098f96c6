//! Redis's numbered databases (`SELECT`, `FLUSHDB`, `MOVE`, `COPY ... DB`) in one Gleaner
//! database: the mapping between a client's (database, key) and the key stored in the engine.
//!
//! One engine holds every database, so a space budget covers them all and a transaction or a
//! `MOVE` across databases is one atomic write batch. Keys are stored so that each database
//! is a union of at most two contiguous key ranges (what `SCAN`, `DBSIZE` and `FLUSHDB` walk
//! or delete):
//!
//! | database | key `k` is stored as | range |
//! |---|---|---|
//! | 0, `k` not starting with `0xFF` | `k` (unchanged: directories written before databases existed keep working) | `["", FF)` |
//! | 0, `k` starting with `0xFF` | `FF 00 k` | `[FF 00, FF 01)` |
//! | `i` in 1..=254 | `FF i k` | `[FF i, FF i+1)` |
//! | (the layout marker) | `FF` | |
//!
//! The lead byte `0xFF` never occurs in UTF-8 text, so text keys of database 0 are never
//! escaped; the two-byte prefix of the other databases counts toward the key limit, which is
//! therefore [`MAX_KEY_LEN`] for every key of every database (the same everywhere, so whether
//! a key fits does not depend on which database it is in or on its first byte).
//!
//! The marker key `FF` records that the directory uses this layout. A directory written by a
//! gleaner-server without databases may hold database-0 keys starting with `0xFF` stored
//! unescaped; they would read as other databases' keys, so [`Keyspace::open`] refuses such a
//! directory instead of guessing.

use std::borrow::Cow;

use gleaner::{Db, ReadOptions, WriteBatch, WriteOptions};

/// Lead byte of every stored key that is not a plain database-0 key.
pub const LEAD: u8 = 0xFF;
/// The marker key: the directory uses this layout.
pub const MARKER_KEY: &[u8] = &[LEAD];
/// The marker's value (a version, should the layout ever change).
pub const MARKER_VALUE: &[u8] = b"gleaner-server keyspace 1";
/// Most databases (`--databases`): 255, numbered 0 to 254 (index 255 would make the range of
/// the last database unbounded).
pub const MAX_DATABASES: u32 = 255;
/// Default `--databases`: 16, as Redis.
pub const DEFAULT_DATABASES: u32 = 16;
/// Longest key a client may write in any database: the engine's key limit less the two-byte
/// prefix.
pub const MAX_KEY_LEN: usize = gleaner::options::MAX_KEY_SIZE - 2;

/// A stored-key range: `[start, end)`.
pub type KeyRange = (Vec<u8>, Vec<u8>);

/// The mapping for a server with `databases` databases.
#[derive(Debug, Clone, Copy)]
pub struct Keyspace {
    databases: u32,
}

/// Why [`Keyspace::open`] refused a directory.
#[derive(Debug)]
pub enum OpenError {
    /// The engine failed.
    Engine(gleaner::Error),
    /// The directory holds keys this layout cannot tell apart.
    Incompatible(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Engine(e) => write!(f, "{e}"),
            OpenError::Incompatible(m) => f.write_str(m),
        }
    }
}

impl Keyspace {
    /// The mapping for `databases` databases (1 to [`MAX_DATABASES`]; the caller validated).
    pub fn new(databases: u32) -> Keyspace {
        assert!(
            (1..=MAX_DATABASES).contains(&databases),
            "databases out of range: {databases}"
        );
        Keyspace { databases }
    }

    /// Checks that `db` uses this layout, writing the marker (synced) into a directory that has
    /// no key starting with `0xFF` yet. A read-only database is only checked.
    ///
    /// Errors: [`OpenError::Incompatible`] when keys starting with `0xFF` exist without the
    /// marker (written by a gleaner-server without databases), or the marker has another
    /// value; [`OpenError::Engine`] when reading or writing fails.
    pub fn open(databases: u32, db: &Db, read_only: bool) -> Result<Keyspace, OpenError> {
        let ks = Keyspace::new(databases);
        match db.get(MARKER_KEY).map_err(OpenError::Engine)? {
            Some(v) if v == MARKER_VALUE => {
                if let Some(index) = ks.first_database_beyond(db).map_err(OpenError::Engine)? {
                    eprintln!(
                        "gleaner-server: warning: the database holds keys of database {index}, \
                         beyond --databases {databases}: no client can reach them until the \
                         server runs with --databases {} or more",
                        u32::from(index) + 1
                    );
                }
                return Ok(ks);
            }
            Some(v) => {
                return Err(OpenError::Incompatible(format!(
                    "the database's keyspace marker (key 0xFF) holds {:?}, not {:?}: it was \
                     written by another program or a newer gleaner-server",
                    String::from_utf8_lossy(&v),
                    String::from_utf8_lossy(MARKER_VALUE)
                )));
            }
            None => {}
        }
        let opts = ReadOptions {
            lower_bound: Some(MARKER_KEY.to_vec()),
            lazy_values: true,
            ..ReadOptions::default()
        };
        let mut it = db.iter(&opts).map_err(OpenError::Engine)?;
        it.seek_to_first().map_err(OpenError::Engine)?;
        if it.valid() {
            return Err(OpenError::Incompatible(format!(
                "the database holds keys starting with byte 0xFF (the first is {} bytes long) \
                 but no keyspace marker: it was written by a gleaner-server without databases, \
                 which stored such keys unescaped, and they cannot be told apart from the keys \
                 of databases 1 and up. Rename or delete those keys with the older server first",
                it.key().len()
            )));
        }
        drop(it);
        if !read_only {
            let mut b = WriteBatch::new();
            b.put(MARKER_KEY, MARKER_VALUE);
            db.write(b, &WriteOptions { sync: true })
                .map_err(OpenError::Engine)?;
        }
        Ok(ks)
    }

    /// The index of the first database at or beyond `databases` that holds a key (written by
    /// a server with more databases), if any.
    fn first_database_beyond(&self, db: &Db) -> gleaner::Result<Option<u8>> {
        if self.databases >= MAX_DATABASES {
            return Ok(None);
        }
        let opts = ReadOptions {
            lower_bound: Some(vec![LEAD, self.databases as u8]),
            upper_bound: Some(vec![LEAD, MAX_DATABASES as u8]),
            lazy_values: true,
            ..ReadOptions::default()
        };
        let mut it = db.iter(&opts)?;
        it.seek_to_first()?;
        Ok(it.valid().then(|| it.key()[1]))
    }

    /// How many databases there are.
    pub fn databases(&self) -> u32 {
        self.databases
    }

    /// Whether `index` names a database (`SELECT`'s check).
    pub fn valid(&self, index: i64) -> bool {
        (0..i64::from(self.databases)).contains(&index)
    }

    /// The stored key of `key` in database `db`. Plain database-0 keys are not copied.
    pub fn encode<'k>(&self, db: u8, key: &'k [u8]) -> Cow<'k, [u8]> {
        debug_assert!(u32::from(db) < self.databases);
        if db == 0 && key.first() != Some(&LEAD) {
            return Cow::Borrowed(key);
        }
        let mut stored = Vec::with_capacity(key.len() + 2);
        stored.extend_from_slice(&[LEAD, db]);
        stored.extend_from_slice(key);
        Cow::Owned(stored)
    }

    /// The database and client key of a stored key; `None` for the marker or a key of no
    /// database of this server (a database index at or above `databases`).
    pub fn decode<'s>(&self, stored: &'s [u8]) -> Option<(u8, &'s [u8])> {
        match stored {
            [LEAD, db, key @ ..] if u32::from(*db) < self.databases => Some((*db, key)),
            [LEAD, ..] => None,
            key => Some((0, key)),
        }
    }

    /// The stored-key ranges of database `db`, in key order: the keys of `db` are exactly the
    /// stored keys in them.
    pub fn ranges(&self, db: u8) -> Vec<KeyRange> {
        debug_assert!(u32::from(db) < self.databases);
        if db == 0 {
            vec![(Vec::new(), vec![LEAD]), (vec![LEAD, 0], vec![LEAD, 1])]
        } else {
            vec![(vec![LEAD, db], vec![LEAD, db + 1])]
        }
    }

    /// The ranges of every database of this server (`FLUSHALL`), leaving the marker out.
    pub fn all_ranges(&self) -> Vec<KeyRange> {
        let end = self.databases as u8; // at most 255: the byte after the last database
        vec![(Vec::new(), vec![LEAD]), (vec![LEAD, 0], vec![LEAD, end])]
    }

    /// The client key of a stored key known to be in database `db` (from a walk of its
    /// ranges).
    pub fn client_key<'s>(&self, db: u8, stored: &'s [u8]) -> &'s [u8] {
        match self.decode(stored) {
            Some((d, key)) if d == db => key,
            _ => {
                debug_assert!(false, "a key outside database {db}'s ranges");
                stored
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn in_ranges(ranges: &[KeyRange], k: &[u8]) -> bool {
        ranges
            .iter()
            .any(|(s, e)| s.as_slice() <= k && k < e.as_slice())
    }

    #[test]
    fn database_zero_text_keys_are_stored_unchanged() {
        let ks = Keyspace::new(16);
        assert!(matches!(ks.encode(0, b"user:1"), Cow::Borrowed(b"user:1")));
        assert_eq!(&*ks.encode(0, b"\xFFx"), b"\xFF\x00\xFFx");
        assert_eq!(&*ks.encode(3, b"a"), b"\xFF\x03a");
        assert_eq!(ks.decode(b"\xFF"), None, "the marker is no key");
        assert_eq!(
            ks.decode(b"\xFF\x10a"),
            None,
            "database 16 of a 16-database server"
        );
        assert_eq!(ks.decode(b"\xFF\x0Fa"), Some((15, &b"a"[..])));
        assert!(!in_ranges(&ks.all_ranges(), MARKER_KEY));
        assert!(!in_ranges(&ks.ranges(0), MARKER_KEY));
    }

    #[test]
    fn the_largest_server_keeps_its_last_database_bounded() {
        let ks = Keyspace::new(MAX_DATABASES);
        assert_eq!(ks.ranges(254), vec![(vec![LEAD, 254], vec![LEAD, 255])]);
        assert!(in_ranges(&ks.all_ranges(), &ks.encode(254, b"\xFF\xFF")));
    }

    proptest! {
        /// Encoding is injective, decodes back, keeps each database's key order, and puts
        /// the key in exactly its own database's ranges (and in FLUSHALL's).
        #[test]
        fn encoding_round_trips_and_partitions(
            dbs in 1u32..=MAX_DATABASES,
            a in (0u8..=254, proptest::collection::vec(any::<u8>(), 0..6)),
            b in (0u8..=254, proptest::collection::vec(any::<u8>(), 0..6)),
        ) {
            let ks = Keyspace::new(dbs);
            let (da, ka) = ((u32::from(a.0) % dbs) as u8, a.1);
            let (db, kb) = ((u32::from(b.0) % dbs) as u8, b.1);
            let (ea, eb) = (ks.encode(da, &ka), ks.encode(db, &kb));
            prop_assert_eq!(ks.decode(&ea), Some((da, &ka[..])));
            prop_assert_eq!((da, &ka) == (db, &kb), ea == eb);
            if da == db {
                prop_assert_eq!(ka.cmp(&kb), ea.cmp(&eb));
            }
            for d in 0..dbs.min(20) as u8 {
                prop_assert_eq!(in_ranges(&ks.ranges(d), &ea), d == da);
            }
            prop_assert!(in_ranges(&ks.all_ranges(), &ea));
            prop_assert!(ea.len() <= ka.len() + 2);
        }
    }
}
