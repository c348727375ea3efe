//! The public methods of [`Log`](crate::Log) for transactions; see the [`api`](super) module.

use crate::error::Result;
use crate::format::ControlRecordType;
use crate::log::{Log, LogAppendInfo, ProducerStateEntry, TruncationEpoch};
use crate::segment::AbortedTxn;

impl Log {
    /// The aborted transactions whose ABORT marker lies at or above `from` that a read-only
    /// open's producer-state replay met, in marker order, each with the last stable offset that
    /// a writable open's replay writes into the `.txnindex` ([`upgrade_dir`](crate::upgrade_dir)
    /// writes them for the segments the source's open had to recover).
    pub(crate) fn replayed_aborted_from(&self, from: i64) -> Vec<AbortedTxn> {
        self.shared.replayed_aborted_from(from)
    }

    /// Appends a transaction marker (a COMMIT or ABORT control batch, as a Kafka broker writes
    /// for its transaction coordinator) that ends `producer_id`'s open transaction on this
    /// partition, and returns where it landed. Without a coordinator,
    /// [`commit_transaction`](Self::commit_transaction) and
    /// [`abort_transaction`](Self::abort_transaction) are the short forms.
    ///
    /// ```
    /// use partlog::{BatchBuilder, Compression, ControlRecordType, Log, LogConfig, NewRecord};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// // Producer 7 at epoch 0 writes two records in a transaction: the transaction is open,
    /// // and read_committed readers stop before its first record.
    /// let mut batch = BatchBuilder::new(Compression::None).producer(7, 0, 0).transactional(true);
    /// batch.push(&NewRecord::now(Some(b"alice"), Some(b"-10")));
    /// batch.push(&NewRecord::now(Some(b"bob"), Some(b"+10")));
    /// log.append_batch(&batch.build()?)?;
    /// assert_eq!(log.last_stable_offset(), 0);
    ///
    /// // The coordinator (epoch 3 here) commits it: the marker takes offset 2.
    /// let marker = log.append_marker(7, 0, ControlRecordType::Commit, 3)?;
    /// assert_eq!(marker.first_offset, 2);
    /// assert_eq!(log.last_stable_offset(), 3);
    ///
    /// // A marker from an older coordinator is fenced.
    /// assert!(log.append_marker(7, 0, ControlRecordType::Abort, 2).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The marker is checked as Kafka checks one from the coordinator: an epoch below the
    /// producer's is [`Error::InvalidProducerEpoch`](crate::Error::InvalidProducerEpoch), a
    /// `coordinator_epoch` below the last one seen is
    /// [`Error::TransactionCoordinatorFenced`](crate::Error::TransactionCoordinatorFenced); a
    /// marker for a producer with no open transaction is written and ends nothing. An ABORT records
    /// the transaction in the `.txnindex` of the segment that holds the marker, so that
    /// `read_committed` reads skip its data ([`Log::read_with`](crate::Log::read_with)).
    ///
    /// A `producer_id` below 0, or a `marker` other than COMMIT or ABORT, is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecordType,
        coordinator_epoch: i32,
    ) -> Result<LogAppendInfo> {
        self.append_marker_in_epoch(producer_id, producer_epoch, marker, coordinator_epoch)
            .map(|(info, _)| info)
    }

    /// Commits `producer_id`'s open transaction on this log: appends its COMMIT marker, as
    /// [`append_marker`](Self::append_marker) does for a coordinator, and returns where it
    /// landed. The short form for a log without a transaction coordinator: the marker carries
    /// the coordinator epoch this log last saw for the producer (0 if none), so it is never
    /// fenced as a stale coordinator's would be. Its errors are `append_marker`'s.
    ///
    /// ```
    /// use partlog::{BatchBuilder, Compression, Log, LogConfig, NewRecord, ReadBound};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let mut batch = BatchBuilder::new(Compression::None).producer(7, 0, 0).transactional(true);
    /// batch.push(&NewRecord::now(Some(b"order-1"), Some(b"paid")));
    /// log.append_batch(&batch.build()?)?;
    /// assert_eq!(log.committed_records(0, ReadBound::LogEnd).count(), 0); // still open
    ///
    /// log.commit_transaction(7, 0)?;
    /// assert_eq!(log.committed_records(0, ReadBound::LogEnd).count(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn commit_transaction(
        &self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<LogAppendInfo> {
        self.end_transaction(producer_id, producer_epoch, ControlRecordType::Commit)
    }

    /// Aborts `producer_id`'s open transaction on this log: appends its ABORT marker, so that
    /// `read_committed` reads skip the transaction's records. The short form of
    /// [`append_marker`](Self::append_marker), as [`commit_transaction`](Self::commit_transaction)
    /// is for a COMMIT.
    pub fn abort_transaction(
        &self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<LogAppendInfo> {
        self.end_transaction(producer_id, producer_epoch, ControlRecordType::Abort)
    }

    /// A marker with the coordinator epoch last seen for the producer: a log-level user has no
    /// coordinator, so none of its markers can be a stale coordinator's.
    fn end_transaction(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecordType,
    ) -> Result<LogAppendInfo> {
        let coordinator_epoch = self
            .shared
            .producer_state(producer_id)
            .map_or(0, |entry| entry.coordinator_epoch.max(0));
        self.append_marker(producer_id, producer_epoch, marker, coordinator_epoch)
    }

    /// [`append_marker`](Self::append_marker), with the truncation epoch of the append, for the
    /// batching writer's `acks=all` wait on the marker.
    pub(crate) fn append_marker_in_epoch(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecordType,
        coordinator_epoch: i32,
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        self.shared
            .append_marker_in_epoch(producer_id, producer_epoch, marker, coordinator_epoch)
    }

    /// Records that the transaction coordinator added this partition to `producer_id`'s transaction
    /// at `producer_epoch` (KIP-890's partition verification, in process). With
    /// [`LogConfig::transaction_partition_verification_enable`](crate::LogConfig::transaction_partition_verification_enable),
    /// a transaction's first batch is refused with
    /// [`Error::InvalidTxnState`](crate::Error::InvalidTxnState) unless it was registered so: a
    /// late write from a fenced or aborted producer cannot open a transaction that no marker will
    /// close.
    pub fn register_transaction(&self, producer_id: i64, producer_epoch: i16) -> Result<()> {
        self.shared
            .register_transaction(producer_id, producer_epoch)
    }

    /// The state the log holds for `producer_id`, if any.
    pub fn producer_state(&self, producer_id: i64) -> Option<ProducerStateEntry> {
        self.shared.producer_state(producer_id)
    }

    /// Every producer the log holds state for, by ascending producer id.
    pub fn active_producers(&self) -> Vec<ProducerStateEntry> {
        self.shared.active_producers()
    }

    /// The first offset of the earliest transaction that is open (or ended above the high
    /// watermark), if any, and never below the log start offset: a transaction whose first
    /// offset a move of the log start passed is unstable from the log start on (Kafka's
    /// `maybeIncrementFirstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.shared.poll_live();
        self.shared.first_unstable_offset()
    }

    /// The last stable offset: `read_committed` reads stop below it. It is the first unstable
    /// offset, or the high watermark when no transaction is unstable, and never below the log
    /// start. Until [`set_high_watermark`](Log::set_high_watermark) is called the log has one
    /// replica, so its high watermark is its log end offset (as a Kafka leader alone in its ISR
    /// has it).
    pub fn last_stable_offset(&self) -> i64 {
        self.shared.poll_live();
        self.shared.last_stable_offset()
    }
}
