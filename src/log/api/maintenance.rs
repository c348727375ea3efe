//! The public methods of [`Log`](crate::Log) for maintenance; see the [`api`](super) module.

use crate::error::{Error, Result};
use crate::log::{CompactionOptions, CompactionSchedule, CompactionStats, Log, RetentionReport};

impl Log {
    /// Runs one retention pass now: deletes the oldest segments that lie wholly below the log
    /// start offset, then (when `cleanup.policy` has `delete`) those over `retention.bytes`, then
    /// those older than `retention.ms`, each rule walking from the oldest segment and stopping at
    /// the first one it keeps. If the active segment goes too, the log first rolls a new, empty
    /// one at the log end offset. The records below the new log start offset are made durable,
    /// and the new start is in a synced checkpoint, before any file is touched. No producer is
    /// forgotten: one whose data goes stays until `producer.id.expiration.ms` (KIP-360).
    ///
    /// Appends wait at most for a producer snapshot's fsync, the checkpoint fsync and one directory
    /// fsync; readers never wait, and a reader holding data of a deleted segment keeps reading it:
    /// the files are renamed `*.deleted` and removed once no reader pins them. A log whose
    /// retention is set also runs this in the background, every
    /// [`LogConfig::retention_check_interval_ms`](crate::LogConfig::retention_check_interval_ms)
    /// (Kafka's 5 minutes by default).
    pub fn enforce_retention(&self) -> Result<RetentionReport> {
        self.shared.check_writable()?;
        self.shared.enforce_retention()
    }

    /// Runs one compaction pass with the default [`CompactionOptions`]: see
    /// [`compact_with`](Self::compact_with).
    ///
    /// With `cleanup.policy` compact (`CleanupPolicy::COMPACT`, or compact plus delete), compaction
    /// keeps, for every key, only the record with the highest offset. Offsets never change: a
    /// compacted log has gaps, and a read that lands in one returns the next record. Records need
    /// keys (an unkeyed append is refused with a clear error).
    ///
    /// ```no_run
    /// # use partlog::{CleanupPolicy, CompactionOptions, Log, LogConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = "/tmp/users-0";
    /// let config = LogConfig::builder()
    ///     .cleanup_policy(CleanupPolicy::COMPACT)
    ///     .min_cleanable_dirty_ratio(0.5)          // min.cleanable.dirty.ratio (Kafka's default)
    ///     .min_compaction_lag_ms(0)                // records younger than this stay uncompacted
    ///     .max_compaction_lag_ms(24 * 3600 * 1000) // ... and none stays uncompacted longer than this
    ///     .retention_check_interval_ms(60_000)     // a maintenance thread runs passes when due
    ///     .build()?;
    /// let log = Log::open(dir, config)?;
    ///
    /// if log.compaction_due()? {                   // or log.compaction_schedule()? for the figures
    ///     let stats = log.compact()?;              // one pass now, due or not
    ///     println!("{} records removed, {} segments merged into {}",
    ///              stats.records_removed, stats.segments_cleaned, stats.segments_written);
    /// }
    /// let stats = log.stats();                     // compaction_passes, compaction_failed_passes,
    ///                                              // compaction_uncleanable_from/_bytes
    /// # let _ = (stats, CompactionOptions::default());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// - **When a pass runs.** `log.compact()` runs one whenever it is called. The maintenance
    ///   thread (`retention.check.interval.ms`; off by default) runs one at each interval when one
    ///   is due: when the dirty bytes (segments not yet compacted) are at least
    ///   `min.cleanable.dirty.ratio` of the cleanable bytes, or when a dirty segment's first batch
    ///   is older than `max.compaction.lag.ms`. Segments younger than `min.compaction.lag.ms` and
    ///   the active segment are never cleaned. Time is the log's `Clock`. What is clean survives a
    ///   reopen (in `partlog.cleaner-checkpoint`), so a reopened log does not count
    ///   everything as dirty again.
    /// - **Tombstones** (a null value) are kept for `delete.retention.ms` (one day) after the pass
    ///   that first recopies them, then removed by the next pass: a consumer reading from the start
    ///   sees the delete if it reads within that time.
    /// - **Idempotent producers.** The batch holding a producer's last record stays (as an empty
    ///   batch header when all its records go) while the log's producer state holds the
    ///   producer, so that its last sequence and epoch survive; it goes once the producer expires
    ///   (`producer.id.expiration.ms`, one day by default), as in Kafka.
    /// - **Transactions.** Compaction cleans only below the last stable offset (the segment
    ///   holding it waits). Data of aborted transactions is removed whatever its keys, and never
    ///   hides an older committed record. A COMMIT or ABORT marker stays while data of its
    ///   transaction is left; then, like a tombstone, it stays `delete.retention.ms` more and
    ///   goes. `read_committed` readers therefore never see an aborted record come back.
    /// - **Small segments are merged** as Kafka does it: consecutive cleaned segments become one
    ///   while it stays within `segment.bytes`, `segment.index.bytes` and the i32 range of relative
    ///   offsets, so a fully superseded segment leaves no empty file behind.
    /// - **Bounded memory.** The key map holds at most `CompactionOptions::max_map_keys` keys (one
    ///   million by default); with more, a pass cleans as far as the map reached and the next one
    ///   goes on.
    /// - **Crash safety.** Each group of segments is rewritten as `.cleaned`, renamed `.swap`, then
    ///   swapped in, with a directory fsync after each step; open completes or discards what a
    ///   crash left, so each group is wholly old or wholly new (tested by crashing the simulator
    ///   before every storage operation of a pass, on a three-segment group).
    /// - **Readers and appenders keep going** during a pass; a reader on a replaced segment
    ///   finishes on it.
    /// - **A failed pass** (an I/O error) is counted in `stats().compaction_failed_passes`, leaves
    ///   nothing behind, and the maintenance thread retries at its next interval.
    ///
    /// Where an open transaction holds a pass back is reported as
    /// `stats().compaction_uncleanable_from` and `compaction_uncleanable_bytes` (and in
    /// `CompactionStats`).
    ///
    /// # From the command line
    ///
    /// ```sh
    /// # A compacted log: every line needs a key; a value of DELETE makes a tombstone.
    /// printf 'user1=a\nuser2=b\nuser1=c\nuser2=DELETE\n' |
    ///   partlog produce /tmp/users-0 --key-separator = --cleanup-policy compact --tombstone-value DELETE
    ///
    /// partlog roll /tmp/users-0      # compaction cleans sealed segments only: seal the active one
    /// partlog compact /tmp/users-0                            # one pass, due or not; prints its stats
    /// partlog compact /tmp/users-0 --delete-retention-ms 0    # tombstones get a horizon of now
    /// partlog compact /tmp/users-0 --min-lag-ms 3600000       # leave the last hour alone
    /// partlog verify /tmp/users-0                             # the stored cleanup.policy applies
    /// ```
    ///
    /// After the roll, the first `partlog compact` prints (user1=a and user2=b went; the
    /// tombstone stays until its delete horizon has passed):
    ///
    /// ```text
    /// compacted /tmp/users-0
    /// segments: 2 -> 2 (1 replaced by 1)
    /// cleaned up to offset: 4
    /// bytes read: 590
    /// bytes written: 150
    /// records removed: 2
    /// tombstones removed: 0
    /// uncleanable: none
    /// duration: 0.038 s
    /// ```
    ///
    /// Without the roll, the four records sit in the active segment, which no pass touches:
    /// the report then ends with a `nothing to clean:` line that says so. That line explains
    /// every pass that cleaned no segment.
    ///
    /// `--segment-bytes N` (with `--allow-small-segments` below 1 MiB) sets the size up to which
    /// segments are merged. The tool's `crates/partlog-cli/tests/cli_compact.rs` runs the
    /// validator kit's `check.sh` and Kafka's DumpLogSegments on every segment
    /// of such a log (repeating keys, tombstones, merged segments, offset gaps).
    // FORMAT.md §6.3 (the cleaner checkpoint); CONTRIBUTING.md (the validator kit).
    pub fn compact(&self) -> Result<CompactionStats> {
        self.shared.compact()
    }

