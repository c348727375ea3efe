//! The in-sync replica set: the committed ISR, the one change in flight, and the maximal ISR
//! (Kafka's `CommittedPartitionState`, `PendingExpandIsr` and `PendingShrinkIsr`).

use std::collections::BTreeSet;

/// Whether an [`IsrChange`] adds a replica or drops some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsrChangeKind {
    /// A follower caught up and joins (Kafka's `PendingExpandIsr`).
    Expand,
    /// Followers fell behind and leave (Kafka's `PendingShrinkIsr`).
    Shrink,
}

/// A proposed ISR, for the caller's controller (Kafka's `AlterPartition` request) to commit or
/// reject; [`Partition::complete_isr_change`](super::Partition::complete_isr_change) reports the
/// answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// Expansion or shrink.
    pub kind: IsrChangeKind,
    /// The proposed ISR, sorted.
    pub new_isr: Vec<i32>,
    /// The leader epoch the proposal was made in.
    pub leader_epoch: i32,
    /// The partition epoch the proposal is based on; a committed change moves it up by one.
    pub partition_epoch: i32,
}

/// The committed ISR and the change in flight, if any: one at a time, as in Kafka.
#[derive(Debug, Clone, Default)]
pub(crate) struct IsrState {
    committed: BTreeSet<i32>,
    in_flight: Option<IsrChange>,
}

impl IsrState {
    /// A committed ISR with nothing in flight.
    pub fn new(isr: impl IntoIterator<Item = i32>) -> Self {
        IsrState {
            committed: isr.into_iter().collect(),
            in_flight: None,
        }
    }

    /// The committed ISR.
    pub fn committed(&self) -> &BTreeSet<i32> {
        &self.committed
    }

    /// The change in flight.
    pub fn in_flight(&self) -> Option<&IsrChange> {
        self.in_flight.as_ref()
    }

    /// The committed ISR plus the members whose addition is in flight. The high watermark
    /// waits for them: once the expansion commits they are in the ISR, and a high watermark
    /// that moved past them in the meantime would have committed records they lack. During a
    /// shrink the leaving members still count, until the shrink commits.
    pub fn maximal(&self) -> BTreeSet<i32> {
        let mut maximal = self.committed.clone();
        if let Some(change) = &self.in_flight {
            maximal.extend(change.new_isr.iter().copied());
        }
        maximal
    }

    /// Records a proposal as in flight. The caller checked that none is.
    pub fn propose(&mut self, change: IsrChange) {
        self.in_flight = Some(change);
    }

    /// Ends the change in flight when it is `change`: a committed one becomes the ISR, a
    /// rejected one is dropped. Returns whether it matched.
    pub fn complete(&mut self, change: &IsrChange, committed: bool) -> bool {
        if self.in_flight.as_ref() != Some(change) {
            return false;
        }
        self.in_flight = None;
        if committed {
            self.committed = change.new_isr.iter().copied().collect();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: IsrChangeKind, new_isr: &[i32]) -> IsrChange {
        IsrChange {
            kind,
            new_isr: new_isr.to_vec(),
            leader_epoch: 5,
            partition_epoch: 1,
        }
    }

    #[test]
    fn an_expansion_in_flight_is_in_the_maximal_isr_at_once_and_in_the_isr_once_committed() {
        let mut isr = IsrState::new([1]);
        let expand = change(IsrChangeKind::Expand, &[1, 2]);
        isr.propose(expand.clone());
        assert_eq!(isr.committed(), &BTreeSet::from([1]));
        assert_eq!(isr.maximal(), BTreeSet::from([1, 2]));
        assert!(isr.complete(&expand, true));
        assert_eq!(isr.committed(), &BTreeSet::from([1, 2]));
        assert!(isr.in_flight().is_none());
    }

    #[test]
    fn a_shrink_in_flight_keeps_the_leaving_members_in_the_maximal_isr() {
        let mut isr = IsrState::new([1, 2, 3]);
        let shrink = change(IsrChangeKind::Shrink, &[1, 2]);
        isr.propose(shrink.clone());
        assert_eq!(isr.maximal(), BTreeSet::from([1, 2, 3]));
        assert!(isr.complete(&shrink, true));
        assert_eq!(isr.maximal(), BTreeSet::from([1, 2]));
    }

    #[test]
    fn a_rejected_change_leaves_the_isr_and_a_stale_one_is_not_applied() {
        let mut isr = IsrState::new([1]);
        let expand = change(IsrChangeKind::Expand, &[1, 2]);
        assert!(!isr.complete(&expand, true), "nothing in flight");
        isr.propose(expand.clone());
        assert!(isr.complete(&expand, false));
        assert_eq!(isr.maximal(), BTreeSet::from([1]));
    }
}
