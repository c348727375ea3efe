//! Fuzz target `legacy_message_set`: see `partlog_fuzz::bodies::legacy_message_set`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partlog_fuzz::bodies::legacy_message_set(data));
