//! Kafka's default partitioner, bit for bit with the Java client (`KafkaProducer.partition` and
//! `BuiltInPartitioner`, KIP-794).
//!
//! - A record with a partition goes there. Else a custom [`Partitioner`] decides, if there is
//!   one. Else a record with a key goes to `to_positive(murmur2(key)) % partitions`
//!   ([`partition_for_key`]), unless `partitioner.ignore.keys` is set. Else (no key) the topic's
//!   [`BuiltInPartitioner`] picks a sticky partition ([`partition_record`] returns `None`).
//! - [`murmur2`] is Kafka's `Utils.murmur2`: MurmurHash2, 32 bits, seed `0x9747b28c`, words read
//!   little-endian, wrapping arithmetic. [`to_positive`] masks the sign bit (`x & 0x7fffffff`), it
//!   is not `abs`. Every partition of the topic counts, available or not, and an empty key is a
//!   key like any other.
//! - The sticky partitioner sends records without a key to one partition until
//!   `batch.size` bytes have gone there and that partition's queue holds only full batches, or
//!   unconditionally once `2 × batch.size` have; then it draws the next partition from a random
//!   `i32` ([`RandomSource`], injectable so that tests replay Kafka's), uniformly over the
//!   available partitions or, with queue sizes ([`BuiltInPartitioner::update_partition_load_stats`],
//!   `partitioner.adaptive.partitioning.enable`), weighted towards the shorter queues.
//!   [`BuiltInPartitioner::append`] is `RecordAccumulator.append`'s protocol around it.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use partlog::Error;

/// Kafka's `Utils.murmur2`: the 32-bit MurmurHash2 of `data` with seed `0x9747b28c`.
///
/// ```
/// assert_eq!(partlog_engine::partitioner::murmur2(b"21"), -973_932_308);
/// ```
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java's `seed ^ length` on ints: a key longer than i32::MAX bytes cannot reach Java, and
    // the truncation here is the one Java's int conversion would make.
    let mut h = SEED ^ (data.len() as u32);
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    // Java's switch falls through from case 3 to case 1, then multiplies once.
    if let Some(&byte) = tail.get(2) {
        h ^= u32::from(byte) << 16;
    }
    if let Some(&byte) = tail.get(1) {
        h ^= u32::from(byte) << 8;
    }
    if let Some(&byte) = tail.first() {
        h ^= u32::from(byte);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: `x & 0x7fffffff`. Not `abs`: `i32::MIN` maps to 0 and `-1` to
/// `i32::MAX`.
pub fn to_positive(x: i32) -> i32 {
    x & 0x7fff_ffff
}

/// Kafka's `BuiltInPartitioner.partitionForKey`: `to_positive(murmur2(key)) % num_partitions`,
/// over all the topic's partitions.
///
/// # Errors
/// `InvalidArgument` when `num_partitions` is not positive.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> Result<i32, Error> {
    if num_partitions <= 0 {
        return Err(Error::InvalidArgument {
            why: format!("a topic has at least one partition, not {num_partitions}"),
        });
    }
    Ok(to_positive(murmur2(key)) % num_partitions)
}

/// A custom partitioner: Kafka's `org.apache.kafka.clients.producer.Partitioner`
/// (`partitioner.class`). It sees every record that names no partition, keyed or not.
pub trait Partitioner: Send + Sync {
    /// The partition of a record of `topic` with these key and value bytes, in
    /// `[0, num_partitions)`. Anything else fails the send, as Kafka's producer fails it.
    fn partition(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        num_partitions: i32,
    ) -> i32;
}

/// What [`partition_record`] routes: a record about to be sent, as Kafka's `ProducerRecord`
/// after serialization.
#[derive(Debug, Clone, Copy)]
pub struct RecordToRoute<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition the caller chose, if any: it wins over everything else.
    pub partition: Option<i32>,
    /// The serialized key; `None` is a null key, `Some(&[])` an empty one (which is hashed).
    pub key: Option<&'a [u8]>,
    /// The serialized value.
    pub value: Option<&'a [u8]>,
}

