//! What each scheduler's tunables mean, one line each, for `bfq list` (issue 17 part 5). Names follow
//! the kernel's sysfs files where the kernel has the tunable; the units are those `params()` reports.

/// (scheduler, tunable, meaning).
pub const PARAM_DOCS: &[(&str, &str, &str)] = &[
    ("bfq", "slice_idle", "ms the device is idled for the in-service sync queue's next request (kernel name; seed 001 sec. 3)"),
    ("bfq", "slice_idle_us", "the same idle window in microseconds (kernel name)"),
    ("bfq", "timeout_sync", "ms: budget timeout T_max, the longest a queue is served in one turn (kernel name; seed 001 sec. 3.2)"),
    ("bfq", "max_budget", "sectors: largest budget B_max; 0 = automatic, T_max x estimated peak rate (kernel name)"),
    ("bfq", "low_latency", "1 = weight raising for interactive and soft real-time queues (kernel name; seed 001 sec. 4.1, seed 003 sec. V)"),
    ("bfq", "strict_guarantees", "1 = always idle for the in-service queue, whatever the device (kernel name)"),
    ("bfq", "back_seek_max", "KiB behind the head a request may be and still be served in C-LOOK order (kernel name)"),
    ("bfq", "back_seek_penalty", "a backward seek counts this many times a forward one (kernel name)"),
    ("bfq", "fifo_expire_sync", "ms after which a sync request is served before the C-LOOK order (kernel name)"),
    ("bfq", "fifo_expire_async", "ms, the same for async requests (kernel name)"),
    ("bfq", "v1_heuristics", "0 = seed 001's original BFQ (sec. 3 only); 1 = BFQ+ with the sec. 4 heuristics"),
    ("bfq", "weight_raising", "v1 (seed 001 sec. 4.1: C_rais over B_rais within T_rais) or v7r8 (seed 003: device-speed duration, soft real-time)"),
    ("bfq", "peak_rate_estimator", "paper (seed 001 sec. 4.2 low-pass filter) or kernel (today's sampler)"),
    ("bfq", "budget_feedback", "paper (seed 001 sec. 4.3-4.4) or kernel (its table and time-proportional overcharge)"),
    ("bfq", "idling_policy", "on devices with internal queueing: v1 (no idling), v7r8 (raised or asymmetric only), kernel (today's rule)"),
    ("bfq", "write_charge", "writes are charged this many times their sectors (seed 001 sec. 4.5: 10; kernel: 3)"),
    ("bfq", "write_charge_rule", "which requests pay write_charge: seeds (every write, seed 001 sec. 4.5) or kernel (async requests of unraised queues, in symmetric scenarios only)"),
    ("bfq", "wr_coeff", "raising coefficient; 0 = the variant's default (10 for v1, 30 for v7r8)"),
    ("bfq", "wr_budget", "sectors of service over which v1 raising decreases (B_rais, seed 001 sec. 4.1)"),
    ("bfq", "wr_max_time", "ms: longest v1 raising (T_rais, seed 001 sec. 4.1)"),
    ("bfq", "wr_min_idle_time", "ms a queue must have been idle to count as newly started (T_idle, seed 001 sec. 4.1)"),
    ("bfq", "max_service_from_wr", "sectors of service after which interactive raising ends; 0 = no limit, the papers' BFQ (kernel constant: 120000)"),
    ("bfq", "softrt_max_rate", "sectors/s: highest rate of a soft real-time queue (seed 003 sec. V-B)"),
    ("bfq", "softrt_duration", "ms one soft real-time raising lasts"),
    ("bfq", "softrt_coeff", "soft real-time raising coefficient (kernel: 30 x 100)"),
    ("bfq", "softrt_back_to_interactive", "1 = a queue raised as interactive and then as soft real-time goes back to its interactive raising when the soft real-time period ends, for what is left of it (kernel); 0 = the interactive raising is lost at the switch (the papers' runs)"),
    ("bfq", "idle_class_guard", "ms after which the IDLE class is served even with others busy"),
    ("bfq", "seeky_threshold", "sectors: mean seek distance above which a queue counts as random (seed 000 sec. 4)"),
    ("bfq", "merge", "1 = Early Queue Merge of interleaved queues (seed 003 sec. V-D)"),
    ("bfq", "merge_distance", "sectors: how close a new request must be to the in-service queue's next one to merge"),
    ("bfq", "large_burst", "1 = queues created in a large burst are not raised (kernel)"),
    ("bfq", "wr_default_weight_only", "1 = raise only queues with the default weight, as the kernel does"),
    ("bfq", "raised_seeky_timeout", "1 = a weight-raised random queue ends its turn at timeout_sync, not at timeout_sync x its raising coefficient, while a queue raised at least 1 s after it is busy (an application starting beside it), and on a spinning disk also once it has held the disk 1 s in its turns beside a queue raised with it, or when its raising ends during the turn; 0 = the kernel's rule (beyond the kernel)"),
    ("bfq", "seeky_timeout_waits", "1 = on a spinning disk, a random sync queue whose turn times out while its request is in the device or while it thinks is expired when its next request arrives (within the idle window), so that it keeps its place in B-WF2Q+ and can be served two turns in a row; 0 = the kernel's rule, expired at once (beyond the kernel)"),
    ("bfq", "async_held_on_disks", "1 = with injection on a device that queues internally, async requests take up to half of its queue beside sync ones, but not on a spinning disk, where they wait while sync requests are in it as in the seeds; 0 = half of the queue on a spinning disk too (beyond the seeds)"),
    ("bfq", "async_depth_raised", "sixteenths of the device's queue depth that async requests may hold while a weight-raised queue is busy, on a device that queues internally and is not a spinning disk (the kernel's: 3, ~18 % of the tags); 0 = no such limit, the default (beyond the seeds)"),
    ("bfq", "max_lead_wait", "ms: a queue that has had requests queued and none dispatched for this long while ahead of the virtual time from service out of its turns (injection) starts at the virtual time again; 0 = off, as the kernel (beyond the kernel)"),
    ("bfq", "wr_yield_after", "ms: on a device that queues internally, a queue raised as interactive when none had been for this long (a new application starting) ends the interactive raisings still in force; 0 = never, as the kernel; 1000 by default (beyond the kernel)"),
    ("bfq", "injection", "1 = serve other queues while the device is idled or held for the in-service queue, within a learned limit (beyond the seeds)"),
    ("bfq", "inject_latency_ratio", "%: how much slower than alone the in-service queue's requests may get from injection (kernel: 150)"),
    ("bfq", "inject_reserve", "1 = a slot injection would give to a queue ahead of its share is kept for the first-ranked waiting queue when that one is owed service, deep, and its next request comes with its own completion (beyond the seeds)"),
    ("bfq", "inject_within_share", "1 = while the in-service queue's requests are slower than inject_latency_ratio allows and it could fill the device by itself, do not inject a queue more than one maximum budget ahead of it (beyond the seeds)"),
    ("bfq", "inject_deep_within_share", "1 = with inject_within_share, a deep queue more than one maximum budget ahead of a deep in-service queue that could use its weight's share of the device by itself is not injected into its turn, whatever that queue's latency says (beyond the seeds)"),
    ("bfq", "inject_deep_share_measured", "1 = with inject_deep_within_share, a deep in-service queue whose own rate, in its recent turns with the deep queues beside it held to their shares, was at least 3/4 of its weight's share of the device also counts as able to use its share (its latency alone, measured beside the others' work, understates it on a CPU-bound device) (beyond the seeds)"),
    ("bfq", "inject_think_time", "1 = the in-service queue's latency measured for injection includes its think time in its turn (completion to its next request): inject_latency_ratio then keeps its throughput, not only its device latency, within the ratio of alone (beyond the seeds)"),
    ("bfq", "inject_in_time", "1 = a synchronous queue emptied while served by injection (out of its turns) whose next request comes within slice_idle keeps its place in B-WF2Q+ (back-shifted, as an in-time arrival in an idle window), instead of restarting at the virtual time and losing its lag (beyond the seeds)"),
    ("bfq", "inject_lower_class", "1 = injection may serve queues of a lower class than the in-service queue's (best-effort in a real-time queue's turns, idle in a best-effort one's) after those of its class and above, as the kernel does; 0 = its class and higher only (beyond the seeds)"),
    ("bfq", "inject_random_backoff", "1 = a random in-service queue short of its share of its turns, slowed beyond inject_latency_ratio by one injected request, and over the last 100 ms or more in service at least 3/4 of the time with less than 3/4 of its share of the device, has its inject limit tried again from 0 only after a wait doubling from 100 ms to 1 s; 0 = tried again at once; 1 by default (beyond the seeds)"),
    ("bfq", "inject_beside_bypass", "1 = requests dispatched by the latency-bound bypass are background for the in-service queue's inject limit: not counted against it, not in the way of a sample of its latency alone; and a latency-bound in-service queue that keeps its turn with its own requests in the device (not raised) has eligible latency-bound queues bypassed beside it; moot with injection off; 0 = counted as any other queue's, no bypass beside a latency-bound in-service queue (beyond the seeds)"),
    ("bfq", "inject_starting_apps", "1 = while the in-service queue's inject limit refuses every other queue, a process of an application starting beside others (raised as interactive in a chain that began after a quiet wr_yield_after) is still dispatched beside it where the device has room, not into a raised turn; 0 = it waits for its turn or the limit; 1 by default (beyond the seeds)"),
    ("bfq", "idle_by_think_time", "1 = the in-service queue is not idled for when at most one of its last 8 think times was within its idle window (it comes back after the window as a rule), unless it is the only busy queue; 0 = the seeds' and the kernel's rule (beyond the seeds)"),
    ("bfq", "raised_idle_short_think", "1 = on a device that queues internally and is not a spinning disk, a raised queue is idled for only while its think time is short (at least two of its last 8 within slice_idle, and not raised as soft real-time with its last 3 longer; or it is the only busy queue); it preempts on arrival instead; 0 = idled for whatever its think time, as the kernel"),
    ("bfq", "share_horizon", "ms: on a device that queues internally and is not a spinning disk, a synchronous queue's budget is at most what its weight's share of the peak rate serves in this time (B_max x share_horizon / timeout_sync x its weight / the weights of the queues active in the last second), so that B-WF2Q+'s lag of one budget stays small beside what each queue reads; not applied when max_budget is set; 0 = off, as the seeds and the kernel; 250 by default (beyond the seeds)"),
    ("bfq", "raised_idle_shallow_only", "1 = while every busy queue is weight-raised, the others' load makes BFQ idle for a raised queue only if it keeps at most 4 requests outstanding; 0 = the kernel's rule, whatever its depth (beyond the seeds)"),
    ("bfq", "waker_detection", "1 = detect queues that wake each other and inject them first (kernel)"),
    ("bfq", "drain_grace", "1 = a deep random sync queue, or (not on a spinning disk) a sync queue of at most bypass_depth large requests, drained for a moment while cut off or injected keeps its place in B-WF2Q+ for slice_idle (beyond the seeds)"),
    ("bfq", "grace_latency_bound", "1 = with drain_grace, off a spinning disk, a latency-bound sync queue of small requests (at most bypass_depth outstanding) drained out of its turns keeps its place in B-WF2Q+ for slice_idle too; 0 = it leaves at once and comes back at the virtual time, as in the seeds (beyond the seeds)"),
    ("bfq", "share_in_flight", "percent of the aggregate (0-90) that caps on queues' sectors in the device may cost: on a device with internal queueing, in a symmetric scenario, a queue that got more than its weight's share of a 16-MiB window while another got less with its requests' time spent in the device has its sectors in the device capped, the caps let go when holding it back no longer speeds the other up; 0 = off: the device divides itself by what each queue keeps in it, as in the seeds and the kernel (beyond the seeds; opt-in, e.g. 20)"),
    ("bfq", "grace_hand_over", "1 = a queue back with its next request within its drain grace is judged against the in-service queue as one that becomes busy (a start-up's hand-over, whether idling is still needed); 0 = it waits for the in-service queue's turn or idle window to end (beyond the seeds; moot without drain_grace)"),
    ("bfq", "preempt_back_in_time", "1 = on a device that queues internally (not a spinning disk), in a symmetric scenario (where BFQ does not idle), a sync queue whose turn ended with no more requests and budget left takes the device back when its next request comes within slice_idle if B-WF2Q+ would have served it first (eligible, earlier finish time): the kernel's non-blocking-wait preemption; 0 = it waits for the in-service queue's turn to end, as in the seeds"),
    ("bfq", "one_group_symmetric", "1 = busy queues in one group only (the root counted as one) leave the scenario symmetric, as the kernel since Linux 6.2: in bfq serve, the connections of the only busy export are served as queues of one weight without groups are; 0 = any backlogged group other than the root makes the scenario asymmetric (idling for every sync queue in it), as the kernels from 4.19 to 6.1"),
    ("bfq", "raised_sibling_wait", "1 = while a raised queue is idled for with nothing of its own in the device and has waited longer than it takes to come back (twice its median think time, at least 250 us), queues of its group raised as it is go in whatever the inject limit, on a device that queues internally (beyond the seeds and the kernel); 0 = only its waker, wakee and the inject limit"),
    ("bfq", "inject_into_raised", "which queues injection may serve in the turns of a weight-raised queue with a short think time (a starting application's process): raised = only weight-raised queues, on every device (the kernel's rule); raised-on-disks = that on a spinning disk, where each injected request costs the raised queue's next one a seek, any queue elsewhere; starting-apps = that on a spinning disk, and elsewhere in the turns of an application starting beside others (a chain of raisings that began after a quiet wr_yield_after), not of tenants raised as the run starts; any = any queue within the inject limit (beyond the kernel)"),
    ("bfq", "hand_over_budget", "1 = on a device that queues internally and is not a spinning disk, a process of an application starting beside others (raised in a chain of raisings that began after a quiet wr_yield_after) whose turn a raised queue ends while it has nothing queued (a hand-over between its processes) gets the budget of a queue with no more requests (what it used), so that its next request is not ordered behind every queue of a small budget; 0 = a preempted queue keeps its budget, as the kernel (beyond the kernel)"),
    ("bfq", "wr_cohort_end", "1 = on a device that queues internally, when a queue's interactive raising ends by max_service_from_wr, the interactive raisings of the other queues raised in the same chain (tenants that started together, each raised within wr_yield_after of the one before) end too, but for latency-bound ones and for an application starting beside others; so that a lighter tenant does not keep x30 against a heavier one that read the cap first; 0 = each raising ends by its own service, as the kernel (beyond the kernel)"),
    ("bfq", "sibling_wait_any", "1 = with raised_sibling_wait, past its wait and with the device otherwise empty, on a device that is not a spinning disk, one request of any queue of the raised queue's group and class goes in when no queue raised as it is has one (beyond the seeds and the kernel); 0 = only queues raised as it is"),
    ("bfq", "merge_keeps_weights", "1 = a merged queue is served with the sum of its members' weights, so that a merge changes the order of service, not the shares the queues had apart, and a split gives each queue back the requests it had queued in the merged queue; 0 = one queue's weight, and queued requests stay in the merged queue, as the kernel and seed 003 (beyond the seeds)"),
    ("bfq", "burst_active_only", "1 = with large_burst, a burst member with nothing queued or in flight for more than slice_idle leaves the burst when another queue appears, so that processes handing over to each other one after another are not a large burst; 0 = the kernel's rule (beyond the seeds)"),
    ("bfq", "softrt_tenant_burst", "1 = with large_burst, on a device that is not a spinning disk, only a large burst of its own tenant's queues (its group, weight and class) keeps a queue from soft real-time raising, so that a player started beside another tenant's many processes can be raised; 0 = the whole device's burst keeps it from both raisings (beyond the kernel, which ends a burst at a queue of another group)"),
    ("bfq", "pattern_asymmetry", "1 = a random sync queue with more than bypass_depth requests outstanding is idled for while a sequential sync queue is busy, as if their weights differed; 0 = the kernel's rule (beyond the seeds)"),
    ("bfq", "fair_charge", "1 = a timed-out or slow slot's charge is split among the queues served in it by their sectors (beyond the seeds)"),
    ("bfq", "deep_charge_service", "1 = on a device that queues internally and is not a spinning disk, a timed-out or slow slot of a queue that kept half the device's queue depth outstanding is charged its service, not its time (beyond the seeds)"),
    ("bfq", "bypass_depth", "requests: a waiting sync queue with at most this many outstanding is served at once beside the in-service queue when B-WF2Q+-eligible, on devices with internal queueing; 0 = off (beyond the seeds)"),
    ("bfq", "latency_guard", "percent: while a latency-bound queue (at most bypass_depth requests and 32 KiB a request outstanding) is active on a device with internal queueing, other queues' requests in the device are limited so that its requests take at most this share of their baseline latency, e.g. 150; 0 = off, the default (beyond the seeds)"),
    ("bfq", "guard_split_kib", "KiB: while the latency guard is on, reads and writes larger than this of the queues it holds back are inserted as pieces of this size, so that its limit bounds their bytes in the device; 0 = never split; 16 by default (beyond the seeds)"),
    ("bfq", "guard_by_share", "1 = the latency guard's limit follows the guarded queue's share (shrinks while it gets less than its share by more than 1/16 with its reads slowed in the device, grows otherwise) instead of its latency against its baseline; needs latency_guard on; 0 by default (beyond the seeds)"),
    ("cfq", "slice_idle", "ms the device is idled for a sync queue's next request (kernel name)"),
    ("cfq", "slice_sync", "ms: time slice of a sync queue (kernel name)"),
    ("cfq", "slice_async", "ms: time slice of an async queue (kernel name)"),
    ("cfq", "slice_async_rq", "requests an async queue may dispatch per slice (kernel name)"),
    ("cfq", "quantum", "requests dispatched to the device per round (kernel name)"),
    ("cfq", "low_latency", "1 = slices scaled so that every queue is served within target_latency (kernel name)"),
    ("cfq", "target_latency", "ms within which every queue should be served with low_latency; with idling_rule=2.6.33 also the base of the workload slices (kernel name)"),
    ("cfq", "back_seek_max", "KiB behind the head still served in order (kernel name)"),
    ("cfq", "back_seek_penalty", "a backward seek counts this many times a forward one (kernel name)"),
    ("cfq", "fifo_expire_sync", "ms after which a sync request is served first (kernel name)"),
    ("cfq", "fifo_expire_async", "ms, the same for async requests (kernel name)"),
    ("cfq", "idling_rule", "kernel generation of the idling rule: 2.6.33 (2.6.33-4.20: workload service trees sync / sync-noidle / async; seeky queues not idled unless deep, but the last queue of a tree is, so the sync-noidle tree keeps its turn; sequential ones idled also with NCQ), 2.6.21 (up to 2.6.32: seeky queues not idled only with NCQ, else for 2 ms), off_with_ncq (no idling with NCQ; seed 001 sec. 5's summary)"),
    ("cfq", "dispatch_list", "model the block layer's dispatch list (0/1, default 1): requests CFQ has handed over wait there for the device, out of reach of preemption; per call CFQ moves quantum requests (idling_rule=2.6.21) or one (2.6.33), and the driver peeks one ahead of a full device"),
    ("deadline", "read_expire", "ms: a read's deadline (kernel name)"),
    ("deadline", "write_expire", "ms: a write's deadline (kernel name)"),
    ("deadline", "fifo_batch", "requests served in sector order before deadlines are checked again (kernel name)"),
    ("deadline", "writes_starved", "read batches that may pass before writes are served (kernel name)"),
    ("deadline", "front_merges", "1 = merge requests at their front (kernel name)"),
    ("mq-deadline", "read_expire", "ms: a read's deadline (kernel name)"),
    ("mq-deadline", "write_expire", "ms: a write's deadline (kernel name)"),
    ("mq-deadline", "fifo_batch", "requests served in sector order before deadlines are checked again (kernel name)"),
    ("mq-deadline", "writes_starved", "read batches that may pass before writes are served (kernel name)"),
    ("mq-deadline", "front_merges", "1 = merge requests at their front (kernel name)"),
    ("mq-deadline", "prio_aging_expire", "ms after which a lower-priority request is served anyway (kernel name)"),
    ("anticipatory", "antic_expire", "ms to wait for the last process's next nearby read (2.6 kernel name)"),
    ("anticipatory", "read_expire", "ms: a read's deadline (2.6 kernel name)"),
    ("anticipatory", "write_expire", "ms: a write's deadline (2.6 kernel name)"),
    ("anticipatory", "read_batch_expire", "ms a read batch lasts before writes get their turn (2.6 kernel name)"),
    ("anticipatory", "write_batch_expire", "ms a write batch lasts (2.6 kernel name)"),
    ("scan-edf", "relative_deadline", "ms: each request's deadline after its arrival"),
    ("scan-edf", "deadline_granularity", "ms: deadlines in one granule are served in SCAN order"),
    ("scan-edf", "idle_wait", "ms to wait for the last application's next request"),
    ("yfq", "batch_size", "requests dispatched per batch, sorted by position"),
    ("yfq", "idle_wait", "ms to wait for the last application's next request"),
    ("kyber", "read_lat_nsec", "target read latency in ns, by which the read queue depth is throttled (kernel name)"),
    ("kyber", "write_lat_nsec", "target write latency in ns (kernel name)"),
];

/// What `key` of `scheduler` means, if documented.
pub fn describe(scheduler: &str, key: &str) -> Option<&'static str> {
    let name = crate::canonical_name(scheduler)?;
    PARAM_DOCS.iter().find(|(s, k, _)| *s == name && *k == key).map(|(_, _, d)| *d)
}

#[cfg(test)]
mod tests {
    use crate::{build, DeviceInfo, SCHEDULER_NAMES};

    #[test]
    fn every_tunable_of_every_scheduler_is_described() {
        for name in SCHEDULER_NAMES {
            let s = build(name, DeviceInfo::default(), &[]).unwrap();
            for (key, _) in s.params() {
                assert!(super::describe(name, key).is_some(), "{name}: `{key}` has no description");
            }
        }
    }
}
