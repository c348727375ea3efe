//! Appends: [`Log::append`], [`Log::append_batch`] and [`Log::append_batch_trusted`], the
//! producer's checked path, the validation of a producer's batch, the timestamp checks, and the
//! per-thread buffer that batches are built in.
//!
//! Every append ends in `append_built_in_epoch`, which assigns offsets and writes under the
//! writer mutex (ARCHITECTURE.md §4); what comes before it checks and builds the batch without
//! any lock held.

use std::sync::Arc;

use crate::clock::{COARSE_CLOCK_LAG_MS, Clock};
use crate::error::{Error, Result};
use crate::format::{
    BatchBuilder, BatchHeader, BatchView, Compression, ControlRecordType, EndTransactionMarker,
    NewRecord, RECORD_BATCH_OVERHEAD, RecordRef, TimestampType, build_control_batch,
    control_record_type, set_base_offset, set_log_append_time_in_parts, set_partition_leader_epoch,
};
use crate::segment::AppendBytes;

use crate::log::txn::producer_state::{AppendOrigin, ProducerAppendCheck, ProducerAppendInfo};
use crate::log::{CompressionType, LogAppendInfo, LogConfig, Shared, TruncationEpoch, Writer};
use crate::sync::MutexGuard;

impl Shared {
    /// See [`Log::append_marker_in_epoch`](crate::Log::append_marker_in_epoch).
    pub(in crate::log) fn append_marker_in_epoch(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: ControlRecordType,
        coordinator_epoch: i32,
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        self.check_writable()?;
        if producer_id < 0 {
            return Err(Error::InvalidArgument {
                why: format!("a transaction marker needs a producer id, not {producer_id}"),
            });
        }
        if !marker.is_transaction_marker() {
            return Err(Error::InvalidArgument {
                why: format!("{marker:?} is not a transaction marker (COMMIT or ABORT)"),
            });
        }
        let now = self.clock.now_ms();
        let mut batch = build_control_batch(
            marker,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            0,
            now,
        );
        self.append_built_from(&mut batch, &[], now, AppendOrigin::Coordinator)
    }

    /// See [`Log::append`](crate::Log::append).
    pub(in crate::log) fn append(&self, records: &[NewRecord]) -> Result<LogAppendInfo> {
        self.append_records(
            records,
            |record| (record.timestamp, record.key.is_some()),
            BatchBuilder::push,
        )
    }

    /// See [`Log::append_refs`](crate::Log::append_refs).
    pub(in crate::log) fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<LogAppendInfo> {
        self.append_records(
            records,
            |record| (record.timestamp, record.key.is_some()),
            BatchBuilder::push_ref,
        )
    }

    /// The body of [`append`](Self::append) for records of either form: `describe` gives a
    /// record's timestamp and whether it has a key, `push` encodes it.
    fn append_records<R>(
        &self,
        records: &[R],
        describe: impl Fn(&R) -> (i64, bool),
        push: impl Fn(&mut BatchBuilder, &R),
    ) -> Result<LogAppendInfo> {
        self.check_writable()?;
        if records.is_empty() {
            return Err(Error::InvalidArgument {
                why: "an append needs at least one record".into(),
            });
        }
        let now = self.append_time_ms();
        for record in records {
            let (timestamp, has_key) = describe(record);
            self.check_record_against(timestamp, has_key, now)?;
        }
        let mut builder = BatchBuilder::with_buffer(self.records_codec(), take_batch_buffer());
        for record in records {
            push(&mut builder, record);
        }
        let mut batch = builder.build()?;
        // The time the records were checked against serves the append too: a second clock read
        // per append cost as much as the CRC.
        let appended = self.append_built(&mut batch, now);
        give_back_batch_buffer(batch);
        appended
    }

