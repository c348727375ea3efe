//! Fuzz target `checkpoint_decode`: see `partlog_fuzz::bodies::checkpoint_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::checkpoint_decode(data));
