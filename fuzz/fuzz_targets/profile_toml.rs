#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctp_fuzz::profile_toml(data));