    /// The log's time for an [`append`](Self::append) of records: under CreateTime the coarse
    /// clock ([`Clock::now_ms_coarse`]), under LogAppendTime the precise one.
    ///
    /// Under CreateTime the time serves the timestamp bounds, where
    /// [`check_record_against`](Self::check_record_against) reads the precise clock for a record
    /// near a bound (so the verdict is the precise clock's), and the roll: the age of a segment
    /// whose batches have no timestamps, a new segment's creation time and the sealed file's
    /// mtime, each at most the coarse clock's lag early (Kafka's own mtime is the last write's,
    /// earlier than the roll too). The precise wall clock cost as much as the CRC-32C of a
    /// 100-byte record's batch (crates/partlog-bench/benches/README.md, "Where partlog misses its target"). Under
    /// LogAppendTime the time is stamped into the batch, so it is the precise clock's.
    fn append_time_ms(&self) -> i64 {
        let clock = &self.clock;
        if self.config.message_timestamp_type == TimestampType::CreateTime {
            clock.now_ms_coarse()
        } else {
            clock.now_ms()
        }
    }

    /// See [`Log::check_record_against`](crate::Log::check_record_against).
    pub(in crate::log) fn check_record_against(
        &self,
        timestamp: i64,
        has_key: bool,
        log_time_ms: i64,
    ) -> Result<()> {
        if self.config.cleanup_policy.compacts() && !has_key {
            return Err(compacted_without_key());
        }
        self.check_timestamp_against(timestamp, log_time_ms)
    }

    /// The timestamp bounds of [`check_record_against`](Self::check_record_against) alone:
    /// `timestamp` against `log_time_ms` from [`append_time_ms`](Self::append_time_ms), with the
    /// precise clock read only for a timestamp within the coarse reading's lag of a bound.
    fn check_timestamp_against(&self, timestamp: i64, log_time_ms: i64) -> Result<()> {
        let config = &self.config;
        // -1 (no timestamp) passes, as it does in check_timestamp.
        if config.message_timestamp_type != TimestampType::CreateTime || timestamp == -1 {
            return Ok(());
        }
        if timestamp >= 0 {
            // coarse <= now <= coarse + lag. Then timestamp - now <= timestamp - coarse, and
            // now - timestamp <= coarse + lag - timestamp: both within their bound means the
            // precise check would pass too.
            let ahead = timestamp.saturating_sub(log_time_ms);
            let behind = log_time_ms
                .saturating_add(COARSE_CLOCK_LAG_MS)
                .saturating_sub(timestamp);
            if ahead <= config.message_timestamp_after_max_ms
                && behind <= config.message_timestamp_before_max_ms
            {
                return Ok(());
            }
        }
        check_timestamp(config, timestamp, self.clock.now_ms())
    }

    /// See [`Log::check_record_at_send`](crate::Log::check_record_at_send).
    pub(in crate::log) fn check_record_at_send(&self, timestamp: i64, has_key: bool) -> Result<()> {
        let config = &self.config;
        if config.message_timestamp_type != TimestampType::CreateTime || timestamp == -1 {
            // No bound to check: the time is not read.
            return self.check_record_against(timestamp, has_key, i64::MIN);
        }
        self.check_record_against(timestamp, has_key, self.clock.now_ms_coarse())
    }

    /// See [`Log::records_codec`](crate::Log::records_codec).
    pub(in crate::log) fn records_codec(&self) -> Compression {
        match self.config.compression_type {
            CompressionType::Producer | CompressionType::Uncompressed => Compression::None,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        }
    }

    /// See [`Log::clock`](crate::Log::clock).
    pub(in crate::log) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// See [`Log::append_checked_batch`](crate::Log::append_checked_batch).
    pub(in crate::log) fn append_checked_batch(
        &self,
        batch: &mut [u8],
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        self.check_writable()?;
        self.append_built_in_epoch(batch, self.clock.now_ms())
    }

    /// See [`Log::writable`](crate::Log::writable).
    pub(in crate::log) fn writable(&self) -> Result<()> {
        self.check_writable()
    }

