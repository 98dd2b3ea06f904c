//! cargo-fuzz target: `meshplan_core::fuzzing::profile` (see docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    meshplan_core::fuzzing::profile(data);
});
