//! The types that settings take: [`FlushPolicy`] (`flush.messages` and `flush.ms`),
//! [`RecoveryMode`], [`CleanupPolicy`] (`cleanup.policy`) and [`CompressionType`]
//! (`compression.type`), each with Kafka's spelling and its parser.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::Compression;

use super::validate::{at_least, invalid};

/// Kafka's `Long.MAX_VALUE`, the "not set" value of `flush.messages` and `flush.ms`.
const KAFKA_LONG_MAX: i64 = i64::MAX;

/// When appended data is fsynced (Kafka's `flush.messages` and `flush.ms`).
///
/// Whatever the policy, `Log::wait_durable` makes an offset durable on demand, and the
/// durable offset only moves forward. A policy chooses when fsyncs happen without being asked:
/// leaving it to the OS, as Kafka does by default and recommends (Kafka relies on replication for
/// durability, which a single partlog log does not have), or after a number of messages, a number
/// of bytes, a time, or every append.
///
/// Default: [`FlushPolicy::OsDecides`] (Kafka's).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// No fsync unless asked for: the OS writes dirty pages back on its own schedule, and a
    /// machine crash may lose what it had not written. Segments are still synced at roll and at
    /// close. Kafka's default (`flush.messages` and `flush.ms` both `Long.MAX_VALUE`).
    #[default]
    OsDecides,
    /// An fsync once this many messages (records) have been appended since the last one.
    /// Kafka's `flush.messages`; `EveryMessages(1)` is close to [`FlushPolicy::EveryAppend`].
    EveryMessages(NonZeroU64),
    /// An fsync once this many bytes have been appended since the last one. partlog's own
    /// policy: it bounds what a machine crash can lose in bytes, whatever the record sizes.
    EveryBytes(NonZeroU64),
    /// An fsync at least this often while there are unsynced appends. Kafka's `flush.ms`.
    /// Must be non-zero and at most `i64::MAX` milliseconds.
    Interval(Duration),
    /// Every append is durable before it returns; concurrent appends share one fsync (group
    /// commit). The strongest policy and the slowest.
    EveryAppend,
}

impl FlushPolicy {
    /// The policy for Kafka's `flush.messages` and `flush.ms`, where `Long.MAX_VALUE`
    /// (9223372036854775807, Kafka's default for both) means "not set".
    ///
    /// - both at `Long.MAX_VALUE`: [`FlushPolicy::OsDecides`];
    /// - `flush.messages = n`: [`FlushPolicy::EveryMessages`]`(n)`;
    /// - `flush.ms = 0`: [`FlushPolicy::EveryAppend`] (nothing may stay unsynced for any time);
    /// - `flush.ms = ms`: [`FlushPolicy::Interval`]`(ms)`.
    ///
    /// Errors name the Kafka setting: `flush.messages` below 1 and `flush.ms` below 0 are invalid,
    /// as in Kafka. Kafka applies both settings when both are set; a `FlushPolicy` is one policy,
    /// so setting both is an error about `flush.ms`.
    pub fn from_kafka(flush_messages: i64, flush_ms: i64) -> Result<FlushPolicy> {
        at_least("flush.messages", flush_messages, 1)?;
        at_least("flush.ms", flush_ms, 0)?;
        match (flush_messages, flush_ms) {
            (KAFKA_LONG_MAX, KAFKA_LONG_MAX) => Ok(FlushPolicy::OsDecides),
            (messages, KAFKA_LONG_MAX) => u64::try_from(messages)
                .ok()
                .and_then(NonZeroU64::new)
                .map(FlushPolicy::EveryMessages)
                .ok_or_else(|| {
                    invalid(
                        "flush.messages",
                        format!("{messages} is below the minimum of 1"),
                    )
                }),
            (KAFKA_LONG_MAX, 0) => Ok(FlushPolicy::EveryAppend),
            (KAFKA_LONG_MAX, ms) => Ok(FlushPolicy::Interval(Duration::from_millis(
                ms.unsigned_abs(),
            ))),
            (messages, _) => Err(invalid(
                "flush.ms",
                format!(
                    "cannot be set together with flush.messages ({messages}): partlog takes one \
                     flush policy, so leave one of them at {KAFKA_LONG_MAX} (Long.MAX_VALUE, \
                     Kafka's default)"
                ),
            )),
        }
    }

