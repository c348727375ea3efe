//! [`Eligibility`]: which replicas may become the leader cleanly, from the ISRs a replica has
//! been told: Kafka's controller rule (`PartitionChangeBuilder.isValidNewLeader`), checked by
//! each replica for itself since partlog's caller plays the controller.
//!
//! A clean leader is a member of the last ISR or, once the ISR is empty, one of its eligible
//! leader replicas (KIP-966, on by default since Kafka 4.1): the members that left the ISR while
//! it was below `min.insync.replicas`. The high watermark does not move while the ISR is that
//! small, so they hold everything committed. Anyone else is an unclean leader.

use std::collections::BTreeSet;

/// The last ISR a replica knows and the eligible leader replicas it implies.
#[derive(Debug, Clone, Default)]
pub(crate) struct Eligibility {
    /// The last ISR told: by `become_leader`, by `become_follower`, or by a committed change.
    /// `None` before the first: a partition object that was never told an ISR cannot judge.
    isr: Option<BTreeSet<i32>>,
    /// KIP-966's eligible leader replicas.
    elr: BTreeSet<i32>,
}

impl Eligibility {
    /// Records `isr` as the partition's new ISR, updating the eligible leader replicas as
    /// Kafka's controller does (`maybePopulateTargetElr`): an ISR of at least `min_isr` members
    /// clears them; a smaller one adds the members that left it, and drops those in it.
    ///
    /// Kafka also drops a replica that restarted after an unclean shutdown (its unflushed
    /// records may be gone); a replica cannot see other replicas' shutdowns, so the caller's
    /// controller keeps such a replica out of the ISRs it reports instead.
    pub(crate) fn learn(&mut self, isr: impl IntoIterator<Item = i32>, min_isr: usize) {
        let isr: BTreeSet<i32> = isr.into_iter().collect();
        if isr.len() >= min_isr {
            self.elr.clear();
        } else if let Some(previous) = &self.isr {
            self.elr.extend(previous.iter().copied());
            self.elr.retain(|id| !isr.contains(id));
        }
        self.isr = Some(isr);
    }

    /// Whether `replica` may lead without an unclean election.
    pub(crate) fn may_lead_cleanly(&self, replica: i32) -> bool {
        match &self.isr {
            None => true,
            Some(isr) if isr.is_empty() => self.elr.contains(&replica),
            Some(isr) => isr.contains(&replica),
        }
    }

    /// The last ISR told, sorted (empty before any).
    pub(crate) fn isr(&self) -> Vec<i32> {
        self.isr.iter().flatten().copied().collect()
    }

    /// The eligible leader replicas, sorted.
    pub(crate) fn elr(&self) -> Vec<i32> {
        self.elr.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_told_judges_nothing_and_the_isr_decides_once_told() {
        let mut eligibility = Eligibility::default();
        assert!(eligibility.may_lead_cleanly(7));
        eligibility.learn([1, 2], 1);
        assert!(eligibility.may_lead_cleanly(1));
        assert!(!eligibility.may_lead_cleanly(3));
    }

    #[test]
    fn members_leaving_an_isr_below_min_isr_stay_eligible_once_it_is_empty() {
        let mut eligibility = Eligibility::default();
        eligibility.learn([1, 2, 3], 2);
        eligibility.learn([1, 2], 2);
        assert!(eligibility.elr().is_empty(), "still at min.insync.replicas");
        eligibility.learn([1], 2);
        assert_eq!(eligibility.elr(), [2]);
        eligibility.learn([], 2);
        assert_eq!(eligibility.elr(), [1, 2]);
        assert!(eligibility.may_lead_cleanly(2));
        assert!(
            !eligibility.may_lead_cleanly(3),
            "3 left while the ISR was at 2"
        );
        // 2 is elected from the ELR: the ISR is 2 alone, and it leaves the ELR.
        eligibility.learn([2], 2);
        assert_eq!(eligibility.elr(), [1]);
        assert!(!eligibility.may_lead_cleanly(1), "the ISR is not empty");
        eligibility.learn([1, 2], 2);
        assert!(eligibility.elr().is_empty());
    }
}
