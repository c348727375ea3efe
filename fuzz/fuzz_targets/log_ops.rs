//! Fuzz target `log_ops`: see `partlog_fuzz::bodies::log_ops`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::log_ops(data));
