//! [`ProducerConfig`]: the batching writer's settings, with the Kafka producer's names and
//! Kafka 4's defaults.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// What "done" means for a record sent through a [`Producer`](crate::Producer): Kafka's `acks`.
///
/// An embedded log has no replicas, so the levels map onto the log's own guarantees:
///
/// | `acks` | the record's handle resolves when | it then survives |
/// | --- | --- | --- |
/// | `0` | it is queued in the accumulator (the offset is not known yet: -1) | nothing; a crash of the process loses it |
/// | `1` | its batch is appended: in the file and visible to readers | a crash of the process |
/// | `all` | its batch is fsynced, through the log's group commit | a crash of the machine |
///
/// Default: [`Acks::All`] (Kafka 3.0 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Acks {
    /// `acks=0`: done when queued. Errors reach no handle; [`Producer::flush`](crate::Producer::flush)
    /// and [`Producer::close`](crate::Producer::close) report them.
    Zero,
    /// `acks=1`: done when appended to the log.
    One,
    /// `acks=all` (or `-1`): done when durable. Kafka 3.0 made this the default.
    #[default]
    All,
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::Zero => "0",
            Acks::One => "1",
            Acks::All => "all",
        })
    }
}

impl FromStr for Acks {
    type Err = Error;

    /// Parses Kafka's spellings: `0`, `1`, `all` and `-1` (a synonym of `all`).
    fn from_str(value: &str) -> Result<Acks> {
        match value.trim() {
            "0" => Ok(Acks::Zero),
            "1" => Ok(Acks::One),
            "all" | "-1" => Ok(Acks::All),
            other => Err(Error::InvalidConfig {
                setting: "acks",
                why: format!("{other:?} is not one of 0, 1, all or -1"),
            }),
        }
    }
}

/// The settings of a [`Producer`](crate::Producer), named and defaulted as Kafka 4's producer.
///
/// Build one with [`ProducerConfig::builder`], or start from [`ProducerConfig::default`] and change
/// fields; [`Producer::new`](crate::Producer::new) validates it again. Invalid values are
/// [`Error::InvalidConfig`] naming the setting as Kafka spells it.
///
/// ```
/// use std::time::Duration;
/// use partlog::{Acks, Error, ProducerConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Kafka's producer properties, as strings, map onto the builder:
/// let config = ProducerConfig::builder()
///     .acks("1".parse::<Acks>()?) // acks=1: resolved once appended
///     .linger(Duration::from_millis(20))
///     .batch_size(64 * 1024)
///     .build()?;
/// assert_eq!((config.linger_ms, config.buffer_memory), (20, 32 * 1024 * 1024));
///
/// let refused = ProducerConfig::builder().buffer_memory(0).build();
/// assert!(matches!(refused, Err(Error::InvalidConfig { setting: "buffer.memory", .. })));
/// # Ok(())
/// # }
/// ```
///
/// The idempotent and transactional modes ([`ProducerMode`]) start from their own builders,
/// with the producer id and epoch (a broker's `InitProducerId` would hand them out; here the
/// caller does):
///
/// ```
/// use partlog::{Acks, Error, ProducerConfig, ProducerMode};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let idempotent = ProducerConfig::idempotent(1001, 0).acks(Acks::One).build()?;
/// assert_eq!(idempotent.mode, ProducerMode::Idempotent { producer_id: 1001, producer_epoch: 0 });
///
/// let transactional = ProducerConfig::transactional(1002, 3).build()?;
/// assert!(transactional.mode.is_transactional());
/// assert_eq!(transactional.mode.producer(), Some((1002, 3)));
///
/// let refused = ProducerConfig::idempotent(-1, 0).build();
/// assert!(matches!(refused, Err(Error::InvalidConfig { setting: "producer.id", .. })));
/// # Ok(())
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConfig {
    /// `batch.size`: the size in bytes (header plus encoded records, before compression) at which
    /// a batch is sealed and handed to the sender thread. A record that does not fit in the
    /// open batch seals it and starts the next one; a record larger than this goes alone in its
    /// own batch. A batch is also sealed below this size by `linger.ms`, `flush()` and `close()`,
    /// and never exceeds the log's `max.message.bytes`. 0 puts every record in its own batch.
    ///
    /// Range: 0 to `i32::MAX` (Kafka's type is `int`). Default: 16384.
    pub batch_size: u32,

    /// `linger.ms`: how long a batch that is not full waits for more records after its first one,
    /// measured on the log's clock (`LogConfig::clock`; if that clock is stepped back below a
    /// batch's start, the batch is sent at once). Kafka 4 raised the default from 0 to 5
    /// (KIP-1030): a few milliseconds of waiting buy larger batches and fewer appends.
    ///
    /// Range: at least 0. Default: 5.
    pub linger_ms: u64,

    /// `buffer.memory`: the bytes of records the accumulator may hold that are not yet appended
    /// (each record counted at its encoded size). When it is full, `send` blocks up to
    /// `max.block.ms` and the sender thread seals lingering batches at once to make room.
    ///
    /// Range: at least 1. Default: 33554432 (32 MiB).
    pub buffer_memory: u64,

    /// `max.block.ms`: how long `send` may block waiting for `buffer.memory`, before it fails
    /// with [`Error::BufferExhausted`]. 0 fails at once.
    ///
    /// Range: at least 0. Default: 60000 (1 minute).
    pub max_block_ms: u64,

    /// `acks`: when a record's handle resolves; see [`Acks`]. Default: [`Acks::All`] (Kafka 3+).
    pub acks: Acks,

    /// Whether the batches carry a producer id, and whether they belong to transactions: Kafka's
    /// `enable.idempotence` and `transactional.id`, with the id and epoch the caller gives (see
    /// [`ProducerMode`]). Default: [`ProducerMode::Plain`].
    pub mode: ProducerMode,
}