    /// See [`Log::append_batch`](crate::Log::append_batch).
    pub(in crate::log) fn append_batch(&self, batch: &[u8]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        // One clock read for the checks and the append, as in `append`.
        let now = self.append_time_ms();
        let batch = self.validate_producer_batch(batch, true, now)?;
        self.append_produced(batch, now)
    }

    /// See [`Log::append_batch_trusted`](crate::Log::append_batch_trusted).
    pub(in crate::log) fn append_batch_trusted(&self, batch: &[u8]) -> Result<LogAppendInfo> {
        self.check_writable()?;
        // One clock read for the checks and the append, as in `append`.
        let now = self.append_time_ms();
        let batch = self.validate_producer_batch(batch, false, now)?;
        self.append_produced(batch, now)
    }

    /// Appends a batch [`validate_producer_batch`](Self::validate_producer_batch) returned.
    fn append_produced(&self, batch: ProducedBatch<'_>, now: i64) -> Result<LogAppendInfo> {
        match batch {
            ProducedBatch::Stamped {
                mut header,
                records,
            } => self
                .append_built_from(&mut header, records, now, AppendOrigin::Client)
                .map(|(info, _)| info),
            ProducedBatch::Whole(mut batch) => {
                let appended = self.append_built(&mut batch, now);
                give_back_batch_buffer(batch);
                appended
            }
        }
    }

