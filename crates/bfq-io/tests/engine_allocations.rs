//! No heap allocation per request in steady state through the threaded engine (issue 7, target 3): a
//! counting global allocator, and client threads that keep a window of reads in flight, each reusing
//! the buffer its last read gave back.

use std::collections::VecDeque;
use std::sync::{Arc, Barrier};

use bfq_io::{AlignedBuf, Engine, EngineConfig, QueueId, QueueSpec};
use bfq_sched::testing::{self, CountingAllocator};

mod common;
use common::TempFile;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Requests per client, after a warm-up of the same length; `measure` returns the allocations made
/// by every thread (clients and engine) while the clients issued them.
fn allocations_in_steady_state(sched: &str, file: &TempFile) -> u64 {
    const CLIENTS: u32 = 3;
    const WINDOW: usize = 8;
    const REQUESTS: u64 = 10_000;
    let config = EngineConfig { scheduler: sched.into(), params: Vec::new(), depth: 16, read_only: false };
    let engine = Engine::open(&file.0, config).unwrap();
    let blocks = std::fs::metadata(&file.0).unwrap().len() / 4096;
    // Phases: warm-up, measured, drain; the main thread reads the counter between them.
    let phase = Arc::new(Barrier::new(CLIENTS as usize + 1));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let client = engine.client(QueueId(c + 1), QueueSpec::default()).unwrap();
            let phase = phase.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(c);
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % blocks) * 4096
                };
                let mut window: VecDeque<_> =
                    (0..WINDOW).map(|_| client.read(next(), AlignedBuf::zeroed(4096), true)).collect();
                for round in 0..2 {
                    for _ in 0..REQUESTS {
                        let done = window.pop_front().unwrap().wait().unwrap();
                        window.push_back(client.read(next(), done.buf, true));
                    }
                    phase.wait();
                    if round == 0 {
                        phase.wait();
                    }
                }
                for t in window {
                    t.wait().unwrap();
                }
            })
        })
        .collect();
    phase.wait();
    let before = testing::allocations();
    phase.wait();
    phase.wait();
    let allocations = testing::allocations() - before;
    for h in handles {
        h.join().unwrap();
    }
    engine.shutdown().unwrap();
    allocations
}

/// The engine's own hand-off (inbox, request slab, completion cells, wake list) does not allocate per
/// request: with FIFO, whose scheduler allocates nothing, and with BFQ, at most one allocation per
/// thousand requests (what remains is vectors and the cell pool growing to a new high-water mark,
/// once). BFQ's queue merging (random readers of a 16 MiB file are close enough to merge and split
/// again and again) used to allocate its merged-from list after every split; it keeps the buffer now.
#[test]
fn threaded_engine_makes_no_heap_allocation_per_request_in_steady_state() {
    // One test function: the counter is global, and tests of one binary run in parallel threads.
    let file = TempFile::new("alloc", 4096 * 4096);
    let fifo = allocations_in_steady_state("fifo", &file);
    let bfq = allocations_in_steady_state("bfq", &file);
    eprintln!("allocations in 30,000 requests through the engine: fifo {fifo}, bfq {bfq}");
    assert!(fifo <= 30, "fifo: {fifo} allocations in 30,000 requests through the engine");
    assert!(bfq <= 30, "bfq: {bfq} allocations in 30,000 requests through the engine");
}