/// Kafka's producer modes at the log level: what a [`Producer`](crate::Producer) stamps on its
/// batches. The producer id and epoch are the caller's: a Kafka broker's `InitProducerId` hands
/// them out, and so would a layer above the log; here nothing allocates them.
///
/// | mode | batches | what the log does with them |
/// | --- | --- | --- |
/// | `Plain` | no producer id | appends them |
/// | `Idempotent` | the id and epoch, a sequence per batch | refuses a gap ([`Error::OutOfOrderSequence`]) or an older epoch ([`Error::InvalidProducerEpoch`]); answers a re-sent batch (one of the producer's last 5) with the original offsets, writing nothing |
/// | `Transactional` | the same, marked transactional; [`begin`](crate::Producer::begin), [`commit`](crate::Producer::commit) and [`abort`](crate::Producer::abort) | as `Idempotent`; `read_committed` readers see a transaction's records once its COMMIT marker is written, and never those of an aborted one |
///
/// One writer per producer id at a time: two producers with the same id and epoch would take
/// each other's batches for gaps, or for re-sends. To take over from a writer that may still
/// be running, give a higher epoch: the log then fences the older one (its next batch fails
/// with [`Error::InvalidProducerEpoch`]), as Kafka's `InitProducerId` bumps the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ProducerMode {
    /// Batches without a producer id (Kafka's `enable.idempotence=false`).
    #[default]
    Plain,
    /// Batches with the producer id, its epoch and a sequence per batch (Kafka's idempotent
    /// producer, `enable.idempotence=true`).
    Idempotent {
        /// The producer id, at least 0.
        producer_id: i64,
        /// The producer epoch, 0 to `i16::MAX`.
        producer_epoch: i16,
    },
    /// Idempotent batches inside transactions (Kafka's `transactional.id`): every record is sent
    /// between [`begin`](crate::Producer::begin) and [`commit`](crate::Producer::commit) or
    /// [`abort`](crate::Producer::abort).
    Transactional {
        /// The producer id, at least 0.
        producer_id: i64,
        /// The producer epoch, 0 to `i16::MAX`.
        producer_epoch: i16,
    },
}