    /// Kafka's leader checks of a produced batch (see [`append_batch`](Self::append_batch)), with
    /// the timestamp bounds against `log_time_ms` (from [`append_time_ms`](Self::append_time_ms)).
    /// Returns the batch to append: the producer's bytes with a copy of their header to stamp,
    /// or the batch whole in a buffer of the log's (rebuilt in the log's codec, or copied when
    /// it is smaller than [`STAMPED_BATCH_MIN_BYTES`]).
    fn validate_producer_batch<'a>(
        &self,
        bytes: &'a [u8],
        check_records: bool,
        log_time_ms: i64,
    ) -> Result<ProducedBatch<'a>> {
        let config = &self.config;
        let invalid = |why: &str| Error::InvalidArgument {
            why: why.to_string(),
        };
        let view = BatchView::new(bytes).map_err(|what| Error::InvalidBatch { what })?;
        let header = *view.header();
        if bytes.len() as u64 > u64::from(config.max_message_bytes) {
            return Err(Error::RecordTooLarge {
                size: bytes.len() as u64,
                max: u64::from(config.max_message_bytes),
                limit: crate::error::MAX_MESSAGE_BYTES,
            });
        }
        if header.records_count <= 0 {
            return Err(invalid("a produced batch must hold at least one record"));
        }
        if i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count) {
            return Err(invalid("lastOffsetDelta + 1 must equal the records count"));
        }
        if header.producer_id >= 0 && header.base_sequence < 0 {
            return Err(invalid("an idempotent batch needs a base sequence"));
        }
        if header.is_transactional() && header.producer_id < 0 {
            return Err(invalid("a transactional batch needs a producer id"));
        }
        if header.is_control() {
            return Err(invalid("producers may not write control batches"));
        }
        if header.delete_horizon_ms().is_some() {
            return Err(invalid("producers may not set the delete-horizon bit"));
        }
        if header.timestamp_type() == TimestampType::LogAppendTime {
            return Err(invalid("producers may not set the LogAppendTime bit"));
        }
        let create_time = config.message_timestamp_type == TimestampType::CreateTime;
        let codec = header.compression()?;
        let target_codec = match config.compression_type {
            CompressionType::Producer => codec,
            CompressionType::Uncompressed => Compression::None,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        };
        let recompress = target_codec != codec;
        if check_records || recompress || config.cleanup_policy.compacts() {
            let mut scratch = Vec::new();
            let mut count = 0i64;
            let mut rebuilt = recompress.then(|| {
                BatchBuilder::new(target_codec)
                    .producer(
                        header.producer_id,
                        header.producer_epoch,
                        header.base_sequence,
                    )
                    .transactional(header.is_transactional())
            });
            for record in view.records(&mut scratch)? {
                let record = record?;
                count += 1;
                if config.cleanup_policy.compacts() && record.key.is_none() {
                    return Err(compacted_without_key());
                }
                if create_time {
                    self.check_timestamp_against(record.timestamp, log_time_ms)?;
                }
                if let Some(builder) = rebuilt.as_mut() {
                    builder.push_record(&record);
                }
            }
            if count != i64::from(header.records_count) {
                return Err(Error::InvalidBatch {
                    what: crate::error::Corruption::RecordCount {
                        declared: header.records_count,
                        found: count,
                    },
                });
            }
            if let Some(builder) = rebuilt {
                let batch = builder.build()?;
                if batch.len() as u64 > u64::from(config.max_message_bytes) {
                    return Err(Error::RecordTooLarge {
                        size: batch.len() as u64,
                        max: u64::from(config.max_message_bytes),
                        limit: crate::error::MAX_MESSAGE_BYTES,
                    });
                }
                return Ok(ProducedBatch::Whole(batch));
            }
        } else if create_time {
            self.check_timestamp_against(header.max_timestamp, log_time_ms)?;
        }
        if bytes.len() < STAMPED_BATCH_MIN_BYTES {
            let mut copy = take_batch_buffer();
            copy.extend_from_slice(bytes);
            return Ok(ProducedBatch::Whole(copy));
        }
        // The view checked that the batch has its header: only those 61 bytes are copied.
        let (Some(header), Some(records)) = (
            bytes.first_chunk::<RECORD_BATCH_OVERHEAD>(),
            bytes.get(RECORD_BATCH_OVERHEAD..),
        ) else {
            return Err(Error::InvalidBatch {
                what: crate::error::Corruption::Truncated {
                    needed: RECORD_BATCH_OVERHEAD as u64,
                    available: bytes.len() as u64,
                },
            });
        };
        Ok(ProducedBatch::Stamped {
            header: *header,
            records,
        })
    }

    /// Assigns offsets to a validated batch and appends it under the writer lock.
    ///
    /// `now` is the log's time for this append (rolling by age, LogAppendTime), read by the
    /// caller.
    fn append_built(&self, batch: &mut [u8], now: i64) -> Result<LogAppendInfo> {
        self.append_built_in_epoch(batch, now).map(|(info, _)| info)
    }

    /// [`append_built`](Self::append_built), with the truncation epoch read under the same
    /// hold of the writer lock as the append: no truncation can come between the two.
    fn append_built_in_epoch(
        &self,
        batch: &mut [u8],
        now: i64,
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        self.append_built_from(batch, &[], now, AppendOrigin::Client)
    }

    /// [`append_built_in_epoch`](Self::append_built_in_epoch) for a batch from `origin`: a
    /// batch with a producer id is checked against its producer's state after its offsets are
    /// assigned and before it is written (a re-sent one is answered with the original's
    /// offsets, writing nothing), and the state is updated once it is written
    /// (`transactions.rs`).
    ///
    /// The batch is `head` followed by `tail`: the header is stamped in `head` (at least its
    /// 61 bytes), and a large produced batch's records are written from the producer's own
    /// bytes (`tail`), never copied. A batch built or copied here comes whole, with `tail`
    /// empty.
    pub(in crate::log) fn append_built_from(
        &self,
        head: &mut [u8],
        tail: &[u8],
        now: i64,
        origin: AppendOrigin,
    ) -> Result<(LogAppendInfo, TruncationEpoch)> {
        let shared = self;
        let config = &shared.config;
        let size = head.len() + tail.len();
        if size as u64 > u64::from(config.max_message_bytes) {
            return Err(Error::RecordTooLarge {
                size: size as u64,
                max: u64::from(config.max_message_bytes),
                limit: crate::error::MAX_MESSAGE_BYTES,
            });
        }
        let log_append_time = (config.message_timestamp_type == TimestampType::LogAppendTime)
            .then(|| set_log_append_time_in_parts(head, tail, now).map(|()| now))
            .transpose()?;
        let mut writer = shared.lock_writer_for_append()?;
        self.check_writable()?;
        // A follower takes no client appends; a leader stamps its epoch, a bare log -1
        // (`replication.rs`).
        let leader_epoch = shared.replication.client_append_epoch(&shared.dir)?;
        let base_offset = writer.tail.log_end_offset();
        set_base_offset(head, base_offset)?;
        set_partition_leader_epoch(head, leader_epoch)?;
        let header = BatchHeader::parse(head).map_err(|what| Error::InvalidBatch { what })?;
        let last_offset = header.last_offset();
        // One branch for batches without a producer id.
        let producer_info = if header.producer_id >= 0 {
            let marker = if header.is_control() {
                // Control batches are built here, whole; joining the parts is for safety only.
                if tail.is_empty() {
                    transaction_marker(head)?
                } else {
                    transaction_marker(&[&*head, tail].concat())?
                }
            } else {
                None
            };
            match shared.check_producer(&writer, &header, marker, origin)? {
                ProducerAppendCheck::Duplicate {
                    first_offset,
                    last_offset,
                } => {
                    let epoch = shared.view.truncations().epoch();
                    let info = LogAppendInfo {
                        first_offset,
                        last_offset,
                        records: u32::try_from(header.records_count).unwrap_or(0),
                        max_timestamp: header.max_timestamp,
                        log_append_time: None,
                        bytes: 0,
                        duplicate: true,
                    };
                    return Ok((info, epoch));
                }
                ProducerAppendCheck::Append(info) => Some(info),
            }
        } else {
            None
        };
        // Kafka assigns the epoch before the write: an entry the write then fails to back
        // starts at or above the log end, and the next open drops it.
        shared.replication.assign_epoch(leader_epoch, base_offset)?;
        shared.write_and_publish(
            &mut writer,
            AppendBytes::pair(head, tail),
            last_offset,
            Some((header.max_timestamp, now)),
            producer_info,
            "append",
        )?;
        let epoch = shared.view.truncations().epoch();
        let records = u32::try_from(header.records_count).unwrap_or(0);
        shared.account_append(writer, records, size, last_offset)?;
        let info = LogAppendInfo {
            first_offset: base_offset,
            last_offset,
            records,
            max_timestamp: log_append_time.unwrap_or(header.max_timestamp),
            log_append_time,
            bytes: size,
            duplicate: false,
        };
        Ok((info, epoch))
    }

    /// The write at the heart of every append, under the writer mutex: `batch` (ending at
    /// `last_offset`) goes to the active segment, after a roll when `roll_if_due` (the batch's
    /// max timestamp and the log's time) makes the segment ask for one: Kafka's `shouldRoll`,
    /// then the write, under one hold of the segment's lock. A failed write that could not be
    /// undone poisons the log (`what` names the append). Then the producer state takes
    /// `producers`, before the log end moves past the batch: a `read_committed` reader must
    /// find a transaction's first offset unstable before it can find the transaction's data.
    pub(in crate::log) fn write_and_publish(
        &self,
        writer: &mut Writer,
        batch: AppendBytes<'_>,
        last_offset: i64,
        roll_if_due: Option<(i64, i64)>,
        producers: impl IntoIterator<Item = ProducerAppendInfo>,
        what: &str,
    ) -> Result<()> {
        let active = writer.tail.active();
        let appended = match roll_if_due {
            None => active.append_bytes(batch),
            Some((max_timestamp, now)) => {
                match active.append_bytes_unless_roll(batch, max_timestamp, last_offset, now) {
                    Ok(Ok(info)) => Ok(info),
                    Ok(Err(_reason)) => {
                        self.roll(writer, now)?;
                        writer.tail.active().append_bytes(batch)
                    }
                    Err(error) => Err(error),
                }
            }
        };
        if let Err(error) = appended {
            if writer.tail.active().append_is_broken() {
                log::error!(
                    "poisoning {}: a failed {what} could not be undone",
                    self.dir.display()
                );
                self.durability.poison();
            }
            return Err(error);
        }
        let next_offset = last_offset + 1;
        let committed = self.commit_producer(
            writer,
            producers,
            next_offset,
            self.high_watermark_at(next_offset),
        );
        writer.tail.set_log_end_offset(next_offset);
        self.view.advance_log_end(next_offset);
        committed
    }

    /// The writer lock for an append, once the sealed segments waiting for their fsync are
    /// fewer than [`MAX_UNSYNCED_SEALED`] (back-pressure on a writer that rolls faster than
    /// the disk syncs).
    pub(in crate::log) fn lock_writer_for_append(&self) -> Result<MutexGuard<'_, Writer>> {
        let shared = self;
        let mut writer = crate::sync::lock_spinning(&shared.writer, crate::log::WRITER_LOCK_SPIN);
        while writer.tail.unsynced_sealed().len() >= MAX_UNSYNCED_SEALED {
            // Back-pressure: rolls outran the flusher's fsyncs. Wait for one covering sync (it
            // drains the whole backlog) rather than let sealed segments and their descriptors
            // pile up.
            let end = writer.tail.log_end_offset();
            drop(writer);
            // Everything published may be durable already while segments stay listed (a
            // truncation during their sync keeps them there): a group commit would then have
            // nothing to do, so sync the sealed segments alone, or this would spin.
            let synced = if shared.durability.durable_offset() >= end {
                shared.sync_sealed_segments()
            } else {
                shared.sync_through(end - 1)
            };
            match synced {
                Ok(()) | Err(Error::Truncated { .. }) => {}
                Err(error) => return Err(error),
            }
            writer = shared.writer.lock();
        }
        shared.consume_clean_shutdown(&mut writer)?;
        Ok(writer)
    }

    /// The end of every append, under the writer lock it releases: the counters, then the
    /// flush policy's sync (outside the lock) when the append reaches it.
    pub(in crate::log) fn account_append(
        &self,
        mut writer: MutexGuard<'_, Writer>,
        records: u32,
        bytes: usize,
        last_offset: i64,
    ) -> Result<()> {
        let shared = self;
        let config = &shared.config;
        shared.counters.note_append(records, bytes);
        let sync_now = writer
            .points
            .count_append(config.flush_policy, records, bytes);
        // Under the lock the append held: no truncation came between the two.
        let epoch = shared.view.truncations().epoch();
        drop(writer);
        if sync_now {
            shared.wait_durable_since(last_offset, epoch)?;
        }
        Ok(())
    }
}

