//! Caps on what a plugin can push at the host: its stdout/stderr and its return values.
//!
//! A plugin that floods its output must fail with its own cause
//! ([`super::PluginFailure::OutputTooLarge`]), not with a confusing contract mismatch,
//! and must not make the host buffer without bound.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// The error a call fails with when a plugin's output or return value is beyond its cap;
/// [`super::runtime::failure`] turns it into [`super::PluginFailure::OutputTooLarge`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} of {size} bytes is beyond the cap of {limit} bytes")]
pub(crate) struct CapExceeded {
    /// What was too large (`stderr`, `returned facts`...).
    pub(crate) what: &'static str,
    /// The cap.
    pub(crate) limit: usize,
    /// The size reached (at least).
    pub(crate) size: usize,
}

/// Fails with [`CapExceeded`] when `size > limit`: used on a call's returned values.
pub(crate) fn check_returned(
    what: &'static str,
    size: usize,
    limit: usize,
) -> wasmtime::Result<()> {
    if size > limit {
        return Err(CapExceeded { what, limit, size }.into());
    }
    Ok(())
}

/// An in-memory stdout/stderr for one call that keeps up to `cap` bytes and traps the
/// call with [`CapExceeded`] on the write that would go beyond (wasmtime's own
/// `MemoryOutputPipe` traps with an untyped error the host could not tell apart).
#[derive(Debug, Clone)]
pub(crate) struct CappedPipe {
    buffer: Arc<Mutex<Vec<u8>>>,
    cap: usize,
}

impl CappedPipe {
    pub(crate) fn new(cap: usize) -> CappedPipe {
        CappedPipe {
            buffer: Arc::new(Mutex::new(Vec::new())),
            cap,
        }
    }

    /// What was written so far.
    pub(crate) fn contents(&self) -> Vec<u8> {
        self.buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Forgets what was written (a kept instance's pipe, before its next call).
    pub(crate) fn clear(&self) {
        self.buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let mut buf = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let size = buf.len() + bytes.len();
        if size > self.cap {
            // Keep what fits: the start of a flood usually says what went wrong.
            let room = self.cap - buf.len();
            buf.extend_from_slice(&bytes[..room]);
            return Err(StreamError::Trap(
                CapExceeded {
                    what: "stdout/stderr",
                    limit: self.cap,
                    size,
                }
                .into(),
            ));
        }
        buf.extend_from_slice(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always accept a chunk, even when full: the write then traps with the typed
        // cause instead of the guest seeing a closed stream (and aborting in a way the
        // host cannot name).
        Ok(4096)
    }
}

impl Pollable for CappedPipe {
    // The shape `#[async_trait]` gives the trait's `async fn ready`: always ready.
    fn ready<'life0, 'async_trait>(
        &'life0 mut self,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async {})
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// The same cap for the asynchronous writer interface (WASI p3 streams; plugins are p2
/// components today, which use [`OutputStream`]).
impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut buf = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let size = buf.len() + bytes.len();
        if size > self.cap {
            let room = self.cap - buf.len();
            buf.extend_from_slice(&bytes[..room]);
            return std::task::Poll::Ready(Err(std::io::Error::other(CapExceeded {
                what: "stdout/stderr",
                limit: self.cap,
                size,
            })));
        }
        buf.extend_from_slice(bytes);
        std::task::Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