impl ProducerMode {
    /// The producer id and epoch, for the idempotent and transactional modes.
    pub fn producer(&self) -> Option<(i64, i16)> {
        match *self {
            ProducerMode::Plain => None,
            ProducerMode::Idempotent {
                producer_id,
                producer_epoch,
            }
            | ProducerMode::Transactional {
                producer_id,
                producer_epoch,
            } => Some((producer_id, producer_epoch)),
        }
    }

    /// Whether the mode is [`ProducerMode::Transactional`].
    pub fn is_transactional(&self) -> bool {
        matches!(self, ProducerMode::Transactional { .. })
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            batch_size: 16_384,
            linger_ms: 5,
            buffer_memory: 32 * 1024 * 1024,
            max_block_ms: 60_000,
            acks: Acks::All,
            mode: ProducerMode::Plain,
        }
    }
}

impl ProducerConfig {
    /// A builder that starts from Kafka's defaults.
    pub fn builder() -> ProducerConfigBuilder {
        ProducerConfigBuilder {
            config: ProducerConfig::default(),
        }
    }

    /// A builder for an idempotent producer ([`ProducerMode::Idempotent`]) with Kafka's other
    /// defaults: each batch carries `producer_id`, `producer_epoch` and its first record's
    /// sequence, continuing from the sequence the log holds for that id and epoch.
    pub fn idempotent(producer_id: i64, producer_epoch: i16) -> ProducerConfigBuilder {
        ProducerConfig::builder().mode(ProducerMode::Idempotent {
            producer_id,
            producer_epoch,
        })
    }

    /// A builder for a transactional producer ([`ProducerMode::Transactional`]) with Kafka's
    /// other defaults: idempotent batches, sent between [`Producer::begin`](crate::Producer::begin)
    /// and [`Producer::commit`](crate::Producer::commit) or
    /// [`Producer::abort`](crate::Producer::abort).
    pub fn transactional(producer_id: i64, producer_epoch: i16) -> ProducerConfigBuilder {
        ProducerConfig::builder().mode(ProducerMode::Transactional {
            producer_id,
            producer_epoch,
        })
    }