/// How many sealed segments may wait for their fsync before an append waits for one: the
/// flusher syncs them off the append path, but a writer that rolls faster than the disk syncs
/// must not hold an unbounded number of them (and their descriptors) open.
const MAX_UNSYNCED_SEALED: usize = 8;

fn check_timestamp(config: &LogConfig, timestamp: i64, now_ms: i64) -> Result<()> {
    // Kafka lets records without a timestamp (-1) through.
    if timestamp == -1 {
        return Ok(());
    }
    if timestamp < 0 {
        return Err(Error::InvalidTimestamp {
            timestamp,
            why: "timestamps must be -1 (none) or non-negative".into(),
        });
    }
    if now_ms.saturating_sub(timestamp) > config.message_timestamp_before_max_ms {
        return Err(Error::InvalidTimestamp {
            timestamp,
            why: format!(
                "it is more than message.timestamp.before.max.ms ({}) before the log's time {now_ms}; \
                 raise it with LogConfig::builder().message_timestamp_before_max_ms(..)",
                config.message_timestamp_before_max_ms
            ),
        });
    }
    if timestamp.saturating_sub(now_ms) > config.message_timestamp_after_max_ms {
        return Err(Error::InvalidTimestamp {
            timestamp,
            why: format!(
                "it is more than message.timestamp.after.max.ms ({}) after the log's time {now_ms}; \
                 raise it with LogConfig::builder().message_timestamp_after_max_ms(..)",
                config.message_timestamp_after_max_ms
            ),
        });
    }
    Ok(())
}

