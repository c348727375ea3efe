//! The batching writer: Kafka's producer path (`RecordAccumulator` and `Sender`), embedded.
//!
//! A [`Producer`] writes to one [`Log`]. [`send`](Producer::send) encodes a record into the open
//! batch of an in-memory accumulator and returns at once with a [`SendHandle`]. A batch is sealed
//! when the next record would take it past `batch.size`, or `linger.ms` after its first record;
//! the sender (`sender.rs`) then compresses it with the log's codec and appends it through the
//! log's normal append path, one batch per append, in the order the batches opened. The handle
//! resolves to the record's offset when the producer's [`Acks`] say the record is done.
//!
//! Threads (`runner.rs`): the sender is a named thread (`partlog-sender:<dir>`), or, when the
//! log was opened with [`Workers`](crate::Workers), a task of that pool. It exists while the
//! producer does; [`close`](Producer::close), or the drop of the producer, drains the
//! accumulator, then joins the thread or cancels the task. Under `acks=all` the fsyncs are the
//! log's group commit, led by the log's flusher, so the sender appends the next batch while the
//! previous one syncs.

mod accumulator;
mod config;
mod handle;
mod modes;
mod runner;
mod sender;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::format::{BatchBuilder, Compression, NewRecord, RecordShape};
use crate::log::Log;

use accumulator::{
    Accumulator, BATCH_HEADER_BYTES, Unconfirmed, max_uncompressed_batch, record_shape,
};
use handle::{BatchSlot, SlotIssuer};
use runner::{SenderRunner, SenderWake};

pub use config::{Acks, ProducerConfig, ProducerConfigBuilder, ProducerMode};
pub use handle::SendHandle;
pub use modes::HeldBatchHook;

/// What the producer's callers and its sender thread share.
#[derive(Debug)]
pub(crate) struct Inner {
    log: Arc<Log>,
    config: ProducerConfig,
    /// The codec of every batch: the log's `compression.type` (`producer` means none).
    codec: Compression,
    /// The size at which a batch is sealed: `batch.size`, or less if `max.message.bytes` (with
    /// the codec's worst-case framing) is lower.
    batch_limit: usize,
    /// The largest uncompressed batch that stays within `max.message.bytes` once built.
    max_batch: usize,
    accumulator: Mutex<Accumulator>,
    /// Wakes the sender: a batch sealed or opened, memory wanted, closing.
    sender_wake: SenderWake,
    /// Wakes `send` calls waiting for memory and `flush` / `close` waiting for batches.
    progress: Condvar,
}

/// What a [`Producer`] has done so far ([`Producer::stats`]): running totals since it was
/// created, and the state of its `buffer.memory` now. Kafka's producer metric each field
/// matches is named in its docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerStats {
    /// Records `send` accepted (`record-send-total`).
    pub records_sent: u64,
    /// Records in batches appended to the log.
    pub records_appended: u64,
    /// Batches appended to the log (`batch-size-avg` is `bytes_appended / batches_appended`).
    pub batches_appended: u64,
    /// Bytes of the appended batches, after compression (`byte-total`).
    pub bytes_appended: u64,
    /// Records in batches the log refused or failed to store (`record-error-total`).
    pub records_failed: u64,
    /// Batches the log refused or failed to store.
    pub batches_failed: u64,
    /// Batches of an idempotent or transactional producer that the log answered as re-sends of
    /// batches it holds: it wrote nothing, and their records' handles resolve to the original
    /// offsets. They count neither as appended nor as failed.
    pub duplicate_batches: u64,
    /// `buffer.memory` bytes held by queued records now.
    pub buffer_used_bytes: u64,
    /// `buffer.memory` bytes free now (`buffer-available-bytes`).
    pub buffer_available_bytes: u64,
    /// `send` calls blocked on `buffer.memory` now (`waiting-threads`).
    pub waiting_sends: usize,
    /// `send` calls that had to wait for `buffer.memory` and then got it.
    pub blocked_sends: u64,
    /// Time those calls spent waiting (`bufferpool-wait-time-ns-total`).
    pub blocked_time: Duration,
}

