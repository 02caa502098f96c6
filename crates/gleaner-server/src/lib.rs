//! `gleaner-server`: Gleaner over the Redis protocol.
//!
//! The binary (`src/main.rs`) parses the command line ([`config`]), opens the database, binds
//! and runs a [`server::Server`] on a Tokio runtime. Each client is a [`connection`] task that
//! parses requests ([`resp::parser`]), runs them on a blocking thread ([`exec`], with the
//! command table in [`commands`]) and writes the encoded replies ([`resp::reply`]).
//! [`strings`] holds the value arithmetic of the string commands, as pure functions.
//! docs/server.md in the repository describes every command, option, limit and guarantee.

pub mod auth;
pub mod commands;
pub mod config;
pub mod connection;
pub mod cursors;
pub mod durability;
pub mod exec;
/// Entry point of the fuzz target (`fuzz/`) and of the seed-corpus test: arbitrary bytes fed to
/// the request parser. Not API; exported only so the fuzz crate can reach it.
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod keylocks;
pub mod keyspace;
pub mod resp;
pub mod server;
pub mod session;
pub mod shared;
pub mod stats;
pub mod strings;

pub use config::{Args, Config};
pub use durability::SyncMode;
pub use server::Server;
