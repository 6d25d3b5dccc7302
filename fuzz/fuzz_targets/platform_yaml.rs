//! Platform files in YAML (`--platform FILE.yaml`): loaded and validated as `simulate` loads
//! them, then resolved against a footprint; see `tierkit_fuzz::platform_target`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tierkit_fuzz::platform_target("yaml", data));
