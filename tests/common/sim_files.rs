//! A log directory on the simulator as plain bytes, for the bit-flip tests
//! (`#[path = "common/sim_files.rs"] mod sim_files;`): a snapshot of its files, and the batches
//! of a `.log` file.

use std::collections::BTreeMap;
use std::path::Path;

use partlog::unstable::{OpenMode, SimStorage, Storage};

/// File name -> contents.
pub type Files = BTreeMap<String, Vec<u8>>;

/// Every file of `dir` except the lock file, read whole.
pub fn snapshot(sim: &SimStorage, dir: &str) -> Files {
    let mut files = Files::new();
    for name in sim.list(Path::new(dir)).unwrap() {
        if name == "partlog.lock" {
            continue;
        }
        let file = sim
            .open(&Path::new(dir).join(&name), OpenMode::Read)
            .unwrap();
        let mut bytes = vec![0; usize::try_from(file.len().unwrap()).unwrap()];
        file.read_exact_at(&mut bytes, 0).unwrap();
        files.insert(name, bytes);
    }
    files
}

/// The byte ranges of the batches of a `.log` file, as far as their batchLength fields frame
/// them; a trailing partial frame is left out.
pub fn batch_spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut position = 0;
    while position + 12 <= bytes.len() {
        let length = i32::from_be_bytes(bytes[position + 8..position + 12].try_into().unwrap());
        let end = position + 12 + usize::try_from(length).unwrap();
        spans.push((position, end));
        position = end;
    }
    spans
}