/// Kafka's `KafkaProducer.partition`: the partition `record` goes to, or `None` when the
/// topic's [`BuiltInPartitioner`] must choose (no key, or keys ignored).
///
/// The rule, in order: the record's own partition; the `custom` partitioner; the key's
/// [`partition_for_key`] unless `ignore_keys` (`partitioner.ignore.keys`); else sticky.
///
/// # Errors
/// `InvalidArgument` when `num_partitions` is not positive, or the record's partition or the
/// custom partitioner's answer is outside `[0, num_partitions)`.
pub fn partition_record(
    record: &RecordToRoute<'_>,
    num_partitions: i32,
    custom: Option<&dyn Partitioner>,
    ignore_keys: bool,
) -> Result<Option<i32>, Error> {
    if num_partitions <= 0 {
        return Err(Error::InvalidArgument {
            why: format!(
                "topic {} has no partitions ({num_partitions})",
                record.topic
            ),
        });
    }
    let in_range = |partition: i32, whose: &str| {
        if (0..num_partitions).contains(&partition) {
            Ok(Some(partition))
        } else {
            Err(Error::InvalidArgument {
                why: format!(
                    "{whose} partition {partition} is not in [0, {num_partitions}) of topic {}",
                    record.topic
                ),
            })
        }
    };
    if let Some(partition) = record.partition {
        return in_range(partition, "the record's");
    }
    if let Some(custom) = custom {
        let partition = custom.partition(record.topic, record.key, record.value, num_partitions);
        return in_range(partition, "the custom partitioner's");
    }
    match record.key {
        Some(key) if !ignore_keys => partition_for_key(key, num_partitions).map(Some),
        _ => Ok(None),
    }
}

/// Where random `i32`s come from when the sticky partitioner switches: Kafka's
/// `ThreadLocalRandom.nextInt()`, replaced in tests by a counter ([`SequentialRandom`]).
pub trait RandomSource: Send + Sync + fmt::Debug {
    /// The next random `i32`, any value (the partitioner applies [`to_positive`]).
    fn next_i32(&self) -> i32;
}

/// The default [`RandomSource`]: SplitMix64 over a shared counter, started at a random point
/// taken from the standard library's randomly keyed hasher (no dependency, no file I/O).
#[derive(Debug)]
pub struct DefaultRandom {
    state: AtomicU64,
}

impl DefaultRandom {
    /// A source started at a random point.
    pub fn new() -> DefaultRandom {
        DefaultRandom {
            state: AtomicU64::new(random_u64()),
        }
    }
}

impl Default for DefaultRandom {
    fn default() -> Self {
        DefaultRandom::new()
    }
}

impl RandomSource for DefaultRandom {
    fn next_i32(&self) -> i32 {
        const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 32) as i32
    }
}

/// 64 random bits: the standard library seeds each `RandomState` from the operating system's
/// randomness (and varies it per call), so hashing a counter with a fresh one is unpredictable.
pub(crate) fn random_u64() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A [`RandomSource`] that returns 0, 1, 2, …: the `mockRandom` counter of Kafka's
/// partitioner tests, for tests that replay Kafka's choices.
#[derive(Debug, Default)]
pub struct SequentialRandom {
    next: AtomicI32,
}

impl SequentialRandom {
    /// A counter starting at `first`.
    pub fn starting_at(first: i32) -> SequentialRandom {
        SequentialRandom {
            next: AtomicI32::new(first),
        }
    }

    /// How many numbers have been drawn, when it started at 0 (Kafka's `mockRandom.get()`).
    pub fn peek(&self) -> i32 {
        self.next.load(Ordering::SeqCst)
    }
}

impl RandomSource for SequentialRandom {
    fn next_i32(&self) -> i32 {
        self.next.fetch_add(1, Ordering::SeqCst)
    }
}

/// The partitions of one topic as the sticky partitioner sees them: Kafka's
/// `cluster.partitionsForTopic` and `availablePartitionsForTopic`.
#[derive(Debug, Clone, Copy)]
pub struct Partitions<'a> {
    count: i32,
    available: Option<&'a [i32]>,
}

impl<'a> Partitions<'a> {
    /// All `count` partitions, each available (in process: every partition is a local log).
    pub fn all(count: i32) -> Partitions<'static> {
        Partitions {
            count,
            available: None,
        }
    }

    /// `count` partitions of which only `available` can take records now (Kafka: those with a
    /// leader). With none available, the partitioner picks among all, as Kafka's does.
    pub fn with_available(count: i32, available: &'a [i32]) -> Partitions<'a> {
        Partitions {
            count,
            available: Some(available),
        }
    }

    /// How many partitions the topic has.
    pub fn count(&self) -> i32 {
        self.count
    }
}

