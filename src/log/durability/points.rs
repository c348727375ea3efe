//! [`DurablePoints`]: the writer mutex's part of durability: `partlog.checkpoint` and the
//! recovery point it last recorded, and what the flush policy counted since the last sync it
//! asked for.

use std::path::Path;

use crate::error::Result;
use crate::log::FlushPolicy;
use crate::log::files::checkpoint::{CheckpointFile, CleanShutdown, DurableWriteError};

/// See the [module docs](self). Behind the writer mutex.
#[derive(Debug)]
pub(in crate::log) struct DurablePoints {
    /// `None` for a log opened read-only, which writes no checkpoint.
    checkpoint: Option<CheckpointFile>,
    /// A persisted lower bound on the durable offset: recovery trusts everything below it.
    recovery_point: i64,
    messages_since_flush: u64,
    bytes_since_flush: u64,
}

impl DurablePoints {
    /// What the open found: the checkpoint file and its recovery point.
    pub(in crate::log) fn new(checkpoint: Option<CheckpointFile>, recovery_point: i64) -> Self {
        DurablePoints {
            checkpoint,
            recovery_point,
            messages_since_flush: 0,
            bytes_since_flush: 0,
        }
    }

    /// The recovery point last recorded (or about to be: the writes below record it first).
    pub(in crate::log) fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    /// Sets the recovery point held in memory, once a slot records it.
    pub(in crate::log) fn set_recovery_point(&mut self, recovery_point: i64) {
        self.recovery_point = recovery_point;
    }

    /// The file's path, for messages (none for a read-only log).
    pub(in crate::log) fn path(&self) -> Option<&Path> {
        self.checkpoint.as_ref().map(CheckpointFile::path)
    }

    /// Whether the clean-shutdown record an open trusted still stands: nothing changed since.
    #[inline]
    pub(in crate::log) fn clean_shutdown_standing(&self) -> bool {
        self.checkpoint
            .as_ref()
            .is_some_and(CheckpointFile::clean_shutdown_standing)
    }

    /// Writes a slot ([`CheckpointFile::write`]); nothing for a read-only log.
    pub(in crate::log) fn write(
        &mut self,
        recovery_point: i64,
        log_start: i64,
        clean: Option<CleanShutdown>,
        durable: bool,
    ) -> Result<()> {
        if let Some(checkpoint) = self.checkpoint.as_mut() {
            checkpoint.write(recovery_point, log_start, clean, durable)?;
        }
        Ok(())
    }

    /// Before a truncation at `cut` changes a byte: a synced slot whose recovery point is at
    /// most `cut` and whose log start is `log_start`, so that recovery never trusts a byte at
    /// or above the cut (ARCHITECTURE.md §3, invariant 15). The recovery point held in memory
    /// comes down with it.
    pub(in crate::log) fn record_cut(&mut self, cut: i64, log_start: i64) -> Result<()> {
        let recovery_point = self.recovery_point.min(cut);
        self.write(recovery_point, log_start, None, true)?;
        self.recovery_point = recovery_point;
        Ok(())
    }

    /// Writes a synced slot ([`CheckpointFile::write_durable`]); nothing for a read-only log.
    pub(in crate::log) fn write_durable(
        &mut self,
        recovery_point: i64,
        log_start: i64,
    ) -> std::result::Result<(), DurableWriteError> {
        match self.checkpoint.as_mut() {
            Some(checkpoint) => checkpoint
                .write_durable(recovery_point, log_start)
                .map(drop),
            None => Ok(()),
        }
    }

    /// [`write_durable`](Self::write_durable) setting the `COMPACTED` flag that every later slot
    /// carries ([`CheckpointFile::write_durable_compacted`]).
    pub(in crate::log) fn write_durable_compacted(
        &mut self,
        recovery_point: i64,
        log_start: i64,
    ) -> std::result::Result<(), DurableWriteError> {
        match self.checkpoint.as_mut() {
            Some(checkpoint) => checkpoint
                .write_durable_compacted(recovery_point, log_start)
                .map(drop),
            None => Ok(()),
        }
    }

    /// Consumes a standing clean-shutdown record with a synced slot at the recovery point
    /// ([`CheckpointFile::consume_clean_shutdown`]).
    pub(in crate::log) fn consume_clean_shutdown(
        &mut self,
        log_start: i64,
    ) -> std::result::Result<(), DurableWriteError> {
        let recovery_point = self.recovery_point;
        match self.checkpoint.as_mut() {
            Some(checkpoint) => checkpoint.consume_clean_shutdown(recovery_point, log_start),
            None => Ok(()),
        }
    }

    /// The log holds no gap any more: later slots clear the `COMPACTED` flag.
    pub(in crate::log) fn forget_compaction(&mut self) {
        if let Some(checkpoint) = self.checkpoint.as_mut() {
            checkpoint.forget_compaction();
        }
    }

    /// Counts an append of `records` and `bytes` against `policy`; `true` when the policy asks
    /// for a sync now (the counts then start again).
    pub(in crate::log) fn count_append(
        &mut self,
        policy: FlushPolicy,
        records: u32,
        bytes: usize,
    ) -> bool {
        let sync_now = match policy {
            FlushPolicy::EveryAppend => true,
            FlushPolicy::EveryMessages(limit) => {
                self.messages_since_flush += u64::from(records);
                self.messages_since_flush >= limit.get()
            }
            FlushPolicy::EveryBytes(limit) => {
                self.bytes_since_flush += bytes as u64;
                self.bytes_since_flush >= limit.get()
            }
            FlushPolicy::Interval(_) | FlushPolicy::OsDecides => false,
        };
        if sync_now {
            self.reset_flush_counts();
        }
        sync_now
    }

    /// Starts the flush policy's counts again (a restart).
    pub(in crate::log) fn reset_flush_counts(&mut self) {
        self.messages_since_flush = 0;
        self.bytes_since_flush = 0;
    }
}
