//! partlog's fuzz target bodies, shared by the libFuzzer targets in `fuzz_targets/` and by the
//! main crate's `tests/fuzz_replay.rs` (which includes `bodies.rs` by path); `assignor_bodies.rs`
//! likewise with partlog-groups' `tests/fuzz_replay.rs`.

pub mod assignor_bodies;
pub mod bodies;
