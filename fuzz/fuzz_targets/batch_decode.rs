//! Fuzz target `batch_decode`: see `partlog_fuzz::bodies::batch_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::batch_decode(data));