/// The sticky partition a [`BuiltInPartitioner`] currently sends to, and the bytes sent there
/// since it was chosen (Kafka's `StickyPartitionInfo`). A new choice is a new object, so
/// [`BuiltInPartitioner::is_partition_changed`] tells a concurrent switch by identity.
#[derive(Debug)]
pub struct StickyPartitionInfo {
    partition: i32,
    produced_bytes: AtomicI64,
}

impl StickyPartitionInfo {
    /// The partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The bytes appended to it since it was chosen.
    pub fn produced_bytes(&self) -> i64 {
        self.produced_bytes.load(Ordering::SeqCst)
    }
}

/// The cumulative frequency table of adaptive partitioning (Kafka's `PartitionLoadStats`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PartitionLoadStats {
    cumulative_frequency: Vec<i32>,
    partition_ids: Vec<i32>,
}

/// The queues of a topic's partitions as [`BuiltInPartitioner::append`] drives them: Kafka's
/// per-partition deques of `ProducerBatch`es in the `RecordAccumulator`. All three calls are
/// about the record being appended.
pub trait StickyQueues {
    /// What the appends fail with.
    type Error;

    /// Whether every batch in `partition`'s queue is full (Kafka's `allBatchesFull`: only the
    /// last batch can be open, so whether it is full or closed, or the queue is empty).
    fn all_batches_full(&mut self, partition: i32) -> bool;

    /// Appends the record to the last, open batch of `partition`'s queue and returns the bytes
    /// that added. `Ok(None)` when there is no open batch or the record does not fit; a batch
    /// the record does not fit is closed for appends first, as Kafka's `tryAppend` closes it.
    fn try_append(&mut self, partition: i32) -> Result<Option<i32>, Self::Error>;

    /// Appends the record to a new batch at the end of `partition`'s queue and returns the
    /// bytes that added (the new batch's estimated size).
    fn append_new_batch(&mut self, partition: i32) -> Result<i32, Self::Error>;
}

/// Kafka's `BuiltInPartitioner`: the sticky, optionally adaptive, partitioner of the records
/// without a key of one topic (KIP-794). Share one per topic between the threads that send.
///
/// The protocol is Kafka's: [`peek_current_partition_info`](Self::peek_current_partition_info)
/// says which partition's queue to take; under that queue's lock,
/// [`is_partition_changed`](Self::is_partition_changed) detects a concurrent switch (then
/// peek again); after the append, [`update_partition_info`](Self::update_partition_info) adds
/// its bytes and maybe switches. [`append`](Self::append) runs the whole of it.
#[derive(Debug)]
pub struct BuiltInPartitioner {
    topic: String,
    sticky_batch_size: i32,
    random: Arc<dyn RandomSource>,
    sticky: Mutex<Option<Arc<StickyPartitionInfo>>>,
    load_stats: Mutex<Option<PartitionLoadStats>>,
}

