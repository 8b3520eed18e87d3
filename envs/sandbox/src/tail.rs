//! The guest's stderr: the last bytes written during the current call, never full.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// An output pipe that keeps only the last `capacity` bytes written to it.
///
/// wasmtime-wasi's `MemoryOutputPipe` fails every write once it is full, so a guest that logs
/// a little every step dies after enough steps with an opaque trap, and a later panic message
/// is lost. This pipe always accepts the write and drops the oldest bytes instead; the host
/// clears it before each call, so what it holds is the tail of the call that failed. Hand
/// written because wasmtime-wasi has no bounded ring pipe.
#[derive(Clone, Debug)]
pub(crate) struct TailPipe {
    capacity: usize,
    buffer: Arc<Mutex<VecDeque<u8>>>,
}

impl TailPipe {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            buffer: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<u8>> {
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes kept.
    pub(crate) fn contents(&self) -> Vec<u8> {
        self.lock().iter().copied().collect()
    }

    /// Forgets everything written so far.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    fn push(&self, bytes: &[u8]) {
        let mut buffer = self.lock();
        let bytes = &bytes[bytes.len().saturating_sub(self.capacity)..];
        let kept = buffer.len();
        let over = (kept + bytes.len()).saturating_sub(self.capacity);
        buffer.drain(..over.min(kept));
        buffer.extend(bytes);
    }
}

impl OutputStream for TailPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Any amount is accepted (the oldest bytes make room); the guest's copy into the host
        // is bounded by the store's hostcall budget.
        Ok(self.capacity.max(1))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for TailPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for TailPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TailPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_never_fills() {
        let mut pipe = TailPipe::new(8);
        for chunk in ["hello ", "world", ", again"] {
            pipe.write(Bytes::from(chunk)).unwrap();
        }
        assert_eq!(pipe.contents(), b"d, again");
        pipe.write(Bytes::from(vec![b'x'; 100])).unwrap();
        assert_eq!(pipe.contents(), vec![b'x'; 8]);
        assert_eq!(pipe.check_write().unwrap(), 8);
        pipe.clear();
        assert!(pipe.contents().is_empty());
    }
}