/// A batching writer for one [`Log`]: Kafka's producer path (`RecordAccumulator` and `Sender`),
/// embedded. [`send`](Self::send) queues one record and returns a [`SendHandle`]; a background
/// sender appends whole batches, sealed at `batch.size` or after `linger.ms`
/// ([`ProducerConfig`]).
///
/// The sender is a thread of its own, unless the log was opened with
/// [`Workers`](crate::Workers) ([`LogConfigBuilder::workers`](crate::LogConfigBuilder::workers)):
/// then it is a task of that pool, in its sync lane (its appends are what callers wait for),
/// woken by `send`, `flush`, `close` and the linger, and appending at most a few batches a run
/// so that a busy producer starves no other. 1,000 producers on pooled logs start no thread.
/// Do not wait on a pooled producer (`flush`, `close`, `commit`, a handle) from a task of its
/// own pool: with every pool thread so waiting, the sender could not run.
///
/// `Producer` is `Send + Sync`: share it between threads with an `Arc`. Records sent from one
/// thread are appended in the order they were sent; records from several threads in the order
/// their `send` calls took the accumulator.
///
/// ```
/// use std::sync::Arc;
/// use partlog::{Acks, Log, LogConfig, NewRecord, Producer, ProducerConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
/// let producer = Producer::new(Arc::clone(&log), ProducerConfig::builder().acks(Acks::All).build()?)?;
/// let handles = (0..100)
///     .map(|i| producer.send(&NewRecord::new(1_700_000_000_000, None, Some(format!("event {i}").as_bytes()))))
///     .collect::<Result<Vec<_>, _>>()?;
/// for (i, handle) in handles.into_iter().enumerate() {
///     let offset = handle.wait()?; // appended and fsynced (acks=all)
///     assert_eq!(offset, i as i64);
///     assert!(log.durable_offset() > offset);
/// }
/// producer.close()?;
/// # Ok(())
/// # }
/// ```
///
/// Records can also come from borrowed parts, copied once, straight into the batch
/// ([`send_parts`](Self::send_parts)), and a handle can be awaited instead of waited on: any
/// executor, no tokio needed.
///
/// ```
/// # use std::sync::Arc;
/// # use partlog::{Log, LogConfig, Producer, ProducerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
/// let producer = Producer::new(Arc::clone(&log), ProducerConfig::builder().linger_ms(5).build()?)?;
/// let handle = producer.send_parts(
///     1_700_000_000_000,
///     Some(b"user-8"),
///     Some(b"logged in"),
///     &[("trace", Some(&b"42"[..]))],
/// )?;
/// producer.flush()?; // everything sent so far is stored (durable under acks=all)
/// assert_eq!(handle.wait()?, 0);
/// producer.close()?; // drains, then stops the sender; drop does the same
/// # Ok(())
/// # }
/// ```
///
/// # How a batch forms
///
/// `send` checks the record as [`Log::append`] does (timestamp bounds, a key in a compacted log)
/// and encodes it straight into the open batch. The batch is sealed when the next record would
/// take it past `batch.size` (its header plus encoded records, before compression), or
/// `linger.ms` after its first record (on the log's clock), or by [`flush`](Self::flush) /
/// [`close`](Self::close), or at once while a `send` waits for memory. The sender
/// compresses it with the log's codec (`compression.type`; `producer` means none) and appends it
/// through the log's normal append path: one batch per append, in the order the batches opened,
/// so records sent from one thread keep their order. A batch never exceeds `max.message.bytes`,
/// even after compression; a record whose batch alone would is refused by `send` with
/// [`Error::RecordTooLarge`].
///
/// # What "done" means: `acks`
///
/// | `acks` | the handle resolves when | to | survives a process crash | survives a machine crash |
/// | --- | --- | --- | --- | --- |
/// | `0` | the record is queued in the accumulator | -1 (the offset is not known yet, as in Kafka) | no | no |
/// | `1` | its batch is appended: in the file and visible to readers | the record's offset | yes | only once `durable_offset()` passes it |
/// | `all` (default, as in Kafka 3+) | its batch is fsynced, through the log's group commit | the record's offset | yes | yes |
///
/// Under `acks=all` the fsyncs run on the log's flusher, so the sender appends the next
/// batch while the previous one syncs, and one fsync covers every batch appended before it began.
///
/// # Settings
///
/// [`ProducerConfig`] uses Kafka's names and Kafka 4's defaults; an invalid value is
/// [`Error::InvalidConfig`] naming the setting.
///
/// | setting | default | meaning |
/// | --- | --- | --- |
/// | `batch.size` | 16384 | bytes at which a batch is sealed; 0 puts each record in its own batch; at most `i32::MAX` |
/// | `linger.ms` | 5 | how long a batch that is not full waits for more records (Kafka 4 raised it from 0, KIP-1030) |
/// | `buffer.memory` | 33554432 (32 MiB) | encoded record bytes queued and not yet appended; at least 1 |
/// | `max.block.ms` | 60000 | how long `send` waits for `buffer.memory` before [`Error::BufferExhausted`]; 0 fails at once. Blocked sends are served in arrival order, as Kafka's `BufferPool` serves them, so small records cannot starve a large one |
/// | `acks` | `all` | `0`, `1`, `all` (or `-1`); `"all".parse::<Acks>()` reads Kafka's spellings |
/// | `enable.idempotence`, `transactional.id` | plain | [`ProducerMode`]: plain, idempotent or transactional, with the producer id and epoch the caller gives |
///
/// # Errors are never dropped
///
/// A batch that fails (the log was closed or poisoned, an I/O error) fails every record in it:
/// each handle gets the error. [`flush`](Self::flush) and [`close`](Self::close) return the first
/// failure no earlier call reported, so under `acks=0`, where handles resolve before the append,
/// failures still surface. `close` appends everything accepted before it; later `send`s, and
/// those blocked for memory, get [`Error::Closed`].
///
/// # Idempotent and transactional modes
///
/// [`ProducerConfig::idempotent`] stamps every batch with a producer id, its epoch and the
/// sequence of its first record, as Kafka's idempotent producer does; the sequence continues
/// from the one the log holds for that id and epoch, also after a reopen. The log refuses a
/// gap ([`Error::OutOfOrderSequence`]) and an older epoch ([`Error::InvalidProducerEpoch`]),
/// and answers a batch it holds already (one of the producer's last five, sent again) with the
/// original offsets: the records' handles resolve to those. The ids are the caller's, as a
/// broker's `InitProducerId` would hand them out: one writer per id at a time, and a higher
/// epoch to take over from one that may still run.
///
/// ```
/// use std::sync::Arc;
/// use partlog::{Acks, Log, LogConfig, NewRecord, Producer, ProducerConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
/// let config = ProducerConfig::idempotent(7, 0).acks(Acks::All).build()?;
/// let producer = Producer::new(Arc::clone(&log), config)?;
/// for i in 0..10 {
///     let _ = producer.send(&NewRecord::now(None, Some(format!("{i}").as_bytes())))?;
/// }
/// producer.close()?;
/// assert_eq!(log.producer_state(7).unwrap().last_sequence, 9);
///
/// // Reopened, the same id and epoch go on from sequence 10 (the log forgets a producer idle
/// // for producer.id.expiration.ms, a day, by its records' timestamps: hence `now`).
/// drop((producer, log));
/// let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
/// let producer = Producer::new(Arc::clone(&log), ProducerConfig::idempotent(7, 0).build()?)?;
/// assert_eq!(producer.send(&NewRecord::now(None, Some(b"10")))?.wait()?, 10);
/// assert_eq!(log.producer_state(7).unwrap().last_sequence, 10);
/// # Ok(())
/// # }
/// ```
///
/// [`ProducerConfig::transactional`] adds Kafka's transactions on this one log:
/// [`begin`](Self::begin), then `send`s, then [`commit`](Self::commit) or
/// [`abort`](Self::abort), which seal the open batch, wait until every batch of the
/// transaction is appended, and append the COMMIT or ABORT marker after them (done as `acks`
/// says: under `all`, durable). A `read_committed` reader ([`Log::committed_records`]) sees the
/// records once the COMMIT marker is written, and never those of an aborted transaction. A send
/// outside a transaction is refused with [`Error::InvalidTxnState`].
///
/// ```
/// use std::sync::Arc;
/// use partlog::{Error, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let log = Arc::new(Log::open(dir.path(), LogConfig::default())?);
/// let producer = Producer::new(Arc::clone(&log), ProducerConfig::transactional(42, 0).build()?)?;
/// let record = |v: &str| NewRecord::new(1_700_000_000_000, None, Some(v.as_bytes()));
/// assert!(matches!(producer.send(&record("outside")), Err(Error::InvalidTxnState { .. })));
///
/// producer.begin()?;
/// let _ = producer.send(&record("debit 10"))?;
/// let _ = producer.send(&record("credit 10"))?;
/// producer.commit()?; // both records, then the COMMIT marker, fsynced (acks=all)
///
/// producer.begin()?;
/// let _ = producer.send(&record("debit 99"))?;
/// producer.abort()?; // in the log, never seen by read_committed readers
///
/// let committed: Vec<Vec<u8>> = log
///     .committed_records(0, ReadBound::LogEnd)
///     .map(|r| r.map(|r| r.value.unwrap_or_default()))
///     .collect::<Result<_, _>>()?;
/// assert_eq!(committed, [b"debit 10".to_vec(), b"credit 10".to_vec()]);
/// # Ok(())
/// # }
/// ```
///
/// What ends a session, as in Kafka: an error that a new epoch would be needed to recover from
/// (fenced by a higher epoch, a gap in the sequence, a batch that does not fit the producer's
/// transaction state) is fatal. The batches queued behind it fail with it unappended, and every
/// later `send`, `begin`, `commit` and `abort` fails with it at once; bumping the epoch (a new
/// `Producer`) is the caller's. Any other failure of a batch of a transaction (an I/O error)
/// makes the transaction abortable only: `send` and `commit` refuse, `abort` ends it. A batch
/// the log refused leaves no gap in the sequence: the next batch takes its sequence.
///
/// A transaction is not ended by [`close`](Self::close) or the drop of the producer, as
/// Kafka's `close` leaves it to the coordinator: the log holds it open, and readers
/// `read_committed` wait at its first offset, until a marker ends it. A later producer with the
/// same id and epoch resumes it ([`in_transaction`](Self::in_transaction) says so) to commit or
/// abort it; one with a higher epoch aborts it when it starts, as Kafka's `InitProducerId`
/// does; [`Log::append_marker`] ends it too.
///
/// # Statistics
///
/// [`stats`](Self::stats) returns a [`ProducerStats`] with Kafka's producer metrics: records
/// sent, appended and failed, batches and bytes appended, `buffer.memory` used and free, sends
/// waiting for memory now, and how many sends waited and for how long in all.
///
/// # Futures without a runtime
///
/// [`SendHandle`] implements `Future`, and the log's waits have future forms:
/// [`Log::durable`] (of [`Log::wait_durable`]: the flusher thread leads the group commit for it,
/// so polling never blocks) and [`Log::data_available`] (of [`Log::wait_for_data`], with no
/// timeout: combine it with your runtime's). They register the task's `Waker` on the same waiter
/// lists the blocking calls use.
///
/// # Speed
///
/// In the repository, `cargo bench --bench producer` (criterion) and the batching-writer row of
/// `cargo bench --bench compare` measure it, and `cargo run --release --example producer` sends
/// 100,000 records from four threads at `acks=all` and prints the batches the log got.
#[derive(Debug)]
pub struct Producer {
    inner: Arc<Inner>,
    sender: Mutex<Option<SenderRunner>>,
}

