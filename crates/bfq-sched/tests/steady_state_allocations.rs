//! No heap allocation per request in steady state (issue "Performance", target 3): a counting global
//! allocator around the system one, and every scheduler driven by `SteadyLoad` after its warm-up.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use bfq_sched::testing::{Mix, SteadyLoad};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Schedulers held to the no-allocation target; the peers are measured but not held to it.
const HELD_TO_ZERO: &[&str] = &["fifo", "bfq"];

#[test]
fn steady_state_makes_no_heap_allocation_per_request() {
    // One test function: the counter is global, and tests of one binary run in parallel threads.
    let mut report = Vec::new();
    for name in bfq_sched::SCHEDULER_NAMES {
        for mix in [Mix::Sequential, Mix::Random, Mix::Mixed] {
            for queues in [1, 100, 5_000] {
                let mut load = SteadyLoad::new(name, &[], queues, mix).expect("scheduler builds");
                let before = ALLOCATIONS.load(Ordering::Relaxed);
                let steps = 20_000;
                for _ in 0..steps {
                    load.step();
                }
                let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
                let per_request = allocations as f64 / f64::from(steps);
                report.push(format!(
                    "{name:>14} {mix:?} {queues:>6} queues: {per_request:.4} allocations/request"
                ));
                if HELD_TO_ZERO.contains(name) {
                    assert_eq!(
                        allocations, 0,
                        "{name} {mix:?} with {queues} queues allocates {per_request} times per request"
                    );
                }
            }
        }
    }
    // BFQ switching queue after every request (one-request budgets): B-WF2Q+ selection, requeueing and
    // budget feedback on every request (seed 001 sec. 3), still without allocating. Also with v1
    // weight raising, whose raised weight changes with every request served (seed 001 sec. 4.1).
    let params =
        |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    for (label, p) in [
        ("one-request budgets", params(&[("max_budget", "8")])),
        (
            "v1 raising",
            params(&[("weight_raising", "v1"), ("wr_max_time", "3600000"), ("wr_budget", "1073741824")]),
        ),
    ] {
        for mix in [Mix::Random, Mix::Mixed] {
            for queues in [1, 100, 5_000] {
                let mut load = SteadyLoad::new("bfq", &p, queues, mix).expect("bfq builds");
                let before = ALLOCATIONS.load(Ordering::Relaxed);
                let steps = 20_000;
                for _ in 0..steps {
                    load.step();
                }
                let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
                let per_request = allocations as f64 / f64::from(steps);
                report.push(format!(
                    "bfq ({label}) {mix:?} {queues:>6} queues: {per_request:.4} allocations/request"
                ));
                assert_eq!(
                    allocations, 0,
                    "bfq ({label}) {mix:?} with {queues} queues allocates {per_request} times per request"
                );
            }
        }
    }
    println!("{}", report.join("\n"));
}
