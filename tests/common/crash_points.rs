//! The crash points of a simulator run, shared by the crash tests
//! (`#[path = "common/crash_points.rs"] mod crash_points;`): a dry run records its events, and
//! each state-changing operation among them is a point to crash before.

use std::collections::BTreeMap;

use partlog::unstable::sim::{FaultOp, SimEvent};

/// Maps a simulator event to the kind of operation a crash rule counts; reads and other events
/// that change nothing on the disk are not crash points.
pub fn op_of(event: &SimEvent) -> Option<FaultOp> {
    Some(match event {
        SimEvent::Create { .. } => FaultOp::Create,
        SimEvent::CreateDir { .. } => FaultOp::CreateDir,
        SimEvent::Write { .. } => FaultOp::Write,
        SimEvent::SetLen { .. } => FaultOp::SetLen,
        SimEvent::Sync { .. } => FaultOp::Sync,
        SimEvent::SyncDir { .. } => FaultOp::SyncDir,
        SimEvent::SyncFileSystem { .. } => FaultOp::SyncFileSystem,
        SimEvent::Rename { .. } => FaultOp::Rename,
        SimEvent::Remove { .. } => FaultOp::Remove,
        SimEvent::SetMtime { .. } => FaultOp::SetMtime,
        _ => return None,
    })
}

/// The crash points of a dry run: for each state-changing operation, its kind and its ordinal
/// among operations of that kind (what a `FaultRule` counts).
pub fn crash_points(events: &[SimEvent]) -> Vec<(FaultOp, u64)> {
    let mut seen: BTreeMap<FaultOp, u64> = BTreeMap::new();
    events
        .iter()
        .filter_map(op_of)
        .map(|op| {
            let n = seen.entry(op).or_insert(0);
            *n += 1;
            (op, *n)
        })
        .collect()
}
