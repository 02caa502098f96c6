//! Fuzz target `value_segment`: see `gleaner::fuzzing::value_segment` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::value_segment(data));
