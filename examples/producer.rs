//! cargo run --release --example producer -- [DIR]
//!
//! The batching writer: four threads send 100,000 small records one at a time through one
//! [`Producer`] (acks=all), then every handle is awaited, blocking for three of the threads and
//! as a future (with a ten-line executor) for the fourth. It prints how many batches the log
//! got, the records per batch, and the throughput, then reads every record back and checks it
//! against what was sent at its offset.
//! With no DIR it writes into a temporary directory.

mod scratch;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use partlog::{Acks, Log, LogConfig, NewRecord, Producer, ProducerConfig, ReadBound};

const THREADS: usize = 4;
const PER_THREAD: usize = 25_000;

/// A waker that unparks the thread that polls.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread: any runtime would do as well.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = scratch::ScratchDir::new("producer")?;
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| temp.path().to_path_buf(), Into::into);
    let log = Arc::new(Log::open(&dir, LogConfig::default())?);
    let start_offset = log.log_end_offset();
    // Kafka 4's producer defaults: batch.size 16384, linger.ms 5, buffer.memory 32 MiB,
    // max.block.ms 60000, acks=all.
    let producer = Arc::new(Producer::new(
        Arc::clone(&log),
        ProducerConfig::builder().acks(Acks::All).build()?,
    )?);
    let appends_before = log.stats().appends;
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || -> partlog::Result<Vec<i64>> {
                let mut handles = Vec::with_capacity(PER_THREAD);
                for i in 0..PER_THREAD {
                    let value = format!("thread {t} record {i}");
                    let record = NewRecord::new(1_700_000_000_000, None, Some(value.as_bytes()));
                    handles.push(producer.send(&record)?);
                }
                if t == 0 {
                    block_on(async {
                        let mut offsets = Vec::with_capacity(handles.len());
                        for handle in handles {
                            offsets.push(handle.await?);
                        }
                        Ok(offsets)
                    })
                } else {
                    handles.into_iter().map(|h| h.wait()).collect()
                }
            })
        })
        .collect();
    let mut offsets = Vec::new();
    for thread in threads {
        let thread_offsets = thread.join().map_err(|_| "a sender thread panicked")??;
        // Each thread's records are stored in the order it sent them.
        assert!(thread_offsets.windows(2).all(|w| w[0] < w[1]));
        offsets.push(thread_offsets);
    }
    let elapsed = started.elapsed();
    let total = THREADS * PER_THREAD;
    let batches = log.stats().appends - appends_before;
    println!(
        "{total} records from {THREADS} threads in {elapsed:.2?}: {:.0} records/s, all durable \
         (durable offset {})",
        total as f64 / elapsed.as_secs_f64(),
        log.durable_offset()
    );
    println!(
        "{batches} batches, {:.1} records per batch",
        total as f64 / batches as f64
    );

    // Every record, read back in one pass and checked against what each thread sent there.
    let mut expected = std::collections::BTreeMap::new();
    for (t, thread_offsets) in offsets.iter().enumerate() {
        for (i, &offset) in thread_offsets.iter().enumerate() {
            expected.insert(offset, format!("thread {t} record {i}"));
        }
    }
    let mut seen = 0;
    for record in log.records(start_offset, ReadBound::Durable) {
        let record = record?;
        let sent = expected.get(&record.offset).ok_or("a record nobody sent")?;
        assert_eq!(record.value.as_deref(), Some(sent.as_bytes()));
        seen += 1;
    }
    assert_eq!(seen, total, "a record is missing");
    println!(
        "read back all {seen} records at their offsets (from offset {start_offset}) in {}",
        dir.display()
    );
    producer.close()?;
    log.close()?;
    Ok(())
}