    /// Runs one compaction pass over the cleanable range (the module docs of `compaction` and
    /// [`compaction_schedule`](Self::compaction_schedule) define it; the active segment is never
    /// cleaned), whether or not one is due: for every key only the record with the highest
    /// offset stays, and offsets never change (gaps remain). A batch keeps its base and last
    /// offset, producer fields, transactional flag, timestamp type and codec; the batch holding
    /// an active producer's last record stays as an empty header when its records all go
    /// (Kafka's RETAIN_EMPTY). Consecutive segments are
    /// merged into one while the result stays within `segment.bytes`, `segment.index.bytes`
    /// and the i32 range of relative offsets.
    ///
    /// Tombstones: the pass that first recopies one writes its delete horizon
    /// (now + `delete.retention.ms`) into the batch; a pass at or after the horizon drops it.
    ///
    /// Crash safety: each group's cleaned copy is written as `<base>.log.cleaned`, fsynced, renamed
    /// `.swap`, and swapped in (old files renamed `.deleted`, `.swap` renamed `.log`) with a
    /// directory fsync after each step; [`Log::open`](crate::Log::open) completes or discards what
    /// a crash left, so each group is wholly old or wholly new. A reader on an old segment finishes
    /// on it.
    ///
    /// Transactions: the pass cleans only below the segment holding the last stable offset
    /// (reported in [`CompactionStats::uncleanable_from`] when it ends the range); data of
    /// aborted transactions goes, and COMMIT and ABORT markers go once no data of their
    /// transaction is left and their delete horizon (set as for tombstones) has passed. The
    /// module docs of `compaction` give Kafka's rules.
    ///
    /// Blocks on the reads, writes and fsyncs of the pass. Appends wait only while a cleaned
    /// segment is swapped in (a few renames and two directory fsyncs); readers wait only for the
    /// renames, never for an fsync. Fails with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) unless `cleanup.policy` includes
    /// compact. A pass that fails otherwise is counted in
    /// [`LogStats::compaction_failed_passes`](crate::LogStats::compaction_failed_passes). If the
    /// swap of a group fails half-way, the log poisons itself, and reopening it completes the swap.
    pub fn compact_with(&self, options: CompactionOptions) -> Result<CompactionStats> {
        self.shared.check_writable()?;
        self.shared.compact_with(options)
    }

    /// Whether a compaction pass is due, and the figures that decide it: the clean and dirty
    /// bytes of the cleanable range, their ratio against `min.cleanable.dirty.ratio`, and
    /// whether `max.compaction.lag.ms` forces a pass. Time is the log's clock. Never due unless
    /// `cleanup.policy` includes compact. Waits for a pass that is running.
    ///
    /// Opens the dirty segments of the cleanable range (an O(1) check each) to read their
    /// timestamps; reads nothing else.
    pub fn compaction_schedule(&self) -> Result<CompactionSchedule> {
        if self.shared.view.is_closed() {
            return Err(Error::Closed);
        }
        self.shared.compaction_schedule()
    }

    /// Whether a compaction pass is due: [`compaction_schedule`](Self::compaction_schedule)'s
    /// verdict.
    pub fn compaction_due(&self) -> Result<bool> {
        Ok(self.compaction_schedule()?.due)
    }
}
