//! What the log reports to its user: events to an [`Observer`], and the reports and counters they
//! carry. Owns `Counters` (`stats.rs`), the counters behind [`LogStats`](crate::LogStats); the
//! report types ([`RecoveryReport`](crate::RecoveryReport) with its
//! [`Discarded`](crate::Discarded), [`RetentionReport`](crate::RetentionReport),
//! [`CompactionStats`](crate::CompactionStats)) are data. Uses nothing else of the log: every
//! folder may use it.
//!
//! [`Observer`]: a hook that hears what the log does (ARCHITECTURE.md §8).
//!
//! Counters ([`LogStats`](crate::LogStats)) say how much happened; an observer hears each event
//! as it happens, on the thread that did the work. That is what a metrics exporter needs, and
//! what a fault-injection test needs to aim a fault ("fail the sync right after the third
//! roll") without guessing operation counts.

pub(in crate::log) mod discarded;
pub(in crate::log) mod reports;
pub(in crate::log) mod stats;

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use crate::error::Error;

use reports::{CompactionStats, RetentionReport};
use stats::RecoveryReport;

/// Receives the log's events. Set it with
/// [`LogConfigBuilder::observer`](crate::LogConfigBuilder::observer).
///
/// Calls come from whichever thread did the work (an appender for a roll, the flusher or a
/// waiter for an fsync, the maintenance thread or a caller for retention and compaction), often
/// while the log holds its writer lock. An observer must therefore return quickly and must not
/// call the log that sent the event: a write or a maintenance call from inside `on_event` can
/// deadlock. Record what you need and act on it elsewhere.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use partlog::{Log, LogConfig, LogEvent, NewRecord, Observer};
///
/// /// Counts fsyncs and their total time, as a metrics exporter would.
/// #[derive(Default)]
/// struct FsyncMeter {
///     fsyncs: AtomicU64,
///     nanos: AtomicU64,
/// }
///
/// impl Observer for FsyncMeter {
///     fn on_event(&self, event: &LogEvent<'_>) {
///         if let LogEvent::Fsync { duration, result: Ok(()), .. } = event {
///             self.fsyncs.fetch_add(1, Ordering::Relaxed);
///             let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
///             self.nanos.fetch_add(nanos, Ordering::Relaxed);
///         }
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let meter = Arc::new(FsyncMeter::default());
/// let config = LogConfig::builder().observer(meter.clone()).build()?;
/// let log = Log::open(dir.path(), config)?;
/// let appended = log.append(&[NewRecord::new(1_700_000_000_000, None, Some(b"hello"))])?;
/// log.wait_durable(appended.last_offset)?; // one group-commit sync
/// assert!(meter.fsyncs.load(Ordering::Relaxed) >= 1);
/// # Ok(())
/// # }
/// ```
pub trait Observer: Send + Sync {
    /// One event. The default ignores it, so an observer implements only what it watches.
    fn on_event(&self, event: &LogEvent<'_>) {
        let _ = event;
    }
}

impl fmt::Debug for dyn Observer {
    // `LogConfig` is `Debug`; an observer need not be, so it prints as a placeholder.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<observer>")
    }
}

/// What an [`Observer`] hears. More kinds may come in later versions, so a `match` on it needs a
/// wildcard arm (the [`Observer`] example matches one kind with `if let`).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum LogEvent<'a> {
    /// The active segment was rolled: `old_base` is sealed, and a new segment at `new_base`
    /// (the log end offset) is active. Its fsync happens later, off the append path.
    Roll {
        /// The base offset of the segment that was sealed.
        old_base: i64,
        /// The base offset of the new active segment.
        new_base: i64,
    },
    /// A sync of log data finished. Most are group-commit syncs: the sealed segments not yet
    /// synced, the directory if a segment was created, and the active `.log`. The others sync
    /// sealed segments alone (after a roll, off the append path, or before a retention pass
    /// makes a deletion durable); they are not counted in
    /// [`LogStats::fsyncs`](crate::LogStats::fsyncs). A failed one is reported either way: it
    /// is what poisoned the log.
    Fsync {
        /// The offsets the sync was to make durable: from the durable offset when it began to
        /// the log end offset it covered. On success every offset below `offsets.end` is
        /// durable (unless a truncation meanwhile cut the log below it).
        offsets: Range<i64>,
        /// How long the sync took.
        duration: Duration,
        /// `Err` if it failed: the log is poisoned, and nothing in `offsets` is durable.
        result: Result<(), &'a Error>,
    },
    /// The log was opened: what recovery found and did (the same as
    /// [`Log::recovery_report`](crate::Log::recovery_report)). Its
    /// [`discarded`](crate::RecoveryReport::discarded) says what the open cut or deleted, if
    /// anything: a torn tail, or corruption under `RecoveryMode::TruncateAtCorruption`.
    Recovery {
        /// The report.
        report: &'a RecoveryReport,
    },
    /// A retention pass ended (from [`Log::enforce_retention`](crate::Log::enforce_retention)
    /// or the maintenance thread).
    Retention {
        /// The segments and bytes deleted, or why the pass failed.
        result: Result<&'a RetentionReport, &'a Error>,
    },
    /// A compaction pass ended.
    Compaction {
        /// What the pass did, or why it failed.
        result: Result<&'a CompactionStats, &'a Error>,
    },
}

/// The log's optional observer: sends an event if one is set.
pub(crate) fn notify(observer: Option<&std::sync::Arc<dyn Observer>>, event: LogEvent<'_>) {
    if let Some(observer) = observer {
        observer.on_event(&event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Silent;
    impl Observer for Silent {}

    #[test]
    fn the_default_ignores_events_and_debug_prints_a_placeholder() {
        let observer: std::sync::Arc<dyn Observer> = std::sync::Arc::new(Silent);
        notify(
            Some(&observer),
            LogEvent::Roll {
                old_base: 0,
                new_base: 10,
            },
        );
        assert_eq!(format!("{observer:?}"), "<observer>");
    }
}
