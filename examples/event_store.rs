//! An event-sourced key-value store: every change is an event in a compacted log, and the
//! current state (the latest value per key) is materialised from it, and rebuilt from it on
//! restart.
//!
//! ```sh
//! cargo run --release --example event_store            # 3000 events in a temporary directory
//! cargo run --release --example event_store -- 200     # fewer events (CI runs it so)
//! ```
//!
//! `cleanup.policy=compact` keeps at least the last record of every key, so the log stays about
//! as large as the state, and a tombstone (a null value) deletes a key. Compaction is what
//! `Log::compact` does (the `partlog compact` command runs it too); it cleans sealed segments
//! only, so this example rolls the active one first (`Log::roll`), runs one pass, and checks
//! that the state rebuilt afterwards is the same. It also keeps, for every key, the offset of
//! its latest event, and reads an event back by that offset alone (`Log::read_record_into`, a
//! point read: one record, borrowed, no scan). It uses the stable API only.

mod scratch;

use std::collections::BTreeMap;
use std::path::Path;

use partlog::{
    CleanupPolicy, FlushPolicy, Log, LogConfig, NewRecord, ReadBound, ReadOptions, RecordRead,
};

/// The materialised state: the latest value of every live key, and the next offset to apply.
struct Store {
    log: Log,
    state: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The offset of each live key's latest event.
    offsets: BTreeMap<Vec<u8>, i64>,
    applied: i64,
}

impl Store {
    /// Opens the log and rebuilds the state by replaying it from the start.
    fn open(dir: &Path) -> partlog::Result<Store> {
        let config = LogConfig::builder()
            .cleanup_policy(CleanupPolicy::COMPACT)
            // The OS writes back (Kafka's default): an event survives a crash of this process
            // once `put` returns. FlushPolicy::EveryAppend would make it survive a machine
            // crash too, at one fsync per event.
            .flush_policy(FlushPolicy::OsDecides)
            .build()?;
        let log = Log::open(dir, config)?;
        let mut store = Store {
            applied: log.log_start_offset(),
            log,
            state: BTreeMap::new(),
            offsets: BTreeMap::new(),
        };
        store.catch_up()?;
        Ok(store)
    }

    /// Applies every event not applied yet. Replays are idempotent: a later value wins.
    fn catch_up(&mut self) -> partlog::Result<()> {
        for record in self.log.records(self.applied, ReadBound::LogEnd) {
            let record = record?;
            let Some(key) = record.key else { continue };
            match record.value {
                Some(value) => {
                    self.offsets.insert(key.clone(), record.offset);
                    self.state.insert(key, value);
                }
                None => {
                    self.offsets.remove(&key);
                    self.state.remove(&key);
                }
            };
            self.applied = record.offset + 1;
        }
        Ok(())
    }

    /// The latest value of `key`, read from the log by its offset: one point read, whose
    /// record borrows `read`'s buffers (keep one and pass it again).
    fn value_from_log<'r>(
        &self,
        key: &str,
        read: &'r mut RecordRead,
    ) -> partlog::Result<Option<&'r [u8]>> {
        let Some(&offset) = self.offsets.get(key.as_bytes()) else {
            return Ok(None);
        };
        let record = self
            .log
            .read_record_into(offset, ReadOptions::default(), read)?;
        Ok(record.and_then(|record| record.value))
    }

    /// Records a change in the log, stamped with the current time, then applies it.
    fn put(&mut self, key: &str, value: Option<&str>) -> partlog::Result<()> {
        self.log.append(&[NewRecord::now(
            Some(key.as_bytes()),
            value.map(str::as_bytes),
        )])?;
        self.catch_up()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let events: i64 = std::env::args().nth(1).map_or(Ok(3_000), |n| n.parse())?;
    let temp = scratch::ScratchDir::new("event_store")?;
    let dir = temp.path().join("accounts-0");

    let mut store = Store::open(&dir)?;
    for n in 0..events {
        let account = format!("account-{}", n % 100);
        if n % 37 == 36 {
            store.put(&account, None)?; // closed
        } else {
            store.put(&account, Some(&format!("balance {}", n * 10)))?;
        }
    }
    let before = store.state.clone();
    println!(
        "{} events, {} live accounts, log offsets [{}, {})",
        events,
        before.len(),
        store.log.log_start_offset(),
        store.log.log_end_offset()
    );

    // Compaction drops every record a later one with the same key supersedes, in sealed
    // segments: the roll seals the one the events went to.
    store.log.roll()?;
    let compacted = store.log.compact()?;
    println!(
        "compaction: {} records removed from {} segments, {} bytes read, {} written",
        compacted.records_removed,
        compacted.segments_cleaned,
        compacted.bytes_read,
        compacted.bytes_written
    );
    store.log.close()?;
    drop(store);

    // A restart rebuilds the same state from the (compacted) log.
    let store = Store::open(&dir)?;
    assert_eq!(store.state, before, "the rebuilt state differs");
    let records = store.log.records(0, ReadBound::LogEnd).count();
    // Every live account's value, read back by its offset alone.
    let mut read = RecordRead::new();
    for (key, value) in &store.state {
        let key = std::str::from_utf8(key)?;
        let from_log = store.value_from_log(key, &mut read)?;
        assert_eq!(
            from_log,
            Some(value.as_slice()),
            "{key}: the point read differs"
        );
    }
    println!(
        "rebuilt {} accounts from {records} records (of {events} events) after a restart",
        store.state.len()
    );
    store.log.close()?;
    Ok(())
}
