//! Replays the fuzz corpus and regression inputs of the `assignor_user_data` target through its
//! body (`fuzz/src/assignor_bodies.rs`, shared with the fuzz crate), so that plain `cargo test`
//! runs every input the fuzzer kept: bad user data never panics a decoder or an assignor.

#[path = "../../../fuzz/src/assignor_bodies.rs"]
mod assignor_bodies;

use std::path::Path;

/// Runs every file of `fuzz/<kind>/<target>/` through `body`; returns how many ran.
fn replay(kind: &str, target: &str, body: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut paths: Vec<_> = entries
        .map(|entry| entry.expect("readable fuzz directory").path())
        .filter(|p| p.is_file())
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
fn assignor_corpus_replays_clean() {
    for (target, body) in assignor_bodies::TARGETS {
        assert!(
            replay("corpus", target, body) > 0,
            "fuzz/corpus/{target} holds no seed"
        );
    }
}

#[test]
fn assignor_artifacts_replay_clean() {
    for (target, body) in assignor_bodies::TARGETS {
        replay("artifacts", target, body);
    }
}

/// Short inputs at the decoders' length checks go through the body: every 1-byte string, 2-byte
/// strings with edge second bytes, and array counts and partition ids over every byte value.
#[test]
fn short_user_data_never_panics() {
    for a in 0..=255u8 {
        assignor_bodies::assignor_user_data(&[a]);
        for b in [0u8, 1, 2, 0x7f, 0x80, 0xff] {
            assignor_bodies::assignor_user_data(&[a, b]);
        }
        assignor_bodies::assignor_user_data(&[0, 0, 0, 1, 0, a]);
        assignor_bodies::assignor_user_data(&[0, 0, 0, 1, 0, 1, b'u', 0, 0, 0, 1, 0, 0, 0, a]);
    }
}
