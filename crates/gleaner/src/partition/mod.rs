//! DP-KV's partitioning (option `partitioning = dpkv`, being built): a hot and a cold partition
//! of the index tree, by the hotness of key prefixes.
//!
//! - `sketch.rs`: a count-min sketch, the per-key counter that gates the trie;
//! - `trie.rs`: the prefix hotness statistics (paper §4.1), pure and driven by its caller's
//!   clock;
//! - `trie_codec.rs`: their bytes, checked against the configuration they restore into;
//! - `persist.rs`: the full snapshot and incremental log that keep them across restarts
//!   (paper §4.3);
//! - `detector.rs`: the statistics as the engine runs them: accesses recorded, ticks that
//!   judge, save and name the routing the index tree should have.
//!
//! The partitions and the migration between them are built on top of these (issue 29); until
//! they are, nothing outside the tests calls them.
#![allow(
    dead_code,
    reason = "the partitioned index tree that reads the statistics is being built on them"
)]

pub mod detector;
pub mod persist;
pub mod sketch;
pub mod trie;
pub mod trie_codec;
