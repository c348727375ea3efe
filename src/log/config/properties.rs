//! `partlog.properties`: the per-log settings stored with the log (FORMAT.md §6.4), as Kafka
//! keeps a topic's configs apart from the broker's. Which settings are per-log, how a stored
//! value meets the caller's [`LogConfig`] at open, and the file's durable write.
//!
//! The rule at open (ARCHITECTURE.md §7, "Stored settings"): a per-log setting the caller left
//! unset takes the stored value; one the caller set explicitly is applied and, by a writable
//! open with [`LogConfig::store_settings`], stored, as `kafka-configs --alter` would. Only the
//! settings that differ from partlog's defaults are in the file.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::TimestampType;
use crate::storage::{OpenMode, Storage};

use super::{CleanupPolicy, CompressionType, LogConfig};

/// The file that holds a log's stored settings, in Java properties format with Kafka's names.
/// No rule of Kafka's loader matches the name, so a broker taking the directory over ignores it.
pub const PROPERTIES_FILE_NAME: &str = "partlog.properties";

/// The temporary name a new `partlog.properties` is written under before its rename.
const PROPERTIES_TEMP_NAME: &str = "partlog.properties.tmp";

/// One per-log setting: its Kafka name, the `LogConfig` field (what the builder marks as set),
/// and its value as text both ways.
struct PerLogSetting {
    key: &'static str,
    field: &'static str,
    get: fn(&LogConfig) -> String,
    set: fn(&mut LogConfig, &str) -> Result<()>,
}

fn parse_int<T: std::str::FromStr>(key: &'static str, value: &str) -> Result<T> {
    value.trim().parse::<T>().map_err(|_| Error::InvalidConfig {
        setting: key,
        why: format!("{value:?} is not a number"),
    })
}

macro_rules! numeric {
    ($key:literal, $field:ident) => {
        PerLogSetting {
            key: $key,
            field: stringify!($field),
            get: |config| config.$field.to_string(),
            set: |config, value| {
                config.$field = parse_int($key, value)?;
                Ok(())
            },
        }
    };
}

/// The settings that belong to a log rather than to the process that opens it: Kafka's topic
/// configs. partlog's own settings (the storage, the clock, the flush policy, the recovery
/// mode...) are the opener's choice and are never stored.
const PER_LOG: &[PerLogSetting] = &[
    PerLogSetting {
        key: "cleanup.policy",
        field: "cleanup_policy",
        get: |config| config.cleanup_policy.to_string(),
        set: |config, value| {
            config.cleanup_policy = CleanupPolicy::from_kafka_str(value)?;
            Ok(())
        },
    },
    PerLogSetting {
        key: "compaction.strategy",
        field: "compaction_strategy",
        get: |config| config.compaction_strategy.clone(),
        set: |config, value| {
            config.compaction_strategy = value.trim().to_string();
            Ok(())
        },
    },
    PerLogSetting {
        key: "compaction.strategy.header",
        field: "compaction_strategy_header",
        get: |config| config.compaction_strategy_header.clone(),
        set: |config, value| {
            config.compaction_strategy_header = value.trim().to_string();
            Ok(())
        },
    },
    PerLogSetting {
        key: "compression.type",
        field: "compression_type",
        get: |config| config.compression_type.to_string(),
        set: |config, value| {
            config.compression_type = CompressionType::from_kafka_str(value)?;
            Ok(())
        },
    },
    numeric!("delete.retention.ms", delete_retention_ms),
    numeric!("index.interval.bytes", index_interval_bytes),
    numeric!("max.compaction.lag.ms", max_compaction_lag_ms),
    numeric!("max.message.bytes", max_message_bytes),
    numeric!(
        "message.timestamp.after.max.ms",
        message_timestamp_after_max_ms
    ),
    numeric!(
        "message.timestamp.before.max.ms",
        message_timestamp_before_max_ms
    ),
    PerLogSetting {
        key: "message.timestamp.type",
        field: "message_timestamp_type",
        get: |config| config.message_timestamp_type.to_string(),
        set: |config, value| {
            config.message_timestamp_type = match value.trim() {
                "CreateTime" => TimestampType::CreateTime,
                "LogAppendTime" => TimestampType::LogAppendTime,
                other => {
                    return Err(Error::InvalidConfig {
                        setting: "message.timestamp.type",
                        why: format!("{other:?} is not CreateTime or LogAppendTime"),
                    });
                }
            };
            Ok(())
        },
    },
    numeric!("min.cleanable.dirty.ratio", min_cleanable_dirty_ratio),
    numeric!("min.compaction.lag.ms", min_compaction_lag_ms),
    numeric!("preallocate", preallocate),
    numeric!("retention.bytes", retention_bytes),
    numeric!("retention.ms", retention_ms),
    numeric!("segment.bytes", segment_bytes),
    numeric!("segment.index.bytes", segment_index_bytes),
    numeric!("segment.jitter.ms", segment_jitter_ms),
    numeric!("segment.ms", segment_ms),
];

