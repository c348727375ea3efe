//! The replica layer: Kafka's `Partition` rules and the follower's truncation protocol over a
//! [`Log`](crate::Log), through its replication hooks
//! ([`become_leader`](crate::Log::become_leader),
//! [`append_as_follower`](crate::Log::append_as_follower),
//! [`set_high_watermark`](crate::Log::set_high_watermark), ...).
//!
//! partlog neither elects leaders nor moves bytes between machines: the caller supplies the
//! transport and plays Kafka's controller. This module owns what decides *what is committed*
//! and *where a follower must truncate*:
//! - [`Partition`]: the leader's rules: followers' fetch state ([`ReplicaState`]), ISR
//!   expansion and shrink ([`IsrChange`]), the high watermark, `acks=all` appends
//!   ([`AckFuture`]), leader-epoch fencing, and the diverging-epoch check of a follower fetch
//!   ([`FollowerRead`]);
//! - [`truncation_point`] and [`ReplicaFetcher`]: the follower's side, Kafka's
//!   `AbstractFetcherThread` for one partition, one step per call.
//!
//! Time comes from an injected [`Clock`](crate::unstable::Clock); there are no threads.
//!
//! The caller's controller tells each replica its partition state ([`Partition::become_leader`],
//! [`Partition::become_follower`]); a state older than the partition's (by partition epoch) is
//! ignored, and a replica checks the controller's election rule for itself: outside the last ISR
//! it was told (or, once the ISR is empty, the eligible leader replicas of KIP-966) it leads
//! only with `unclean.leader.election.enable` ([`ReplicaConfig`]).
//!
//! # Where the layer parts from Kafka, on purpose
//!
//! - A fetch from a replica outside the assignment gets [`Error::NotLeaderOrFollower`](crate::Error::NotLeaderOrFollower) (6)
//!   where Kafka answers [`Error::UnknownLeaderEpoch`](crate::Error::UnknownLeaderEpoch) (75) to a request of the current epoch.
//!   Kafka's leader may not yet know of a replica its controller just added, and the replica
//!   should retry; partlog's caller sets the assignment before it lets a new replica fetch, so
//!   a stranger was removed (or is a mistake), and a retry would not help.
//! - `acks=all` appends waiting when a shrink below `min.insync.replicas` commits fail at once
//!   with [`Error::NotEnoughReplicasAfterAppend`](crate::Error::NotEnoughReplicasAfterAppend), where Kafka 3.7+ keeps them pending until its
//!   request timeout (its high watermark stops below the minimum ISR). An [`AckFuture`] has no
//!   timeout of its own, and its waiter should learn at once that nothing commits its records
//!   until the ISR grows back; the records stay, and an idempotent retry is deduplicated.
//! - The high watermark is not persisted (after a reopen it follows the log end until set), and
//!   a follower's never moves back when its leader reports a lower one (a truncation lowers
//!   it), where Kafka checkpoints it and a follower takes a new leader's lower value. A bare log
//!   commits what it writes, so a stored value would only trail its end; a caller that must not
//!   count a restarted follower's tail as committed stores the value and sets it
//!   ([`Log::set_high_watermark`](crate::Log::set_high_watermark)) before
//!   [`ReplicaFetcher::new`] pins it. And a reader bounded by the high watermark must never see
//!   a record it was served as committed fall back above it while it is still in the log.
//!
//! ```
//! use std::sync::Arc;
//! use partlog::replica::{FetchOutcome, Partition, ReplicaConfig, ReplicaFetcher};
//! use partlog::unstable::SystemClock;
//! use partlog::{Acks, BatchBuilder, Compression, Log, LogConfig, NewRecord};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (leader_dir, follower_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
//! let leader = Partition::new(
//!     Arc::new(Log::open(leader_dir.path(), LogConfig::default())?),
//!     1,
//!     ReplicaConfig::default(),
//!     Arc::new(SystemClock),
//! )?;
//! leader.become_leader(1, 1, &[1, 2], &[1, 2])?;
//! let follower_log = Arc::new(Log::open(follower_dir.path(), LogConfig::default())?);
//! follower_log.become_follower()?;
//! let mut fetcher = ReplicaFetcher::new(Arc::clone(&follower_log), 2, 1)?;
//!
//! let mut builder = BatchBuilder::new(Compression::None);
//! builder.push(&NewRecord::new(1_700_000_000_000, None, Some(b"x")));
//! let batch = builder.build()?;
//! let ack = leader.append_as_leader(&batch, Acks::All)?;
//! assert!(!ack.is_done(), "the follower has not fetched it");
//! assert!(matches!(fetcher.fetch_once(&leader)?, FetchOutcome::Appended { .. }));
//! fetcher.fetch_once(&leader)?; // reports its new end: the high watermark moves
//! assert_eq!(ack.wait(std::time::Duration::from_secs(120))?.last_offset, 0);
//! # Ok(())
//! # }
//! ```

// The design of this layer: ARCHITECTURE.md §12.
mod ack;
mod config;
mod election;
mod fetcher;
mod follower_fetch;
mod high_watermark;
mod isr;
mod partition;
mod replica_state;
mod serve_follower;
mod truncation;

pub use ack::AckFuture;
pub use config::{
    MIN_IN_SYNC_REPLICAS_CONFIG, MIN_IN_SYNC_REPLICAS_DEFAULT, REPLICA_LAG_TIME_MAX_MS_CONFIG,
    REPLICA_LAG_TIME_MAX_MS_DEFAULT, ReplicaConfig, UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG,
    UNCLEAN_LEADER_ELECTION_ENABLE_DEFAULT,
};
pub use fetcher::{FetchOutcome, REPLICA_FETCH_MAX_BYTES_DEFAULT, ReplicaFetcher};
pub use follower_fetch::{FollowerFetch, FollowerRead};
pub use isr::{IsrChange, IsrChangeKind};
pub use partition::{Partition, Role};
pub use replica_state::{ReplicaState, UNKNOWN_OFFSET};
pub use truncation::{Truncation, truncation_point};
