#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| landfall_fuzz::delta_log(data));
