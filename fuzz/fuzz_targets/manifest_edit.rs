//! Fuzz target `manifest_edit`: see `gleaner::fuzzing::manifest_edit` and docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gleaner::fuzzing::manifest_edit(data));