/// A producer's batch that passed Kafka's leader checks, ready for its offsets.
enum ProducedBatch<'a> {
    /// The batch as the producer sent it: a copy of its header, which the append stamps
    /// (offsets, epoch, and LogAppendTime with its CRC), and the producer's bytes after it,
    /// written as they are (one `pwritev`, no copy of the records).
    Stamped {
        header: [u8; RECORD_BATCH_OVERHEAD],
        records: &'a [u8],
    },
    /// The batch whole, in a buffer of the log's: rebuilt in the log's codec
    /// (`compression.type`), or copied, when it is smaller than [`STAMPED_BATCH_MIN_BYTES`].
    Whole(Vec<u8>),
}

/// The smallest produced batch written from the producer's own bytes beside a stamped header
/// ([`ProducedBatch::Stamped`]); a smaller one is copied whole and written with one `pwrite`.
/// The kernel's vectored write costs more than its plain one (an iovec array to import and
/// walk), and below about this size more than the copy it saves: a harness appending 1-record
/// batches took 1.8 → 2.2 µs a batch at 1 KiB with the vectored write, the same at 4 and
/// 8 KiB, and 59.5 → 52.4 µs at 100 KiB (2026-12-03, the two builds alternating).
const STAMPED_BATCH_MIN_BYTES: usize = 8 * 1024;

