//! The replica layer: Kafka's `Partition` rules and the follower's truncation protocol over a
//! [`Log`](crate::Log) (ARCHITECTURE.md §12).
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

mod ack;
mod config;
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
    REPLICA_LAG_TIME_MAX_MS_DEFAULT, ReplicaConfig,
};
pub use fetcher::{FetchOutcome, REPLICA_FETCH_MAX_BYTES_DEFAULT, ReplicaFetcher};
pub use follower_fetch::{FollowerFetch, FollowerRead};
pub use isr::{IsrChange, IsrChangeKind};
pub use partition::{Partition, Role};
pub use replica_state::{ReplicaState, UNKNOWN_OFFSET};
pub use truncation::{Truncation, truncation_point};
