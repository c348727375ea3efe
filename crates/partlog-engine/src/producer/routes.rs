//! [`Routes`]: the topics a [`TopicProducer`](super::TopicProducer) sends to, each with its
//! partition count, its sticky partitioner and the producer of each partition it has sent to.
//!
//! Every `send` reads the table under a shared lock, held across the partition producer's
//! `send` so that the record's route costs no reference count; the table is locked for writing
//! only to add a topic or a partition's producer, and to take producers out (a commit, an
//! epoch bump). Topic names are hashed with [`TopicHasher`], not `std`'s SipHash: the table's
//! keys are the application's own topic names, and the hash is a large share of a send.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use partlog::{Error, Producer};

use crate::partitioner::{
    BuiltInPartitioner, Partitioner, Partitions, RecordToRoute, StickyPartitionInfo,
    partition_record,
};

/// The route table: see the module docs.
pub(crate) type Routes = HashMap<String, Route, BuildHasherDefault<TopicHasher>>;

/// One topic as the producer routes to it.
#[derive(Debug)]
pub(crate) struct Route {
    pub(crate) partitions: i32,
    /// Each partition's producer, made at the first record to it (in a transaction: at the
    /// first record of each transaction, held until the coordinator adds the partition).
    pub(crate) producers: Vec<Option<Arc<Producer>>>,
    pub(crate) sticky: BuiltInPartitioner,
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
            sticky: BuiltInPartitioner::with_random(topic, batch_size, random)?,
        })
    }

    /// The partition of `record`, and the sticky partition it used (a record the partitioner
    /// left unrouted: no key, or keys ignored).
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
pub(crate) fn read(routes: &RwLock<Routes>) -> RwLockReadGuard<'_, Routes> {
    routes.read().unwrap_or_else(PoisonError::into_inner)
}

/// The table for writing.
pub(crate) fn write(routes: &RwLock<Routes>) -> RwLockWriteGuard<'_, Routes> {
    routes.write().unwrap_or_else(PoisonError::into_inner)
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