fn compacted_without_key() -> Error {
    Error::InvalidArgument {
        why: "a compacted log cannot accept a record without a key".into(),
    }
}

thread_local! {
    /// The buffer this thread's last append built its batch in, kept for its next append.
    static BATCH_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The largest batch buffer a thread keeps between appends: Kafka's default
/// `max.message.bytes` (1 MiB and 12 bytes) and a little room, so that batches up to the
/// default limit reuse it too, while a larger one (a raised limit) does not pin its memory in
/// every thread that made one.
const KEPT_BATCH_BUFFER_BYTES: usize = (1 << 20) + (64 << 10);

/// This thread's batch buffer (empty, with the capacity its last append left).
fn take_batch_buffer() -> Vec<u8> {
    let mut buffer = BATCH_BUFFER.take();
    buffer.clear();
    buffer
}

/// Keeps `buffer` for this thread's next append, if it is not too large.
fn give_back_batch_buffer(buffer: Vec<u8>) {
    if buffer.capacity() <= KEPT_BATCH_BUFFER_BYTES {
        BATCH_BUFFER.set(buffer);
    }
}

/// The type and value of a control batch's marker record, `None` when the batch holds none (a
/// control batch the cleaner emptied). A control record that is no COMMIT or ABORT comes back
/// too: the producer state refuses it.
pub(in crate::log) fn transaction_marker(
    batch: &[u8],
) -> Result<Option<(ControlRecordType, EndTransactionMarker)>> {
    let view = BatchView::new(batch).map_err(|what| Error::InvalidBatch { what })?;
    let mut scratch = Vec::new();
    let Some(record) = view.records(&mut scratch)?.next() else {
        return Ok(None);
    };
    let record = record?;
    let kind = control_record_type(&record)?;
    let marker = if kind.is_transaction_marker() {
        EndTransactionMarker::parse(&record)?
    } else {
        EndTransactionMarker {
            coordinator_epoch: -1,
        }
    };
    Ok(Some((kind, marker)))
}
