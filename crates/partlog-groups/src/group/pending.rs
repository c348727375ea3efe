//! [`Pending`]: an answer the coordinator gives later (a parked JoinGroup or SyncGroup), and
//! the join and sync responses it carries.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::Error;

/// An answer that a later call completes: another member's join, the leader's sync, or
/// [`tick`](super::GroupCoordinator::tick) when a timer fires. Poll it with
/// [`try_take`](Self::try_take), or await it (it is a `Future`); no thread waits behind it.
#[derive(Debug)]
pub struct Pending<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

#[derive(Debug)]
struct Slot<T> {
    value: Option<T>,
    completed: bool,
    waker: Option<Waker>,
}

impl<T> Clone for Pending<T> {
    fn clone(&self) -> Self {
        Pending {
            slot: Arc::clone(&self.slot),
        }
    }
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Pending<T> {
    /// An answer not yet given.
    pub fn new() -> Self {
        Pending {
            slot: Arc::new(Mutex::new(Slot {
                value: None,
                completed: false,
                waker: None,
            })),
        }
    }

    /// An answer given at once.
    pub fn ready(value: T) -> Self {
        let pending = Self::new();
        pending.complete(value);
        pending
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot<T>> {
        // The slot holds plain data: a panic elsewhere leaves it consistent.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives the answer; only the first one counts. Returns whether this one did.
    pub(crate) fn complete(&self, value: T) -> bool {
        let mut slot = self.lock();
        if slot.completed {
            return false;
        }
        slot.completed = true;
        slot.value = Some(value);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        true
    }

    /// Whether the answer was given (taken or not).
    pub fn is_completed(&self) -> bool {
        self.lock().completed
    }

    /// The answer, once given; `None` before (and after it was taken).
    pub fn try_take(&self) -> Option<T> {
        self.lock().value.take()
    }
}

impl<T> Future for Pending<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.lock();
        match slot.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A member as the leader's JoinGroup response lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// Its member id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its metadata for the chosen protocol (a consumer's subscription).
    pub metadata: Vec<u8>,
}

/// The answer to a JoinGroup (Kafka's `JoinGroupResponseData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// The error, `None` on success.
    pub error: Option<Error>,
    /// The generation joined (−1 on error).
    pub generation: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The protocol chosen.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// For a returning static leader in a Stable group: do not compute an assignment.
    pub skip_assignment: bool,
    /// The member's id (given by the coordinator to a new member).
    pub member_id: String,
    /// Every member and its metadata, for the leader only (empty for the others).
    pub members: Vec<JoinedMember>,
}

impl JoinGroupResponse {
    /// An error answer for `member_id`.
    pub fn error(member_id: impl Into<String>, error: Error) -> Self {
        JoinGroupResponse {
            error: Some(error),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.into(),
            members: Vec::new(),
        }
    }
}

/// The answer to a SyncGroup (Kafka's `SyncGroupResponseData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// The error, `None` on success.
    pub error: Option<Error>,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The protocol chosen.
    pub protocol: Option<String>,
    /// The member's assignment (a consumer's `ConsumerProtocolAssignment`).
    pub assignment: Vec<u8>,
}

impl SyncGroupResponse {
    /// An error answer.
    pub fn error(error: Error) -> Self {
        SyncGroupResponse {
            error: Some(error),
            protocol_type: None,
            protocol: None,
            assignment: Vec::new(),
        }
    }
}
