//! Fuzz target `segment_recover`: see `partlog_fuzz::bodies::segment_recover`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::segment_recover(data));
