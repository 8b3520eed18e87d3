//! The guest's clocks: frozen, so a guest cannot observe time, and virtual, so it cannot wait
//! for it either.

use std::time::Duration;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

use crate::host::HostState;

/// A clock that never moves: the guest cannot observe time.
pub(crate) struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// `wasi:clocks/monotonic-clock` in virtual time: `now` is always 0 and every subscription
/// (`subscribe-duration`, `subscribe-instant`) is ready at once.
///
/// wasmtime-wasi sleeps in real time for a subscription even when the guest's clock is frozen,
/// and neither the epoch deadline nor fuel can interrupt the host while it waits, so
/// `std::thread::sleep(3600 s)` in a guest held a host thread for an hour. In virtual time a
/// sleep returns at once; a guest that polls until a time passes spins in wasm code instead,
/// where its CPU limit stops it. Nothing else a guest can reach blocks: stdin is empty and
/// closed, stdout and stderr always accept, and no socket can connect or listen.
pub(crate) struct VirtualClock<'a> {
    table: &'a mut ResourceTable,
}

/// The [`HasData`] marker that hands [`VirtualClock`] to the linker.
pub(crate) struct VirtualTime;

impl HasData for VirtualTime {
    type Data<'a> = VirtualClock<'a>;
}

impl VirtualClock<'_> {
    /// Replaces wasmtime-wasi's monotonic clock in `linker` (which must already hold WASI).
    pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        linker.allow_shadowing(true);
        let added =
            monotonic_clock::add_to_linker::<HostState, VirtualTime>(linker, |s| VirtualClock {
                table: &mut s.table,
            });
        linker.allow_shadowing(false);
        added
    }

    fn ready(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let ready = self.table.push(Ready)?;
        subscribe(self.table, ready)
    }
}

impl monotonic_clock::Host for VirtualClock<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(HostMonotonicClock::now(&FrozenClock))
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(HostMonotonicClock::resolution(&FrozenClock))
    }

    fn subscribe_instant(
        &mut self,
        _when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready()
    }

    fn subscribe_duration(
        &mut self,
        _duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready()
    }
}

/// A pollable that is always ready.
struct Ready;

#[wasmtime_wasi::async_trait]
impl Pollable for Ready {
    async fn ready(&mut self) {}
}
