//! Offline tools over a database directory: verification (`check`) and inspection (`dump`).
//!
//! Both work on the files alone, without opening the database: `check` takes the LOCK (so it
//! never races a live process) and reads everything it verifies; `dump` decodes one file. Neither
//! ever writes to the directory. The `gleaner` command line exposes them as `gleaner check` and
//! `gleaner dump`.

pub mod check;
pub mod dump;
mod text;

pub use check::{CheckReport, Problem, check_db};
pub use dump::dump_file;

#[cfg(test)]
mod tests;
