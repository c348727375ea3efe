//! Fuzz target `assignor_user_data`: see `partlog_fuzz::assignor_bodies::assignor_user_data`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::assignor_bodies::assignor_user_data(data));
