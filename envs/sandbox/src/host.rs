//! The state of one guest instance's store: WASI with nothing granted, the resource limiter,
//! the call's deadline, the guest's stderr and log, and the `host` interface the guest imports.

use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::{Level, sandgym};
use crate::clock::FrozenClock;
use crate::tail::TailPipe;
use crate::{Limits, SandboxError};

/// Most log lines kept per instance (older ones are dropped).
const MAX_LOG_LINES: usize = 1000;
/// Longest log line kept, in bytes.
const MAX_LOG_LINE: usize = 4096;

/// Store data of one instance.
pub(crate) struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: Limiter,
    /// The tail of what the guest wrote to stderr during the current call.
    pub(crate) stderr: TailPipe,
    pub(crate) log: Vec<(Level, String)>,
    /// When the current call must end and the budget that set it (CPU limited by deadline).
    pub(crate) deadline: Option<(Instant, std::time::Duration)>,
}

impl HostState {
    pub(crate) fn new(limits: &Limits) -> Self {
        let stderr = TailPipe::new(limits.stderr_bytes);
        // Nothing is granted: no preopened directories, no environment, no arguments, no
        // network; stdout is discarded. Clocks are frozen and randomness is a fixed stream, so
        // nothing outside the reset seed can make two runs differ.
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(StdRng::seed_from_u64(0))
            .insecure_random(StdRng::seed_from_u64(1))
            .insecure_random_seed(0)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .max_random_size(1 << 16)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits.max_handles);
        Self {
            wasi,
            table,
            limiter: Limiter {
                memory_bytes: limits.memory_bytes,
                table_elements: limits.table_elements,
            },
            stderr,
            log: Vec::new(),
            deadline: None,
        }
    }

    /// The panic message the guest printed, if any (Rust prints `panicked at FILE:LINE:COL:\nMSG`).
    pub(crate) fn panic_message(&self) -> Option<String> {
        let bytes = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let at = text.rfind("panicked at ")?;
        let rest = &text[at..];
        let message = rest.split_once('\n').map_or(rest, |(_, m)| m);
        let message = message.split("\nnote: ").next().unwrap_or(message).trim();
        Some(message.to_owned())
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl sandgym::env::host::Host for HostState {
    fn log(&mut self, level: Level, mut message: String) {
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        if self.log.len() >= MAX_LOG_LINES {
            self.log.remove(0);
        }
        self.log.push((level, message));
    }
}

/// Memory and table limits that fail with a typed error the host can recognise.
pub(crate) struct Limiter {
    memory_bytes: usize,
    table_elements: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return Err(wasmtime::Error::new(SandboxError::MemoryLimit {
                limit: self.memory_bytes,
                requested: desired,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return Err(wasmtime::Error::new(SandboxError::TableLimit {
                limit: self.table_elements,
                requested: desired,
            }));
        }
        Ok(true)
    }
}