impl Producer {
    /// Starts a batching writer for `log`, with its sender: a thread, or a task of the log's
    /// [`Workers`](crate::Workers) pool if it was opened with one.
    ///
    /// An idempotent or transactional producer starts from the log's producer state for its
    /// id: its sequence continues the one the log holds for the id at this epoch (from 0 for a
    /// new id or epoch). A transaction the log holds open for the id at this epoch is resumed
    /// (see [`in_transaction`](Self::in_transaction)); a transactional producer of a higher
    /// epoch aborts one of an older epoch first (an ABORT marker at its epoch, which fences the
    /// older writer), as Kafka's `InitProducerId` does.
    ///
    /// Fails with [`Error::InvalidConfig`] for an invalid `config`, with the log's error if it is
    /// closed, read-only ([`Error::Unsupported`]) or poisoned, and with [`Error::Io`] if the
    /// thread cannot be spawned. In the idempotent and transactional modes, with
    /// [`Error::InvalidProducerEpoch`] if the log holds a higher epoch for the id (this producer
    /// is fenced), and for an idempotent producer with [`Error::InvalidTxnState`] if the log
    /// holds a transaction of the id open (end it first: [`Log::append_marker`]).
    pub fn new(log: Arc<Log>, config: ProducerConfig) -> Result<Producer> {
        config.validate()?;
        log.writable()?;
        let mode = modes::ModeState::start(&log, config.mode, config.acks)?;
        let codec = log.records_codec();
        let max_batch = max_uncompressed_batch(codec, log.config().max_message_bytes);
        let batch_limit = usize::try_from(config.batch_size)
            .unwrap_or(usize::MAX)
            .min(max_batch);
        let pooled = log.config().workers.is_some();
        let mut accumulator = Accumulator::new();
        accumulator.mode = mode;
        let inner = Arc::new(Inner {
            log,
            config,
            codec,
            batch_limit,
            max_batch,
            accumulator: Mutex::new(accumulator),
            sender_wake: SenderWake::for_pool(pooled),
            progress: Condvar::new(),
        });
        let sender = SenderRunner::start(&inner)?;
        Ok(Producer {
            inner,
            sender: Mutex::new(Some(sender)),
        })
    }

