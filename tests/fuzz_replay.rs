//! Replays the fuzz corpus and the fuzz regression inputs through the fuzz targets' bodies, so
//! that plain `cargo test` (no libFuzzer, no nightly) runs every input the fuzzer kept.
//!
//! The bodies live in `fuzz/src/bodies.rs`, shared with the fuzz crate; a body panics when
//! partlog panics or breaks a promise it makes, and so fails this test naming the input file.
#![cfg(feature = "sim")]

#[path = "../fuzz/src/bodies.rs"]
mod bodies;

use std::path::Path;

/// Runs every file of `fuzz/<kind>/<target>/` through `body`; returns how many ran.
fn replay(kind: &str, target: &str, body: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut paths: Vec<_> = entries
        .map(|entry| entry.expect("readable fuzz directory").path())
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    for path in &paths {
        let input = std::fs::read(path).expect("readable fuzz input");
        let outcome = std::panic::catch_unwind(|| body(&input));
        assert!(outcome.is_ok(), "fuzz input {} fails", path.display());
    }
    paths.len()
}

#[test]
fn corpus_replays_clean() {
    for (target, body) in bodies::TARGETS {
        let ran = replay("corpus", target, body);
        // An empty corpus would make this test pass without checking anything.
        assert!(ran > 0, "fuzz/corpus/{target} holds no seed");
    }
}

#[test]
fn artifacts_replay_clean() {
    for (target, body) in bodies::TARGETS {
        replay("artifacts", target, body);
    }
}

/// `checkpoint_decode` found (on the golden `extreme_values` checkpoint under a log) that a
/// checkpoint naming log start offset i64::MAX made open delete every segment (Kafka's "the log
/// ends below its start" rule) and only then fail to create one at that base: each later open
/// failed too, with the data gone. The open must be refused before anything is removed.
#[test]
fn checkpoint_start_beyond_any_segment_base_is_refused_before_segments_go() {
    let input = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/artifacts/checkpoint_decode/start-offset-beyond-any-segment-base");
    let input = std::fs::read(input).expect("the committed regression input");
    // Prefix 5: the checkpoint is recomputed into a log of 12 records (checkpoint_decode).
    assert_eq!(input.first(), Some(&5));
    bodies::checkpoint_decode(&input);
}
