//! `partlog config DIR`: the settings stored with the log (`partlog.properties`), printed or
//! changed one at a time, as `kafka-configs --describe` and `--alter` do for a topic.

use std::path::PathBuf;

use clap::Args;
use partlog::LogConfig;
use partlog::unstable::{OsStorage, per_log_setting_names, read_stored_settings};

use crate::{CliError, Outcome};

pub const EXAMPLES: &str = "\
Examples:
  partlog config /tmp/users-0                                # the stored settings, key=value
  partlog config /tmp/users-0 --all                          # every per-log setting in force
  partlog config /tmp/users-0 --set cleanup.policy=compact   # like kafka-configs --alter
  partlog config /tmp/orders-0 --set retention.ms=604800000 --set retention.bytes=1073741824
  partlog config /tmp/orders-0 --delete retention.ms         # back to partlog's default

A log keeps the settings that differ from partlog's defaults in partlog.properties, in Java
properties format with Kafka's topic config names, written durably. Every partlog command, and
every program that opens the log with the crate, applies them to the settings it does not set
itself. --set and --delete open the log for writing (its exclusive lock: they fail while
another process writes it) and check each value as Log::open would. A Kafka broker that takes
the directory over ignores the file: give the topic the same configs with kafka-configs.";

/// Arguments of `partlog config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The log directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Store KEY=VALUE (a Kafka topic config name, such as cleanup.policy or retention.ms);
    /// repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_assignment)]
    pub set: Vec<(String, String)>,

    /// Remove KEY from the stored settings: the log goes back to partlog's default; repeatable.
    #[arg(long = "delete", value_name = "KEY")]
    pub delete: Vec<String>,

    /// Print every per-log setting in force, stored or default, marked as such.
    #[arg(long)]
    pub all: bool,
}

fn parse_assignment(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("{value:?} is not KEY=VALUE")),
    }
}

/// Runs `partlog config`.
pub fn run(args: &ConfigArgs) -> Result<Outcome, CliError> {
    crate::require_dir(&args.dir)?;
    if !args.set.is_empty() || !args.delete.is_empty() {
        alter(args)?;
    }
    let stored = read_stored_settings(&OsStorage::new(), &args.dir)?;
    if args.all {
        let config = crate::stored_config_builder(&args.dir)?.build()?;
        for key in per_log_setting_names() {
            let value = config.setting(key).unwrap_or_default();
            let source = if stored.contains_key(key) {
                "stored"
            } else {
                "default"
            };
            outln!("{key}={value} ({source})");
        }
    } else {
        for (key, value) in &stored {
            outln!("{key}={value}");
        }
    }
    Ok(Outcome::Done)
}

/// Applies `--set` and `--delete` through a writable open, which checks and stores them.
fn alter(args: &ConfigArgs) -> Result<(), CliError> {
    if crate::segment_bases(&args.dir)?.is_empty() {
        return Err(CliError::new(format!(
            "{} holds no log (no .log file): create it first, with partlog produce",
            args.dir.display()
        )));
    }
    let defaults = LogConfig::default();
    let mut builder = LogConfig::builder();
    for (key, value) in &args.set {
        builder = builder.set(key, value)?;
    }
    for key in &args.delete {
        let default = defaults.setting(key).ok_or_else(|| {
            CliError::new(format!(
                "{key:?} is not a per-log setting; these are: {}",
                per_log_setting_names().collect::<Vec<_>>().join(", ")
            ))
        })?;
        builder = builder.set(key, &default)?;
    }
    let log = crate::open_writable(&args.dir, builder.build()?)?;
    log.close()?;
    Ok(())
}
