//! Fuzz target `value_record`: see `gleaner::fuzzing::value_record` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::value_record(data));