    /// Checks every setting; the first invalid one is returned as [`Error::InvalidConfig`].
    pub fn validate(&self) -> Result<()> {
        if let Some((producer_id, producer_epoch)) = self.mode.producer() {
            if producer_id < 0 {
                return Err(invalid(
                    "producer.id",
                    format!("{producer_id} is not a producer id: ids start at 0"),
                ));
            }
            if producer_epoch < 0 {
                return Err(invalid(
                    "producer.epoch",
                    format!("{producer_epoch} is not a producer epoch: epochs start at 0"),
                ));
            }
        }
        if self.batch_size > i32::MAX as u32 {
            return Err(invalid(
                "batch.size",
                format!(
                    "{} exceeds the maximum of {} (i32::MAX, Kafka's limit)",
                    self.batch_size,
                    i32::MAX
                ),
            ));
        }
        if self.buffer_memory == 0 {
            return Err(invalid(
                "buffer.memory",
                "0 bytes would refuse every record; it must be at least 1",
            ));
        }
        for (setting, value) in [
            ("linger.ms", self.linger_ms),
            ("max.block.ms", self.max_block_ms),
        ] {
            if value > i64::MAX as u64 {
                return Err(invalid(
                    setting,
                    format!(
                        "{value} exceeds the maximum of {} (Kafka's type is long)",
                        i64::MAX
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Builds a [`ProducerConfig`]; [`build`](Self::build) validates it.
#[derive(Debug, Clone)]
pub struct ProducerConfigBuilder {
    config: ProducerConfig,
}

impl ProducerConfigBuilder {
    /// Sets [`ProducerConfig::batch_size`] (`batch.size`).
    pub fn batch_size(mut self, batch_size: u32) -> Self {
        self.config.batch_size = batch_size;
        self
    }

    /// Sets [`ProducerConfig::linger_ms`] (`linger.ms`).
    pub fn linger_ms(mut self, linger_ms: u64) -> Self {
        self.config.linger_ms = linger_ms;
        self
    }

    /// Sets [`ProducerConfig::linger_ms`] from a `Duration`, in whole milliseconds (rounded
    /// down, capped at `u64::MAX`, which `build` then rejects).
    pub fn linger(self, linger: Duration) -> Self {
        self.linger_ms(u64::try_from(linger.as_millis()).unwrap_or(u64::MAX))
    }

    /// Sets [`ProducerConfig::buffer_memory`] (`buffer.memory`).
    pub fn buffer_memory(mut self, buffer_memory: u64) -> Self {
        self.config.buffer_memory = buffer_memory;
        self
    }

    /// Sets [`ProducerConfig::max_block_ms`] (`max.block.ms`).
    pub fn max_block_ms(mut self, max_block_ms: u64) -> Self {
        self.config.max_block_ms = max_block_ms;
        self
    }

    /// Sets [`ProducerConfig::max_block_ms`] from a `Duration`, in whole milliseconds.
    pub fn max_block(self, max_block: Duration) -> Self {
        self.max_block_ms(u64::try_from(max_block.as_millis()).unwrap_or(u64::MAX))
    }

    /// Sets [`ProducerConfig::acks`] (`acks`).
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// Sets [`ProducerConfig::mode`]: plain, idempotent or transactional.
    pub fn mode(mut self, mode: ProducerMode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Validates and returns the config.
    pub fn build(self) -> Result<ProducerConfig> {
        self.config.validate()?;
        Ok(self.config)
    }
}

fn invalid(setting: &'static str, why: impl Into<String>) -> Error {
    Error::InvalidConfig {
        setting,
        why: why.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafka_4s() {
        let config = ProducerConfig::default();
        assert_eq!(config.batch_size, 16_384);
        assert_eq!(config.linger_ms, 5);
        assert_eq!(config.buffer_memory, 33_554_432);
        assert_eq!(config.max_block_ms, 60_000);
        assert_eq!(config.acks, Acks::All);
        config.validate().unwrap();
    }

    #[test]
    fn invalid_values_name_their_setting() {
        let setting = |result: Result<ProducerConfig>| match result {
            Err(Error::InvalidConfig { setting, .. }) => setting,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        assert_eq!(
            setting(ProducerConfig::builder().buffer_memory(0).build()),
            "buffer.memory"
        );
        assert_eq!(
            setting(ProducerConfig::builder().batch_size(u32::MAX).build()),
            "batch.size"
        );
        assert_eq!(
            setting(ProducerConfig::builder().linger_ms(u64::MAX).build()),
            "linger.ms"
        );
        assert_eq!(
            setting(ProducerConfig::builder().max_block_ms(u64::MAX).build()),
            "max.block.ms"
        );
        assert_eq!(
            setting(ProducerConfig::idempotent(-1, 0).build()),
            "producer.id"
        );
        assert_eq!(
            setting(ProducerConfig::transactional(0, -1).build()),
            "producer.epoch"
        );
        assert!(matches!(
            "2".parse::<Acks>(),
            Err(Error::InvalidConfig {
                setting: "acks",
                ..
            })
        ));
    }

    #[test]
    fn acks_parse_kafkas_spellings() {
        for (text, acks) in [
            ("0", Acks::Zero),
            ("1", Acks::One),
            ("all", Acks::All),
            ("-1", Acks::All),
        ] {
            assert_eq!(text.parse::<Acks>().unwrap(), acks);
        }
        assert_eq!(Acks::All.to_string(), "all");
    }
}
