//! Fuzz target `producer_snapshot_decode`: see `partlog_fuzz::bodies::producer_snapshot_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::producer_snapshot_decode(data));
