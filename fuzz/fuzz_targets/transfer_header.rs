#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctp_fuzz::transfer_header(data));