/// Locks `mutex`; a thread that panicked while holding it left only whole values behind
/// (every critical section here assigns or reads one field), so the poison is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BuiltInPartitioner {
    /// A partitioner for `topic` that switches after `sticky_batch_size` bytes (the producer's
    /// `batch.size`), drawing from a [`DefaultRandom`].
    ///
    /// # Errors
    /// `InvalidConfig` (`batch.size`) when `sticky_batch_size` is below 1.
    pub fn new(topic: &str, sticky_batch_size: i32) -> Result<BuiltInPartitioner, Error> {
        BuiltInPartitioner::with_random(topic, sticky_batch_size, Arc::new(DefaultRandom::new()))
    }

    /// [`new`](Self::new) with the random numbers drawn from `random`.
    ///
    /// # Errors
    /// `InvalidConfig` (`batch.size`) when `sticky_batch_size` is below 1.
    pub fn with_random(
        topic: &str,
        sticky_batch_size: i32,
        random: Arc<dyn RandomSource>,
    ) -> Result<BuiltInPartitioner, Error> {
        if sticky_batch_size < 1 {
            return Err(Error::InvalidConfig {
                setting: "batch.size",
                why: format!(
                    "the sticky partitioner of topic {topic} needs a batch size of at least 1, \
                     not {sticky_batch_size}"
                ),
            });
        }
        Ok(BuiltInPartitioner {
            topic: topic.to_owned(),
            sticky_batch_size,
            random,
            sticky: Mutex::new(None),
            load_stats: Mutex::new(None),
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The bytes after which it switches: `batch.size`.
    pub fn sticky_batch_size(&self) -> i32 {
        self.sticky_batch_size
    }

    /// Kafka's `nextPartition`: `r = to_positive(random)`; without load stats
    /// `available[r % available.len()]` (all partitions when none is available); with them the
    /// first index of the cumulative frequency table whose entry is above `r % total`.
    pub fn next_partition(&self, partitions: &Partitions<'_>) -> i32 {
        let random = to_positive(self.random.next_i32());
        if let Some(stats) = lock(&self.load_stats).as_ref()
            && let Some(&total) = stats.cumulative_frequency.last()
            && total > 0
        {
            let weighted = random % total;
            let index = stats
                .cumulative_frequency
                .partition_point(|&bound| bound <= weighted);
            if let Some(&partition) = stats.partition_ids.get(index) {
                return partition;
            }
        }
        match partitions.available {
            Some(available) if !available.is_empty() => {
                // `random` is non-negative and the length is at most i32::MAX in any topic.
                let index = random as usize % available.len();
                available[index]
            }
            _ if partitions.count > 0 => random % partitions.count,
            _ => 0,
        }
    }

    /// Kafka's `peekCurrentPartitionInfo`: the current sticky partition, chosen now with
    /// [`next_partition`](Self::next_partition) if there is none yet.
    pub fn peek_current_partition_info(
        &self,
        partitions: &Partitions<'_>,
    ) -> Arc<StickyPartitionInfo> {
        let mut sticky = lock(&self.sticky);
        if let Some(info) = sticky.as_ref() {
            return Arc::clone(info);
        }
        let info = Arc::new(StickyPartitionInfo {
            partition: self.next_partition(partitions),
            produced_bytes: AtomicI64::new(0),
        });
        *sticky = Some(Arc::clone(&info));
        info
    }

    /// Kafka's `isPartitionChanged`: whether another thread switched away from `info` since it
    /// was peeked.
    pub fn is_partition_changed(&self, info: &Arc<StickyPartitionInfo>) -> bool {
        lock(&self.sticky)
            .as_ref()
            .is_none_or(|current| !Arc::ptr_eq(current, info))
    }

    /// Kafka's `updatePartitionInfo`: adds `appended_bytes` to `info` and switches to a new
    /// partition once `batch.size` bytes went there and `enable_switch` (its queue holds only
    /// full batches), or once `2 × batch.size` bytes went there whatever `enable_switch` says.
    /// Does nothing when `info` is no longer the current partition.
    pub fn update_partition_info(
        &self,
        info: &Arc<StickyPartitionInfo>,
        appended_bytes: i32,
        partitions: &Partitions<'_>,
        enable_switch: bool,
    ) {
        let mut sticky = lock(&self.sticky);
        if sticky
            .as_ref()
            .is_none_or(|current| !Arc::ptr_eq(current, info))
        {
            return;
        }
        let produced = info
            .produced_bytes
            .fetch_add(i64::from(appended_bytes), Ordering::SeqCst)
            + i64::from(appended_bytes);
        let batch = i64::from(self.sticky_batch_size);
        if (produced >= batch && enable_switch) || produced >= 2 * batch {
            *sticky = Some(Arc::new(StickyPartitionInfo {
                partition: self.next_partition(partitions),
                produced_bytes: AtomicI64::new(0),
            }));
        }
    }

    /// Kafka's `updatePartitionLoadStats`: adaptive partitioning from the queue sizes of the
    /// partitions `partition_ids` (their first `length` entries count). Each weight is
    /// `max(queue) + 1 − queue[i]`; `q = [0, 3, 1]` gives weights `[4, 1, 3]` and the table
    /// `[4, 5, 8]`. No table (uniform choice) when fewer than 2 partitions exist, none counts,
    /// or all queues are equal and none was left out.
    ///
    /// # Errors
    /// `InvalidArgument` when the two slices differ in length or `length` exceeds them.
    pub fn update_partition_load_stats(
        &self,
        queue_sizes: &[i32],
        partition_ids: &[i32],
        length: usize,
    ) -> Result<(), Error> {
        if queue_sizes.len() != partition_ids.len() || length > queue_sizes.len() {
            return Err(Error::InvalidArgument {
                why: format!(
                    "load stats of topic {}: {} queue sizes, {} partition ids, length {length}",
                    self.topic,
                    queue_sizes.len(),
                    partition_ids.len()
                ),
            });
        }
        *lock(&self.load_stats) = load_stats(&queue_sizes[..length], partition_ids, length);
        Ok(())
    }

    /// Forgets the load stats: the next switches are uniform again (Kafka's
    /// `updatePartitionLoadStats(null, ..)`, adaptive partitioning off).
    pub fn clear_partition_load_stats(&self) {
        *lock(&self.load_stats) = None;
    }

    /// Kafka's `loadStatsRangeEnd`: the last entry of the cumulative frequency table, if there
    /// is one.
    pub fn load_stats_range_end(&self) -> Option<i32> {
        lock(&self.load_stats)
            .as_ref()
            .and_then(|stats| stats.cumulative_frequency.last().copied())
    }

    /// `RecordAccumulator.append` for a record without a partition: peeks the sticky
    /// partition, appends the record to its queue, and updates the partitioner, retrying when
    /// the partition changed meanwhile. Before each append attempt, a queue that holds only
    /// full batches completes a switch an earlier append had to put off. Returns the partition
    /// the record went to.
    ///
    /// `queues` must see one partition's queue unchanged by others between the calls of one
    /// attempt (Kafka holds the deque's lock across them).
    ///
    /// # Errors
    /// What `queues` fails with; the partitioner is then unchanged by the record.
    pub fn append<Q: StickyQueues>(
        &self,
        queues: &mut Q,
        partitions: &Partitions<'_>,
    ) -> Result<i32, Q::Error> {
        loop {
            let info = self.peek_current_partition_info(partitions);
            let partition = info.partition();
            if self.partition_changed(&info, queues, partitions) {
                continue;
            }
            if let Some(appended) = queues.try_append(partition)? {
                let enable_switch = queues.all_batches_full(partition);
                self.update_partition_info(&info, appended, partitions, enable_switch);
                return Ok(partition);
            }
            // Kafka lets go of the deque here to allocate a buffer, then looks again.
            if self.partition_changed(&info, queues, partitions) {
                continue;
            }
            let appended = queues.append_new_batch(partition)?;
            let enable_switch = queues.all_batches_full(partition);
            self.update_partition_info(&info, appended, partitions, enable_switch);
            return Ok(partition);
        }
    }

    /// `RecordAccumulator.partitionChanged`: a concurrent switch, or one put off until the
    /// queue's batches were all full and now completed.
    fn partition_changed<Q: StickyQueues>(
        &self,
        info: &Arc<StickyPartitionInfo>,
        queues: &mut Q,
        partitions: &Partitions<'_>,
    ) -> bool {
        if self.is_partition_changed(info) {
            return true;
        }
        if queues.all_batches_full(info.partition()) {
            self.update_partition_info(info, 0, partitions, true);
            return self.is_partition_changed(info);
        }
        false
    }
}

/// The table of [`BuiltInPartitioner::update_partition_load_stats`], or `None` for a uniform
/// choice. `queue_sizes` holds the `length` partitions that count; `partition_ids` all of them.
fn load_stats(
    queue_sizes: &[i32],
    partition_ids: &[i32],
    length: usize,
) -> Option<PartitionLoadStats> {
    if length < 1 || partition_ids.len() < 2 {
        return None;
    }
    let max = queue_sizes.iter().copied().max()?;
    let all_equal = queue_sizes.iter().all(|&size| size == max);
    if all_equal && length == partition_ids.len() {
        return None;
    }
    let max_plus_one = i64::from(max) + 1;
    let mut running: i64 = 0;
    let mut cumulative_frequency = Vec::with_capacity(length);
    for &size in queue_sizes {
        running += max_plus_one - i64::from(size);
        // Queue sizes are counts of batches in memory: a table past i32::MAX cannot arise.
        cumulative_frequency.push(i32::try_from(running).unwrap_or(i32::MAX));
    }
    Some(PartitionLoadStats {
        cumulative_frequency,
        partition_ids: partition_ids[..length].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_table_of_kafkas_comment() {
        let stats = load_stats(&[0, 3, 1], &[0, 1, 2], 3).unwrap();
        assert_eq!(stats.cumulative_frequency, [4, 5, 8]);
        assert_eq!(load_stats(&[2, 2, 2], &[0, 1, 2], 3), None, "all equal");
        assert!(load_stats(&[2, 2], &[0, 1, 2], 2).is_some(), "one left out");
        assert_eq!(load_stats(&[5], &[0], 1), None, "one partition");
        assert_eq!(load_stats(&[], &[0, 1], 0), None, "none counts");
    }

    #[test]
    fn default_random_covers_both_signs() {
        let random = DefaultRandom::new();
        let draws: Vec<i32> = (0..64).map(|_| random.next_i32()).collect();
        assert!(draws.iter().any(|&r| r < 0) && draws.iter().any(|&r| r >= 0));
    }
}
