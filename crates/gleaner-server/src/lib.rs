//! `gleaner-server`: Gleaner over the Redis protocol.
//!
//! The building blocks first: the request parser and reply encoder ([`resp`]), glob patterns,
//! SCAN cursors, the password check, key locks, the `--sync` modes and the server's counters.

pub mod auth;
pub mod cursors;
pub mod durability;
/// Entry point of the fuzz target (`fuzz/`) and of the seed-corpus test: arbitrary bytes fed to
/// the request parser. Not API; exported only so the fuzz crate can reach it.
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod keylocks;
pub mod resp;
pub mod stats;

pub use durability::SyncMode;
