//! Fuzz target `index_open`: see `partlog_fuzz::bodies::index_open`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::index_open(data));
