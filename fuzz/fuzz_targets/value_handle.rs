//! Fuzz target `value_handle`: see `gleaner::fuzzing::value_handle` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::value_handle(data));