    /// The log this producer writes to.
    pub fn log(&self) -> &Arc<Log> {
        &self.inner.log
    }

    /// The producer's settings.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

    /// What the producer has done so far, as Kafka's producer metrics count it (names in
    /// [`ProducerStats`]'s field docs).
    pub fn stats(&self) -> ProducerStats {
        let acc = self.inner.accumulator.lock();
        ProducerStats {
            buffer_used_bytes: acc.used_memory,
            buffer_available_bytes: self
                .inner
                .config
                .buffer_memory
                .saturating_sub(acc.used_memory),
            waiting_sends: acc.memory_queue.waiting_count(),
            ..acc.counters
        }
    }

    /// Queues `record` in the open batch and returns at once with a handle that resolves to its
    /// offset (see [`Acks`] for when). The record's bytes are copied: `record` may be reused.
    ///
    /// Checks the record as [`Log::append`] does, at once: [`Error::InvalidTimestamp`], and
    /// [`Error::InvalidArgument`] for a record without a key in a compacted log. Fails with
    /// [`Error::RecordTooLarge`] for a record whose batch alone would exceed the log's
    /// `max.message.bytes` (with the codec's worst-case framing), or that is larger than
    /// `buffer.memory`; with [`Error::Closed`] after [`close`](Self::close) or once the log is
    /// closed, and [`Error::Poisoned`] once it is poisoned.
    ///
    /// Blocks only when `buffer.memory` is full: then up to `max.block.ms`, after which it fails
    /// with [`Error::BufferExhausted`] and the record is not queued.
    ///
    /// A transactional producer refuses a record outside a transaction, or in one a failed
    /// batch made abortable only, with [`Error::InvalidTxnState`]; an idempotent or
    /// transactional producer that met a fatal error fails with that error (see "Idempotent and
    /// transactional modes" above).
    pub fn send(&self, record: &NewRecord) -> Result<SendHandle> {
        self.enqueue(
            record.timestamp,
            record.key.is_some(),
            || record_shape(record),
            |builder, shape| builder.push_shaped_record(shape, record),
        )
    }

