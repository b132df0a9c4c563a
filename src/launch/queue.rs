//! What the reader threads hand the caller, bounded in bytes: a sender waits while the
//! queued messages hold [`MAX_QUEUED_BYTES`] (one message always passes an empty queue), so a
//! client that writes faster than the caller reads fills its own pipe and blocks, and the
//! executor's memory stays bounded whatever the client writes.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The bytes of read messages that wait for the caller at most (64 MiB), beyond the one
/// message an empty queue always takes. A line of an ACP client's output counts its bytes
/// and 64 more (its string and its slot); it is parsed only when the caller takes it, so
/// this bounds the memory the waiting lines take. With the reader's line (at most
/// [`MAX_MESSAGE_BYTES`](crate::launch::MAX_MESSAGE_BYTES)) and the one message always
/// taken, a launch's queue holds at most 64 + 2 × 16 MiB, however much the client writes
/// (`tests/suite/launch_memory.rs` measures it end to end).
pub const MAX_QUEUED_BYTES: usize = 64 << 20;

#[derive(Debug, Default)]
struct State {
    bytes: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// The sending half: cloned for each reader thread.
pub(crate) struct Sender<T> {
    tx: mpsc::Sender<(T, usize)>,
    shared: Shared,
    limit: usize,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            shared: Arc::clone(&self.shared),
            limit: self.limit,
        }
    }
}

/// The receiving half, the caller's. Dropping it wakes and ends every waiting sender.
pub(crate) struct Receiver<T> {
    rx: mpsc::Receiver<(T, usize)>,
    shared: Shared,
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("queue::Receiver")
    }
}

/// A queue holding at most `limit` bytes (as each message's sender counts them).
pub(crate) fn bounded<T>(limit: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel();
    let shared: Shared = Arc::default();
    (
        Sender {
            tx,
            shared: Arc::clone(&shared),
            limit,
        },
        Receiver { rx, shared },
    )
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.0.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Sender<T> {
    /// Queues `msg` of `bytes`, first waiting while the queue is not empty and `bytes` more
    /// would pass the limit. `Err(())` once the receiver is gone.
    pub(crate) fn send(&self, msg: T, bytes: usize) -> Result<(), ()> {
        let mut state = lock(&self.shared);
        while !state.closed && state.bytes > 0 && state.bytes + bytes > self.limit {
            state = self.shared.1.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.closed {
            return Err(());
        }
        state.bytes += bytes;
        drop(state);
        self.tx.send((msg, bytes)).map_err(|_| ())
    }
}

impl<T> Receiver<T> {
    /// The next message, waiting up to `timeout`.
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let (msg, bytes) = self.rx.recv_timeout(timeout)?;
        let mut state = lock(&self.shared);
        state.bytes -= bytes;
        drop(state);
        self.shared.1.notify_all();
        Ok(msg)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        lock(&self.shared).closed = true;
        self.shared.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_sender_waits_while_the_queue_is_full_and_one_message_always_passes() {
        let (tx, rx) = bounded::<u32>(10);
        // Larger than the limit, into an empty queue: passes.
        tx.send(1, 25).unwrap();
        let t = tx.clone();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&sent);
        let writer = std::thread::spawn(move || {
            for i in 2..=4 {
                t.send(i, 4).unwrap();
                s.lock().unwrap().push(i);
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            *sent.lock().unwrap(),
            Vec::<u32>::new(),
            "waits behind 25 bytes"
        );
        assert_eq!(rx.recv_timeout(Duration::from_secs(1)), Ok(1));
        std::thread::sleep(Duration::from_millis(100));
        // 4 + 4 fit in 10, a third 4 does not: it waits for the caller.
        assert_eq!(*sent.lock().unwrap(), [2, 3]);
        let got: Vec<u32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(1)).unwrap())
            .collect();
        assert_eq!(got, [2, 3, 4]);
        writer.join().unwrap();
    }

    #[test]
    fn dropping_the_receiver_ends_a_waiting_sender() {
        let (tx, rx) = bounded::<u32>(10);
        tx.send(1, 10).unwrap();
        let t = tx.clone();
        let started = Instant::now();
        let writer = std::thread::spawn(move || t.send(2, 10));
        std::thread::sleep(Duration::from_millis(50));
        drop(rx);
        assert_eq!(writer.join().unwrap(), Err(()));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
