//! [`Routes`]: the topics a [`TopicProducer`](super::TopicProducer) sends to, each with its
//! partition count, its sticky partitioner and the producer of each partition it has sent to.
//!
//! The table is locked for writing only to add a topic or a partition's producer, and to take
//! producers out (a commit, an epoch bump); each write moves the table's generation on. A
//! `send` first tries its thread's copy of the last route it used (`route_cache`), valid while
//! the generation is the one it was copied at: one load, no lock, no hash. Otherwise it reads
//! the table under the shared lock, held across the partition producer's `send` so that the
//! route costs no reference count, and refreshes the copy. Topic names are hashed with
//! [`TopicHasher`], not `std`'s SipHash: the keys are the application's own topic names.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use partlog::{Error, Producer};

use crate::partitioner::{
    BuiltInPartitioner, Partitioner, Partitions, RecordToRoute, StickyPartitionInfo,
    partition_record,
};

/// The route table: see the module docs.
pub(crate) type Routes = HashMap<String, Route, BuildHasherDefault<TopicHasher>>;

/// The route table and its generation, which every write moves on (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct RouteTable {
    table: RwLock<Routes>,
    generation: AtomicU64,
}

impl RouteTable {
    /// The generation now: a copy of a route made at another one may be stale.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// One topic as the producer routes to it. A clone shares the sticky partitioner and the
/// producers (a thread's cached copy, see `route_cache`).
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) partitions: i32,
    /// Each partition's producer, made at the first record to it (in a transaction: at the
    /// first record of each transaction, held until the coordinator adds the partition).
    pub(crate) producers: Vec<Option<Arc<Producer>>>,
    pub(crate) sticky: Arc<BuiltInPartitioner>,
}

impl Route {
    /// The route of a topic of `partitions` partitions.
    pub(crate) fn new(
        topic: &str,
        partitions: i32,
        batch_size: i32,
        random: Arc<dyn crate::partitioner::RandomSource>,
    ) -> Result<Route, Error> {
        Ok(Route {
            partitions,
            producers: vec![None; usize::try_from(partitions).unwrap_or(0)],
            sticky: Arc::new(BuiltInPartitioner::with_random(topic, batch_size, random)?),
        })
    }

    /// The partition of `record`, and the sticky partition it used (a record the partitioner
    /// left unrouted: no key, or keys ignored).
    #[inline]
    pub(crate) fn choose(
        &self,
        record: &RecordToRoute<'_>,
        custom: Option<&dyn Partitioner>,
        ignore_keys: bool,
    ) -> Result<(i32, Option<Arc<StickyPartitionInfo>>), Error> {
        match partition_record(record, self.partitions, custom, ignore_keys)? {
            Some(partition) => Ok((partition, None)),
            None => {
                let info = self
                    .sticky
                    .peek_current_partition_info(&Partitions::all(self.partitions));
                Ok((info.partition(), Some(info)))
            }
        }
    }

    /// The producer of `partition`, if one was made.
    #[inline]
    pub(crate) fn producer(&self, partition: i32) -> Option<&Arc<Producer>> {
        self.producers
            .get(usize::try_from(partition).ok()?)
            .and_then(Option::as_ref)
    }

    /// After a record of `size` bytes went to the sticky partition `info`: count its bytes,
    /// maybe switch.
    pub(crate) fn sticky_appended(&self, info: &Arc<StickyPartitionInfo>, size: i32) {
        self.sticky
            .update_partition_info(info, size, &Partitions::all(self.partitions), true);
    }
}

/// The table for reading; a panic elsewhere leaves it usable (every change is one insert or
/// one `Option::take`).
pub(crate) fn read(routes: &RouteTable) -> RwLockReadGuard<'_, Routes> {
    routes.table.read().unwrap_or_else(PoisonError::into_inner)
}

/// The table for writing. The generation moves on before the caller changes anything, so a
/// sender that checks it after the change uses the table, not its copy; one that checked
/// before may still send to a producer being taken out, and finds it closed (`send_routed`
/// then routes the record again through the table).
pub(crate) fn write(routes: &RouteTable) -> RwLockWriteGuard<'_, Routes> {
    let guard = routes.table.write().unwrap_or_else(PoisonError::into_inner);
    routes.generation.fetch_add(1, Ordering::AcqRel);
    guard
}

/// The Fx hash (rustc's): a rotate, an xor and a multiply per 8 bytes. Not resistant to chosen
/// keys, which topic names are not.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TopicHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl TopicHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for TopicHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
