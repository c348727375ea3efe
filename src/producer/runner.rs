//! Where a [`Producer`](super::Producer)'s sender runs: a thread of its own, or a task of the
//! [`Workers`](crate::Workers) pool its log was opened with. Either way the sender's body is
//! `sender.rs`; this file only starts, wakes and stops it.

use std::sync::OnceLock;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::sync::thread::JoinHandle;
use crate::sync::{Condvar, MutexGuard};
use crate::workers::{Lane, Next, Task, TaskHandle};

use super::Inner;
use super::accumulator::Accumulator;
use super::sender;

/// How `send`, `flush`, `close` and memory pressure wake the sender.
#[derive(Debug)]
pub(super) enum SenderWake {
    /// The sender thread waits on this condvar, under the accumulator's lock.
    Thread(Condvar),
    /// The sender is a pool task: a wake schedules a run (set once, at registration, before
    /// any `send`).
    Pool(OnceLock<TaskHandle>),
}

impl SenderWake {
    /// The wake of a sender that runs on its log's pool if it has one.
    pub(super) fn for_pool(pooled: bool) -> SenderWake {
        if pooled {
            SenderWake::Pool(OnceLock::new())
        } else {
            SenderWake::Thread(Condvar::new())
        }
    }

    /// Tells the sender there may be work: it looks at the accumulator again. A wake during a
    /// pool run makes the pool run the task again when the run ends, so none is lost.
    pub(super) fn wake(&self) {
        match self {
            SenderWake::Thread(work) => {
                work.notify_one();
            }
            SenderWake::Pool(handle) => {
                if let Some(handle) = handle.get() {
                    handle.wake();
                }
            }
        }
    }

    /// The sender thread's wait for a wake. A pool task never waits: it returns instead.
    pub(super) fn wait(&self, acc: &mut MutexGuard<'_, Accumulator>) {
        if let SenderWake::Thread(work) = self {
            work.wait(acc);
        }
    }

    /// The sender thread's wait for a wake or `timeout`.
    pub(super) fn wait_for(&self, acc: &mut MutexGuard<'_, Accumulator>, timeout: Duration) {
        if let SenderWake::Thread(work) = self {
            work.wait_for(acc, timeout);
        }
    }
}

/// The running sender, as `close` stops it.
#[derive(Debug)]
pub(super) enum SenderRunner {
    /// Joined once it has drained.
    Thread(JoinHandle<()>),
    /// Cancelled once it has drained (it has left the pool by then; the cancel waits for the
    /// pool to drop its reference to the producer).
    Pool(TaskHandle),
}

impl SenderRunner {
    /// Starts the sender of `inner`: on its log's pool if it has one, else on a thread named
    /// `partlog-sender:<dir>`.
    pub(super) fn start(inner: &std::sync::Arc<Inner>) -> Result<SenderRunner> {
        if let (Some(workers), SenderWake::Pool(slot)) =
            (&inner.log.config().workers, &inner.sender_wake)
        {
            let task = crate::sync::Arc::new(SenderTask {
                inner: std::sync::Arc::clone(inner),
            });
            // Nothing is queued yet: the first `send` wakes it.
            let handle = workers.register(task as crate::sync::Arc<dyn Task>, Duration::MAX);
            // Set once: `inner` is new and no one else sees it yet.
            let _ = slot.set(handle.clone());
            return Ok(SenderRunner::Pool(handle));
        }
        let dir = inner.log.dir().to_path_buf();
        let thread_inner = std::sync::Arc::clone(inner);
        crate::sync::thread::Builder::new()
            .name(format!("partlog-sender:{}", dir.display()))
            .spawn(move || sender::run(&thread_inner))
            .map(SenderRunner::Thread)
            .map_err(|e| Error::io(&dir, e))
    }

    /// Stops the sender once it has drained (the caller waits for that first): joins the
    /// thread, or cancels the task so that it never runs again.
    pub(super) fn stop(self, inner: &Inner) {
        match self {
            SenderRunner::Thread(thread) => {
                if thread.join().is_err() {
                    log::error!(
                        "the sender thread of {} panicked",
                        inner.log.dir().display()
                    );
                }
            }
            SenderRunner::Pool(handle) => handle.cancel(),
        }
    }
}

/// The sender as a task of a [`Workers`](crate::Workers) pool.
///
/// Its lane is [`Lane::Sync`]: its runs are the appends that callers wait on (their handles
/// under `acks=1`, `flush`, `commit`, and under `acks=all` the fsync that follows), so they go
/// first, on any thread, never queued behind retention or a compaction pass. A run appends
/// without syncing (the log's flusher task syncs) and appends at most a few batches, so it
/// holds a thread briefly and leaves the flushers their turn.
struct SenderTask {
    inner: std::sync::Arc<Inner>,
}

impl Task for SenderTask {
    fn run(&self) -> Next {
        sender::run_some(&self.inner)
    }

    fn lane(&self) -> Lane {
        Lane::Sync
    }
}

#[cfg(test)]
mod tests {
    /// Model-checked with shuttle (`RUSTFLAGS="--cfg shuttle"`, see `crate::sync`).
    #[cfg(shuttle)]
    mod shuttle_tests {
        use std::sync::Arc;

        use crate::error::Error;
        use crate::format::NewRecord;
        use crate::log::{Log, LogConfig};
        use crate::producer::{Acks, Producer, ProducerConfig};
        use crate::storage::{SimStorage, Storage};
        use crate::sync::thread;
        use crate::workers::Workers;

        /// A `send` on another thread races `close` of a producer whose sender is a pool task:
        /// every record `send` accepted is appended and its handle resolves to its offset
        /// (nothing accepted is dropped), a refused one gets `Closed`, and once `close` returns
        /// the pool holds no reference to the producer (the task never runs again).
        #[test]
        fn shuttle_pooled_send_racing_close_resolves_every_accepted_record() {
            crate::sync::check(
                "shuttle_pooled_send_racing_close_resolves_every_accepted_record",
                || {
                    let workers = Workers::new(2).unwrap();
                    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
                    let config = LogConfig::builder()
                        .storage(storage)
                        .workers(workers.clone())
                        .build()
                        .unwrap();
                    let log = Arc::new(Log::open("/producer/p-0", config).unwrap());
                    let config = ProducerConfig::builder()
                        .acks(Acks::One)
                        .linger_ms(0)
                        .build()
                        .unwrap();
                    let producer = Arc::new(Producer::new(Arc::clone(&log), config).unwrap());
                    let sender = {
                        let producer = Arc::clone(&producer);
                        thread::spawn(move || {
                            (0..2)
                                .map(|i| {
                                    let value = [b'0' + i];
                                    producer.send(&NewRecord::new(0, None, Some(&value)))
                                })
                                .collect::<Vec<_>>()
                        })
                    };
                    producer.close().unwrap();
                    let sends = sender.join().unwrap();
                    let mut accepted = 0;
                    for send in sends {
                        match send {
                            Ok(handle) => {
                                assert_eq!(handle.wait().unwrap(), accepted);
                                accepted += 1;
                            }
                            Err(Error::Closed) => {}
                            Err(other) => panic!("a send got {other:?}"),
                        }
                    }
                    assert_eq!(
                        log.log_end_offset(),
                        accepted,
                        "an accepted record was lost"
                    );
                    let producer = Arc::into_inner(producer).unwrap();
                    drop(producer);
                    assert_eq!(
                        Arc::strong_count(&log),
                        1,
                        "the pool still holds the producer"
                    );
                    log.close().unwrap();
                },
            );
        }
    }
}