    /// [`send`](Self::send) for a record given as borrowed parts, as
    /// [`BatchBuilder::push_parts`](crate::BatchBuilder::push_parts) takes them: no
    /// [`NewRecord`] to build, the bytes are copied once, into the batch. Header keys may be
    /// `&str`, `String` or `&[u8]`.
    pub fn send_parts<K: AsRef<[u8]>>(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(K, Option<&[u8]>)],
    ) -> Result<SendHandle> {
        self.enqueue(
            timestamp,
            key.is_some(),
            || RecordShape::measure(key, value, headers.iter().map(|(k, v)| (k.as_ref(), *v))),
            |builder, shape| builder.push_shaped(shape, timestamp, key, value, headers),
        )
    }

    /// The body of `send`: checks, waits for memory, and pushes the record with `push`.
    fn enqueue(
        &self,
        timestamp: i64,
        has_key: bool,
        measure: impl FnOnce() -> Result<RecordShape>,
        push: impl FnOnce(&mut BatchBuilder, &RecordShape),
    ) -> Result<SendHandle> {
        let inner = &*self.inner;
        inner.log.writable()?;
        inner.log.check_record_at_send(timestamp, has_key)?;
        let shape = measure()?;
        let estimate = shape.size_upper_bound()?;
        let alone = BATCH_HEADER_BYTES.saturating_add(estimate);
        if alone > inner.max_batch {
            return Err(Error::RecordTooLarge {
                size: alone as u64,
                max: u64::from(inner.log.config().max_message_bytes),
                limit: crate::error::MAX_MESSAGE_BYTES,
            });
        }
        let reserve = estimate as u64;
        let buffer_memory = inner.config.buffer_memory;
        if reserve > buffer_memory {
            return Err(Error::RecordTooLarge {
                size: reserve,
                max: buffer_memory,
                limit: crate::error::BUFFER_MEMORY,
            });
        }

        let mut acc = inner.accumulator.lock();
        let mut deadline = None;
        // Set once this send waits: its place in the queue for memory (first come, first
        // served; see `MemoryQueue`), and since when.
        let mut ticket = None;
        let mut blocked_since: Option<Instant> = None;
        loop {
            let refused = if acc.closing {
                Some(Error::Closed)
            } else {
                acc.mode.check_send(&inner.config.mode).err()
            };
            if let Some(error) = refused {
                if let Some(ticket) = ticket {
                    acc.memory_queue.leave(ticket);
                    // The next in line may be able to go now.
                    inner.progress.notify_all();
                }
                return Err(error);
            }
            let fits = acc.used_memory.saturating_add(reserve) <= buffer_memory;
            if fits && acc.memory_queue.may_take(ticket) {
                break;
            }
            let deadline = *deadline.get_or_insert_with(|| {
                Instant::now().checked_add(Duration::from_millis(inner.config.max_block_ms))
            });
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                if let Some(ticket) = ticket {
                    acc.memory_queue.leave(ticket);
                    // The next in line may be able to go now.
                    inner.progress.notify_all();
                }
                return Err(Error::BufferExhausted {
                    buffer_memory,
                    max_block_ms: inner.config.max_block_ms,
                });
            }
            if ticket.is_none() {
                ticket = Some(acc.memory_queue.join());
                blocked_since = Some(Instant::now());
            }
            // The sender seals lingering batches while anyone waits here, to free memory sooner.
            inner.sender_wake.wake();
            match deadline {
                Some(deadline) => {
                    inner.progress.wait_until(&mut acc, deadline);
                }
                None => inner.progress.wait(&mut acc),
            }
        }
        if let Some(ticket) = ticket {
            acc.memory_queue.leave(ticket);
            // What is left may fit the next in line too.
            inner.progress.notify_all();
        }
        if let Some(blocked_since) = blocked_since {
            acc.counters.blocked_sends += 1;
            acc.counters.blocked_time += blocked_since.elapsed();
        }
        acc.used_memory += reserve;

        let fits = acc.open.as_ref().is_none_or(|open| {
            open.builder.is_empty()
                || open.builder.uncompressed_size() + estimate <= inner.batch_limit
        });
        let mut wake_sender = false;
        if !fits {
            wake_sender |= acc.seal_open();
        }
        let open = match &mut acc.open {
            Some(open) => open,
            None => {
                wake_sender = true;
                let durable_log = (inner.config.acks == Acks::All).then(|| Arc::clone(&inner.log));
                let capacity = inner.batch_limit.max(estimate);
                // linger.ms counts from the batch's first record: the precise clock, once a
                // batch, read after any wait for memory.
                let opened_ms = inner.log.clock().now_ms();
                acc.open_batch(
                    inner.codec,
                    capacity,
                    SlotIssuer::new(BatchSlot::new(durable_log)),
                    opened_ms,
                )
            }
        };
        let before = open.builder.uncompressed_size();
        push(&mut open.builder, &shape);
        let encoded = (open.builder.uncompressed_size() - before) as u64;
        open.reserved += encoded;
        let index = open.builder.record_count() as i64 - 1;
        // Under acks=0 the handle is done already and needs no share of the batch's outcome.
        let slot = (inner.config.acks != Acks::Zero).then(|| open.slot.issue());
        let full = open.builder.uncompressed_size() >= inner.batch_limit;
        // Give back what the upper bound over-reserved.
        acc.used_memory -= reserve.saturating_sub(encoded);
        if full {
            wake_sender |= acc.seal_open();
        }
        acc.counters.records_sent += 1;
        drop(acc);
        if wake_sender {
            inner.sender_wake.wake();
        }
        Ok(match slot {
            None => SendHandle::done(Ok(-1)),
            Some(slot) => SendHandle::queued(slot, index),
        })
    }

    /// The first half of [`flush`](Self::flush), without the wait: seals the open batch so that
    /// the sender appends it now, whatever `linger.ms` says (under `acks=all` the sender asks
    /// the log's flusher for a sync after each append). A caller flushing many producers
    /// requests every flush first, then waits on each: their appends and syncs overlap.
    pub fn request_flush(&self) {
        let inner = &*self.inner;
        if inner.accumulator.lock().seal_open() {
            inner.sender_wake.wake();
        }
    }

    /// Seals the open batch and blocks until every record sent before this call is done as
    /// [`Acks`] `1` defines it (appended), and under `acks=all` also durable. Records sent
    /// meanwhile by other threads may or may not be covered.
    ///
    /// Returns the first batch failure that no earlier `flush` or `close` reported (every record
    /// of a failed batch also gets the error through its handle, except under `acks=0`), or the
    /// error of the final durability wait: under `acks=all`, [`Error::Truncated`] if a
    /// truncation took a record appended since the last `flush` that confirmed its records (its
    /// handle says so too; a truncation that cut above every such record changes nothing). `Ok`
    /// means every record sent before the call is stored.
    pub fn flush(&self) -> Result<()> {
        let inner = &*self.inner;
        let mut acc = inner.accumulator.lock();
        if acc.seal_open() {
            inner.sender_wake.wake();
        }
        let target = acc.next_seq;
        while acc.completed_seq < target && !acc.sender_exited {
            inner.progress.wait(&mut acc);
        }
        let error = acc.unreported_error.take();
        let unconfirmed = acc.unconfirmed;
        drop(acc);
        self.finish(error, unconfirmed)
    }

    /// Stops accepting records, appends every record accepted before (nothing accepted is
    /// dropped), waits as [`flush`](Self::flush) does, and joins the sender thread (or cancels its
    /// pool task: it never runs again). Later
    /// [`send`](Self::send) calls, and those blocked for memory, fail with [`Error::Closed`].
    /// Returns what `flush` would; a second call returns `Ok(())` once the first has drained.
    ///
    /// Dropping the producer closes it, logging any error. Neither ends an open transaction:
    /// see "Idempotent and transactional modes" above.
    pub fn close(&self) -> Result<()> {
        let (error, unconfirmed) = self.close_and_drain();
        self.finish(error, unconfirmed)
    }

    /// [`close`](Self::close), but returns once every accepted batch is appended, without the
    /// `acks=all` wait for durability: for a caller that then waits for many logs at once
    /// ([`Log::durable`], [`Log::wait_durable`]), as a transaction's commit does. The sender
    /// still asked the log's flusher for a sync after each append under `acks=all`, and the
    /// records' handles still resolve once durable.
    ///
    /// Returns the first batch failure no earlier `flush` or `close` reported.
    pub fn close_appended(&self) -> Result<()> {
        let (error, _) = self.close_and_drain();
        error.map_or(Ok(()), Err)
    }

    /// The body of `close` and `close_appended`: stops accepting records, waits until the
    /// sender has appended every accepted batch and exited, and stops it.
    fn close_and_drain(&self) -> (Option<Error>, Option<Unconfirmed>) {
        let inner = &*self.inner;
        {
            let mut acc = inner.accumulator.lock();
            acc.closing = true;
            acc.seal_open();
        }
        inner.sender_wake.wake();
        inner.progress.notify_all();
        let mut acc = inner.accumulator.lock();
        while !acc.sender_exited {
            inner.progress.wait(&mut acc);
        }
        let error = acc.unreported_error.take();
        let unconfirmed = acc.unconfirmed;
        drop(acc);
        // Drained: the thread ends, the task has left the pool (the cancel waits for the
        // pool's last reference to it, so nothing runs after `close`).
        if let Some(sender) = self.sender.lock().take() {
            sender.stop(inner);
        }
        (error, unconfirmed)
    }

    /// The end of `flush` and `close`: report a failure, or under `acks=all` wait until the
    /// batches appended and not yet confirmed are durable, and fail with [`Error::Truncated`]
    /// if a truncation since their append took any of them (their handles say the same).
    fn finish(&self, error: Option<Error>, unconfirmed: Option<Unconfirmed>) -> Result<()> {
        if let Some(error) = error {
            return Err(error);
        }
        let Some(unconfirmed) = unconfirmed.filter(|_| self.inner.config.acks == Acks::All) else {
            return Ok(());
        };
        let result = self
            .inner
            .log
            .wait_durable_since_append(unconfirmed.last_offset, unconfirmed.epoch);
        if !matches!(result, Err(Error::Closed | Error::Poisoned)) {
            // Confirmed, or the loss reported: later calls answer for what comes after.
            let mut acc = self.inner.accumulator.lock();
            if acc.unconfirmed == Some(unconfirmed) {
                acc.unconfirmed = None;
            }
        }
        result
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            log::warn!(
                "closing the batching writer of {} on drop: {error}",
                self.inner.log.dir().display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogConfig;

    /// How many sends wait for memory.
    fn waiting(producer: &Producer) -> usize {
        producer
            .inner
            .accumulator
            .lock()
            .memory_queue
            .waiting_count()
    }

    fn wait_for_waiting(producer: &Producer, count: usize) {
        while waiting(producer) < count {
            crate::sync::thread::yield_now();
        }
    }

    /// A large record that waits for `buffer.memory` goes before a small one that came after
    /// it, even when the small one would fit first (Kafka's `BufferPool` is first come, first
    /// served): small sends must not starve it.
    #[test]
    fn sends_blocked_on_buffer_memory_are_served_in_arrival_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(dir.path(), LogConfig::default()).unwrap());
        let config = ProducerConfig::builder()
            .buffer_memory(4096)
            .linger_ms(60_000)
            .max_block_ms(60_000)
            .acks(Acks::One)
            .build()
            .unwrap();
        let producer = Arc::new(Producer::new(Arc::clone(&log), config).unwrap());
        // The buffer looks full, with nothing the sender could append to free it.
        producer.inner.accumulator.lock().used_memory = 4096;
        let send = |size: usize| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || {
                let value = vec![b'v'; size];
                producer.send(&NewRecord::new(0, None, Some(&value)))
            })
        };
        let large = send(3000);
        wait_for_waiting(&producer, 1);
        let small = send(10);
        wait_for_waiting(&producer, 2);
        // Room for the small record but not the large one: the small one must keep waiting.
        producer.inner.accumulator.lock().used_memory = 4096 - 200;
        producer.inner.progress.notify_all();
        crate::sync::thread::sleep(Duration::from_millis(50));
        assert!(
            !small.is_finished(),
            "the small send went before the large one that waited first"
        );
        assert_eq!(waiting(&producer), 2);
        producer.inner.accumulator.lock().used_memory = 0;
        producer.inner.progress.notify_all();
        let large = large.join().unwrap().unwrap();
        let small = small.join().unwrap().unwrap();
        // Their batch lingers (linger.ms is a minute): a flush appends it.
        producer.flush().unwrap();
        let large_offset = large.wait().unwrap();
        let small_offset = small.wait().unwrap();
        assert!(large_offset < small_offset, "{large_offset} {small_offset}");
        assert_eq!(waiting(&producer), 0);
        producer.close().unwrap();
    }
}
