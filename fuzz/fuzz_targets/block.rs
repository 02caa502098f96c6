//! Fuzz target `block`: see `gleaner::fuzzing::block` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::block(data));
