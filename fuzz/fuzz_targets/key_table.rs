//! Fuzz target `key_table`: see `gleaner::fuzzing::key_table` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::key_table(data));
