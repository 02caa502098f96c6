//! Fuzz target `bloom`: see `gleaner::fuzzing::bloom` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::bloom(data));