fn per_log(key: &str) -> Option<(usize, &'static PerLogSetting)> {
    PER_LOG
        .iter()
        .enumerate()
        .find(|(_, setting)| setting.key == key)
}

/// The Kafka names of the per-log settings, the ones `partlog.properties` may hold, sorted.
pub fn per_log_setting_names() -> impl Iterator<Item = &'static str> {
    PER_LOG.iter().map(|setting| setting.key)
}

/// Which per-log settings a [`LogConfig`] was given explicitly through its builder, one bit per
/// entry of the per-log table. A field changed on the struct itself counts as set when it
/// differs from the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExplicitSettings(u32);

impl ExplicitSettings {
    /// Marks the per-log setting stored in `field` as set; other fields are not per-log.
    pub(crate) fn mark_field(&mut self, field: &str) {
        if let Some(index) = PER_LOG.iter().position(|setting| setting.field == field) {
            self.0 |= 1 << index;
        } else if field == "retention_check_interval_ms" {
            self.0 |= Self::RETENTION_CHECK_INTERVAL;
        }
    }

    /// Not a per-log setting, but whether the caller gave it decides whether a log without
    /// retention runs a maintenance thread ([`LogConfig::runs_maintenance`]). The top bit: the
    /// per-log settings take the low bits (checked below, when this compiles).
    const RETENTION_CHECK_INTERVAL: u32 = 1 << 31;

    /// Whether `retention_check_interval_ms` was given to the builder.
    pub(crate) fn retention_check_interval_set(self) -> bool {
        self.0 & Self::RETENTION_CHECK_INTERVAL != 0
    }

    /// Marks the per-log setting named `key` (Kafka's name) as set.
    fn mark_key(&mut self, key: &str) {
        if let Some((index, _)) = per_log(key) {
            self.0 |= 1 << index;
        }
    }

    fn contains(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }
}

// The per-log settings' bits stay clear of `RETENTION_CHECK_INTERVAL`, the top one.
const _: () = assert!(PER_LOG.len() < 31);

impl LogConfig {
    /// The value of the per-log setting `key` (Kafka's name, as `partlog.properties` and
    /// `kafka-configs` spell it), as text; `None` for a name that is not a per-log setting.
    pub fn setting(&self, key: &str) -> Option<String> {
        per_log(key).map(|(_, setting)| (setting.get)(self))
    }

    pub(crate) fn set_setting_text(&mut self, key: &str, value: &str) -> Result<()> {
        let (_, setting) = per_log(key).ok_or_else(|| unknown_setting(key))?;
        (setting.set)(self, value)?;
        self.explicit.mark_key(key);
        Ok(())
    }
}

