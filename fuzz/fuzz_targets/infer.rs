#![no_main]
// The Parquet and ORC readers catch their readers' panics on damaged files (a corrupt file,
// not a crash; see landfall-formats' panic_guard): the fuzzer's abort-on-panic hook is
// replaced by the default one, and a panic that escapes the target still aborts
// (libfuzzer-sys catches it at the boundary).
libfuzzer_sys::fuzz_target!(
    init: { let _ = std::panic::take_hook(); },
    |data: &[u8]| landfall_fuzz::infer(data)
);
