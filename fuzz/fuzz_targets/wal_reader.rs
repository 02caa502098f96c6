//! Fuzz target `wal_reader`: see `gleaner::fuzzing::wal_reader` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::wal_reader(data));
