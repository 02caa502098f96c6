//! Fuzz target `value_table`: see `gleaner::fuzzing::value_table` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::value_table(data));