fn unknown_setting(key: &str) -> Error {
    Error::InvalidArgument {
        why: format!(
            "{key:?} is not a per-log setting; these are: {}",
            per_log_setting_names().collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Reads `partlog.properties` in `dir`: the stored settings, by Kafka name, as text. A missing
/// file is no settings. A line that is not `key=value`, names an unknown setting or holds a bad
/// value is [`Error::InvalidConfig`] naming the file, so that a hand edit gone wrong is found at
/// once instead of silently ignored.
pub fn read_stored_settings(storage: &dyn Storage, dir: &Path) -> Result<BTreeMap<String, String>> {
    let path = dir.join(PROPERTIES_FILE_NAME);
    if !storage.exists(&path)? {
        return Ok(BTreeMap::new());
    }
    let file = storage.open(&path, OpenMode::Read)?;
    let len = usize::try_from(file.len()?).unwrap_or(usize::MAX);
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, 0)?;
    let text = String::from_utf8(bytes).map_err(|_| Error::InvalidConfig {
        setting: PROPERTIES_FILE_NAME,
        why: format!("{} is not UTF-8 text", path.display()),
    })?;
    let mut settings = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with(['#', '!']) {
            continue;
        }
        let (key, value) = line
            .split_once(['=', ':'])
            .ok_or_else(|| Error::InvalidConfig {
                setting: PROPERTIES_FILE_NAME,
                why: format!(
                    "line {} of {} is not key=value: {line:?}",
                    number + 1,
                    path.display()
                ),
            })?;
        let (key, value) = (key.trim(), value.trim());
        let Some((_, setting)) = per_log(key) else {
            return Err(Error::InvalidConfig {
                setting: PROPERTIES_FILE_NAME,
                why: format!(
                    "line {} of {}: {}",
                    number + 1,
                    path.display(),
                    unknown_setting(key)
                ),
            });
        };
        // Checked here so that a bad value names the file it came from.
        let mut probe = LogConfig::for_tests();
        (setting.set)(&mut probe, value).map_err(|error| Error::InvalidConfig {
            setting: setting.key,
            why: format!("{} holds {key}={value}: {error}", path.display()),
        })?;
        settings.insert(key.to_owned(), value.to_owned());
    }
    Ok(settings)
}

/// Writes `settings` as `partlog.properties` durably: a temporary file, fsynced, renamed over
/// the old one, and the directory fsynced, as the cleaner checkpoint is written. An empty map
/// writes a file with no settings (so that a reset to the defaults also survives a crash).
pub fn write_stored_settings(
    storage: &dyn Storage,
    dir: &Path,
    settings: &BTreeMap<String, String>,
) -> Result<()> {
    let mut text = String::from(
        "# partlog.properties: this log's settings that differ from partlog's defaults, with\n\
         # Kafka's topic config names. Change them with `partlog config DIR --set key=value`.\n",
    );
    for (key, value) in settings {
        text.push_str(key);
        text.push('=');
        text.push_str(value);
        text.push('\n');
    }
    crate::storage::replace_file_durably(
        storage,
        dir,
        PROPERTIES_TEMP_NAME,
        PROPERTIES_FILE_NAME,
        text.as_bytes(),
    )
}

/// The settings of `config` that differ from partlog's defaults, by Kafka name.
fn non_default_settings(config: &LogConfig) -> BTreeMap<String, String> {
    let defaults = LogConfig::default();
    PER_LOG
        .iter()
        .filter_map(|setting| {
            let value = (setting.get)(config);
            (value != (setting.get)(&defaults)).then(|| (setting.key.to_owned(), value))
        })
        .collect()
}

/// Merges the stored settings of `dir` into `config` at open, and stores the result when a
/// writable open changed it (see the module docs). Returns the config the log runs with.
pub(crate) fn apply_stored_settings(
    storage: &dyn Storage,
    dir: &Path,
    mut config: LogConfig,
    read_only: bool,
) -> Result<LogConfig> {
    let stored = read_stored_settings(storage, dir)?;
    let defaults = LogConfig::default();
    for (index, setting) in PER_LOG.iter().enumerate() {
        let explicit =
            config.explicit.contains(index) || (setting.get)(&config) != (setting.get)(&defaults);
        if explicit {
            continue;
        }
        if let Some(value) = stored.get(setting.key) {
            (setting.set)(&mut config, value)?;
            if setting.key == "segment.bytes" {
                // It passed validation when it was stored, possibly by a test-sized config.
                config.allow_small_segments();
            }
        }
    }
    config.validate().map_err(|error| match error {
        Error::InvalidConfig { setting, why } => Error::InvalidConfig {
            setting,
            why: format!("{why} (with the settings stored in {PROPERTIES_FILE_NAME})"),
        },
        other => other,
    })?;
    let wanted = non_default_settings(&config);
    if !read_only && config.store_settings && wanted != stored {
        write_stored_settings(storage, dir, &wanted)?;
    }
    Ok(config)
}
