#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| landfall_fuzz::listing_page(data));