    /// Checks the one policy that can be out of range: an interval must be non-zero (a zero
    /// interval would fsync without pause; [`FlushPolicy::EveryAppend`] says what it means) and
    /// at most `i64::MAX` milliseconds, Kafka's `flush.ms` limit.
    pub(super) fn validate(&self) -> Result<()> {
        if let FlushPolicy::Interval(interval) = *self {
            if interval.is_zero() {
                return Err(invalid(
                    "flush.ms",
                    "an interval of 0 would fsync without pause; use FlushPolicy::EveryAppend \
                     to fsync every append",
                ));
            }
            if interval.as_millis() > i64::MAX.unsigned_abs().into() {
                return Err(invalid(
                    "flush.ms",
                    format!(
                        "an interval of {} ms exceeds the maximum of {} ms",
                        interval.as_millis(),
                        i64::MAX
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What opening a log does with an invalid byte (a bad CRC, a torn length, a broken record)
/// found BELOW the recovery point, where every byte was durable before the crash.
///
/// An invalid byte ABOVE the recovery point is always a torn tail, the normal result of a crash
/// during a write: it is truncated whatever the mode, and the recovery report says how many bytes
/// went. Below the recovery point the bytes were synced, so an invalid one means the disk or
/// something outside partlog damaged them: that is corruption, and this policy decides.
///
/// Default: [`RecoveryMode::Fail`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Refuse to open: return [`Error::Corrupt`] with the file and position, and change nothing,
    /// so that an operator can look at the damage (or copy the data) before anything is lost.
    #[default]
    Fail,
    /// Truncate the log at the first invalid byte, dropping everything after it (durable records
    /// included), report it, and open. Choose it where availability matters more than the records
    /// after the damage, as Kafka's recovery does.
    TruncateAtCorruption,
}

/// Kafka's `cleanup.policy`: the set of ways of removing old data that run on the log.
///
/// A set, as in Kafka: `delete` ([`CleanupPolicy::DELETE`]), `compact`
/// ([`CleanupPolicy::COMPACT`]), both, or neither. Kafka writes it as a comma-separated list
/// ([`CleanupPolicy::from_kafka_str`], [`Display`](fmt::Display)). The empty list, which Kafka
/// also accepts, sets neither: the log keeps every segment, and only `delete_records_before` and
/// `truncate_to` remove data. A set of bits, so that a policy Kafka adds is one more constant and
/// one more name in [`CleanupPolicy::NAMES`].
///
/// ```
/// use partlog::CleanupPolicy;
///
/// let mut policy: CleanupPolicy = "delete".parse()?;
/// policy.insert(CleanupPolicy::COMPACT);
/// assert!(policy.contains(CleanupPolicy::COMPACT));
/// assert_eq!(policy, CleanupPolicy::COMPACT_DELETE);
/// assert_eq!(policy.to_string(), "compact,delete");
/// assert!("sometimes".parse::<CleanupPolicy>().is_err());
/// # Ok::<(), partlog::Error>(())
/// ```
///
/// Default: [`CleanupPolicy::DELETE`] (Kafka's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CleanupPolicy {
    bits: u8,
}

impl Default for CleanupPolicy {
    /// `delete`, Kafka's default.
    fn default() -> Self {
        CleanupPolicy::DELETE
    }
}

impl CleanupPolicy {
    /// `cleanup.policy=delete`, the default: segments past `retention.ms` or `retention.bytes`
    /// are deleted.
    pub const DELETE: CleanupPolicy = CleanupPolicy { bits: 1 };
    /// `cleanup.policy=compact`: compaction keeps one record of each key (the latest, under the
    /// default [`CompactionPolicy`](crate::CompactionPolicy)), and records need keys.
    pub const COMPACT: CleanupPolicy = CleanupPolicy { bits: 1 << 1 };
    /// `cleanup.policy=compact,delete`: compaction, and retention on top of it.
    pub const COMPACT_DELETE: CleanupPolicy = CleanupPolicy {
        bits: Self::COMPACT.bits | Self::DELETE.bits,
    };
    /// `cleanup.policy=` (the empty list): neither; the log keeps every segment.
    pub const NONE: CleanupPolicy = CleanupPolicy { bits: 0 };

    /// Each policy with its Kafka name, in the order Kafka prints a list (`compact,delete`).
    pub const NAMES: [(CleanupPolicy, &'static str); 2] = [
        (CleanupPolicy::COMPACT, "compact"),
        (CleanupPolicy::DELETE, "delete"),
    ];

    /// Whether every policy in `other` is in this set (`NONE` is in every set).
    pub const fn contains(self, other: CleanupPolicy) -> bool {
        self.bits & other.bits == other.bits
    }

    /// Adds the policies of `other` to this set.
    pub fn insert(&mut self, other: CleanupPolicy) {
        self.bits |= other.bits;
    }

    /// Takes the policies of `other` out of this set.
    pub fn remove(&mut self, other: CleanupPolicy) {
        self.bits &= !other.bits;
    }

    /// This set with the policies of `other` added.
    pub const fn union(self, other: CleanupPolicy) -> CleanupPolicy {
        CleanupPolicy {
            bits: self.bits | other.bits,
        }
    }

    /// Whether the set is empty (`cleanup.policy=`, [`CleanupPolicy::NONE`]).
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// Whether `delete` is in the set: time and size retention run.
    pub const fn deletes(self) -> bool {
        self.contains(CleanupPolicy::DELETE)
    }

    /// Whether `compact` is in the set: compaction runs, and records need keys.
    pub const fn compacts(self) -> bool {
        self.contains(CleanupPolicy::COMPACT)
    }

    /// The single policies in the set with their Kafka names, in Kafka's order.
    pub fn iter(self) -> impl Iterator<Item = (CleanupPolicy, &'static str)> {
        CleanupPolicy::NAMES
            .into_iter()
            .filter(move |&(policy, _)| self.contains(policy))
    }

    /// Parses Kafka's list syntax: comma-separated names from [`CleanupPolicy::NAMES`], in any
    /// order, with spaces around items allowed, as Kafka's config parser allows them. The empty
    /// (or blank) string is the empty list, [`CleanupPolicy::NONE`]. Names are lowercase, as Kafka
    /// spells them; an unknown or empty item is [`Error::InvalidConfig`] about `cleanup.policy`,
    /// listing the valid names.
    pub fn from_kafka_str(value: &str) -> Result<CleanupPolicy> {
        let mut policy = CleanupPolicy::NONE;
        if value.trim().is_empty() {
            return Ok(policy);
        }
        let expected = || {
            let names: Vec<&str> = CleanupPolicy::NAMES.iter().map(|&(_, name)| name).collect();
            format!("expected a comma-separated list of {}", names.join(", "))
        };
        for item in value.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(invalid(
                    "cleanup.policy",
                    format!("{value:?} has an empty item; {}", expected()),
                ));
            }
            match CleanupPolicy::NAMES.iter().find(|&&(_, name)| name == item) {
                Some(&(named, _)) => policy.insert(named),
                None => {
                    return Err(invalid(
                        "cleanup.policy",
                        format!("{item:?} is not a cleanup policy; {}", expected()),
                    ));
                }
            }
        }
        Ok(policy)
    }

    /// The policy as Kafka writes it: `delete`, `compact`, `compact,delete`, or the empty string.
    pub const fn as_kafka_str(self) -> &'static str {
        match (self.compacts(), self.deletes()) {
            (false, true) => "delete",
            (true, false) => "compact",
            (true, true) => "compact,delete",
            (false, false) => "",
        }
    }
}

impl fmt::Display for CleanupPolicy {
    /// Kafka's list: the names in Kafka's order, joined by commas (`compact,delete`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (_, name)) in self.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

impl FromStr for CleanupPolicy {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        CleanupPolicy::from_kafka_str(value)
    }
}

/// Kafka's `compression.type`: the codec batches are stored with.
///
/// partlog writes batches uncompressed, with LZ4 or with zstd. Kafka's `gzip` and `snappy` are
/// not offered, so [`CompressionType::from_kafka_str`] rejects them.
///
/// Default: [`CompressionType::Producer`] (Kafka's).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CompressionType {
    /// `producer`: a producer-built batch (`append_batch`) keeps its codec, and `append(records)`
    /// writes uncompressed batches. Kafka's default.
    #[default]
    Producer,
    /// `uncompressed`: every batch is stored uncompressed; compressed input is recompressed.
    Uncompressed,
    /// `lz4`: every batch is stored as an LZ4 frame in Kafka's layout.
    Lz4,
    /// `zstd`: every batch is stored as a zstd frame.
    Zstd,
}

impl CompressionType {
    /// Parses Kafka's name: `producer`, `uncompressed` (or `none`, the producer-side spelling),
    /// `lz4` or `zstd`, lowercase as Kafka spells them, with surrounding spaces allowed. `gzip`
    /// and `snappy` are valid in Kafka but not here, and like any other name they are
    /// [`Error::InvalidConfig`] about `compression.type`.
    pub fn from_kafka_str(value: &str) -> Result<CompressionType> {
        match value.trim() {
            "producer" => Ok(CompressionType::Producer),
            "uncompressed" | "none" => Ok(CompressionType::Uncompressed),
            "lz4" => Ok(CompressionType::Lz4),
            "zstd" => Ok(CompressionType::Zstd),
            codec @ ("gzip" | "snappy") => Err(invalid(
                "compression.type",
                format!("{codec} is not supported: partlog writes none, lz4 and zstd"),
            )),
            other => Err(invalid(
                "compression.type",
                format!(
                    "{other:?} is not a compression type; expected producer, uncompressed (or \
                     none), lz4 or zstd"
                ),
            )),
        }
    }

    /// Kafka's name for the setting: `producer`, `uncompressed`, `lz4` or `zstd`.
    pub const fn as_kafka_str(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::Uncompressed => "uncompressed",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// The codec every stored batch must have, or `None` for [`CompressionType::Producer`], where
    /// a producer-built batch keeps its own.
    pub const fn codec(self) -> Option<Compression> {
        match self {
            CompressionType::Producer => None,
            CompressionType::Uncompressed => Some(Compression::None),
            CompressionType::Lz4 => Some(Compression::Lz4),
            CompressionType::Zstd => Some(Compression::Zstd),
        }
    }
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_kafka_str())
    }
}

impl FromStr for CompressionType {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        CompressionType::from_kafka_str(value)
    }
}
