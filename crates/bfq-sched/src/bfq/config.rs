//! BFQ's tunables: the kernel's sysfs names and defaults (kernel-bfq-reference.md "Tunables") for the
//! knobs the kernel exports, the papers' constants for the rest (seed 001 sec. 4.1-4.5, seed 000
//! sec. 3.4-4.4, seed 003 sec. V), and the switches the benchmark suite needs to compare variants.
//!
//! Every tunable is set by name with a textual value ([`BfqConfig::set`]); an invalid value is rejected
//! with a [`ParamError`] naming the field.

use crate::params::{choice_name, parse_bool, parse_duration, parse_u64, ParamError};
use crate::types::{Nanos, MSEC, SEC, USEC};

const NAME: &str = "bfq";

/// Which weight-raising heuristic is used when `low_latency` is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightRaising {
    /// BFQ-v1 (seed 001 sec. 4.1): the weight is multiplied by C_rais and decreased linearly with the
    /// service received, over a weight-raising budget B_rais, within at most T_rais.
    V1,
    /// BFQ-v7r8 (seed 003 sec. V-A/B): constant raised weight for a duration computed from the device's
    /// speed, plus soft real-time raising.
    V7r8,
}

/// A paper rule or the kernel's later refinement of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The rule as the paper describes it.
    Paper,
    /// Today's kernel refinement (kernel-bfq-reference.md).
    Kernel,
}

/// Which requests pay the write (over)charge (`write_charge_rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteChargeRule {
    /// Every write (seed 001 sec. 4.5).
    Seeds,
    /// Asynchronous requests of unraised queues in symmetric scenarios (the kernel).
    Kernel,
}

const WRITE_CHARGE_RULES: [(&str, WriteChargeRule); 2] =
    [("seeds", WriteChargeRule::Seeds), ("kernel", WriteChargeRule::Kernel)];

/// Idling policy on devices with internal queueing (NCQ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlingPolicy {
    /// Seed 001 sec. 5.1: no idling at all once internal queueing is detected.
    V1,
    /// Seed 003 sec. V-C: with internal queueing, idle only for weight-raised queues or in asymmetric
    /// scenarios; on rotational devices keep idling for sequential queues.
    V7r8,
    /// `V7r8` with today's kernel rule for raised queues (kernel-bfq-reference.md "Idling"): with
    /// internal queueing a raised queue is idled only while some non-raised queue is busy or other
    /// queues have at least 4 requests in the device.
    Kernel,
}

/// Which queues injection may serve in the turns of a weight-raised in-service queue with a short
/// think time (`inject_into_raised`; `bfq::injection`, "Raised turns").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectIntoRaised {
    /// Any queue, within the inject limit and the other rules (this project before 2026-12-06).
    Any,
    /// On a spinning disk only queues that are weight-raised themselves; any queue elsewhere.
    RaisedOnDisks,
    /// On a spinning disk as `RaisedOnDisks`; elsewhere only weight-raised queues into the turns of
    /// a process of an application starting beside others (raised as interactive in a chain of
    /// raisings that began after a quiet `wr_yield_after`), any queue into other turns.
    StartingApps,
    /// Only weight-raised queues, on every device (the kernel's rule).
    Raised,
}

const INJECT_INTO_RAISED: [(&str, InjectIntoRaised); 4] = [
    ("any", InjectIntoRaised::Any),
    ("raised-on-disks", InjectIntoRaised::RaisedOnDisks),
    ("starting-apps", InjectIntoRaised::StartingApps),
    ("raised", InjectIntoRaised::Raised),
];

/// All of BFQ's tunables. Durations are in nanoseconds, sizes in sectors.
#[derive(Clone, Debug, PartialEq)]
pub struct BfqConfig {
    /// `slice_idle` (8 ms): how long the device is idled for the in-service sync queue (seed 001 sec. 3).
    pub slice_idle: Nanos,
    /// `timeout_sync` (125 ms): the budget timeout T_max (seed 001 sec. 3.2-3.3).
    pub timeout_sync: Nanos,
    /// `max_budget` in sectors; 0 = automatic, B_max = T_max x R_est (seed 001 sec. 3.2).
    pub max_budget: u64,
    /// `low_latency` (1): weight raising (seed 001 sec. 4.1, seed 003 sec. V-A/B).
    pub low_latency: bool,
    /// `strict_guarantees` (0): always idle for the in-service queue (kernel tunable).
    pub strict_guarantees: bool,
    /// `back_seek_max` in KiB (16384): how far behind the head a request may be and still be served
    /// in C-LOOK order (seed 003 sec. III step 2.a; kernel tunable).
    pub back_seek_max_kib: u64,
    /// `back_seek_penalty` (2): a backward distance counts this many times a forward one.
    pub back_seek_penalty: u64,
    /// `fifo_expire_sync` (125 ms): a sync request older than this is served first.
    pub fifo_expire_sync: Nanos,
    /// `fifo_expire_async` (250 ms): same for async requests.
    pub fifo_expire_async: Nanos,
    /// `v1_heuristics` (1): 0 = the original algorithm of seed 001 sec. 3 only ("BFQ" in sec. 6);
    /// 1 = BFQ+ with the sec. 4 heuristics (and the v7r8 ones of seed 003 sec. V).
    pub v1_heuristics: bool,
    /// `weight_raising` (`v7r8`): which raising heuristic `low_latency` turns on.
    pub weight_raising: WeightRaising,
    /// `peak_rate_estimator` (`paper`): seed 001 sec. 4.2 low-pass filter, or the kernel's sampler.
    pub peak_rate_estimator: Variant,
    /// `budget_feedback` (`paper`): seed 001 sec. 4.3-4.4 rules, or the kernel's table and its
    /// time-proportional overcharge.
    pub budget_feedback: Variant,
    /// `idling_policy` (`kernel`): what to do on devices with internal queueing.
    pub idling_policy: IdlingPolicy,
    /// `write_charge` (3): write (over)charge coefficient: 10 in seed 001 sec. 4.5 (the papers' BFQ),
    /// 3 in the kernel (`bfq_async_charge_factor` since 2018, kernel-bfq-reference.md "Writes").
    pub write_charge: u64,
    /// `write_charge_rule` (`kernel`): which requests pay `write_charge`. `seeds`: every write (seed
    /// 001 sec. 4.5). `kernel`: asynchronous requests of a queue that is not weight-raised, and only in
    /// a symmetric scenario (kernel-bfq-reference.md "Writes": async charged 3x when symmetric and not
    /// raised); otherwise a request costs its sectors. Where weights differ, the overcharge would
    /// divide the write-back queue's weight by the coefficient on top of the weights the user set: a
    /// buffered writer of weight 100 beside readers of weights 100 and 200 on a fast device got a
    /// tenth of its weighted share (docs/fast-devices.md, "Writers beside readers").
    pub write_charge_rule: WriteChargeRule,
    /// `wr_coeff` (0 = variant default: C_rais = 10 for v1, seed 001 sec. 4.1; 30 for v7r8, kernel).
    pub wr_coeff: u32,
    /// `wr_budget` (49152 sectors = 24 MB): B_rais of seed 001 sec. 4.1.
    pub wr_budget: u64,
    /// `wr_max_time` (6 s): T_rais of seed 001 sec. 4.1 (v1 only).
    pub wr_max_time: Nanos,
    /// `wr_min_idle_time` (2 s): T_idle of seed 001 sec. 4.1.
    pub wr_min_idle_time: Nanos,
    /// `max_service_from_wr` (120000 sectors; 0 = no limit): interactive raising ends once the queue
    /// has received this much service while raised (the kernel's constant of the same name,
    /// kernel-bfq-reference.md "Interactive weight raising"). A queue that reads this much is not
    /// starting an application but streaming: kept at x30 for the whole raising period (up to 25 s), a
    /// few greedy readers left the unraised write-back queue next to nothing (docs/fast-devices.md,
    /// "Writers beside readers"). 0 in the papers' BFQ (seeds 001 and 003 end raising by time, and v1
    /// by its `wr_budget`, only).
    pub max_service_from_wr: u64,
    /// `softrt_max_rate` (7000 sectors/s): the bandwidth bound of soft real-time detection
    /// (seed 003 sec. V-B; kernel constant).
    pub softrt_max_rate: u64,
    /// `softrt_duration` (300 ms): how long one soft real-time raising lasts (kernel constant).
    pub softrt_duration: Nanos,
    /// `softrt_coeff` (3000): soft real-time weight coefficient (kernel: 30 x 100).
    pub softrt_coeff: u32,
    /// `softrt_back_to_interactive` (1, the kernel's): a queue raised as interactive that is then
    /// raised as soft real-time goes back to its interactive raising when the soft real-time period
    /// ends, for what is left of the interactive one (`weight_raising::Raising::check_end`). 0 = the
    /// interactive raising is lost at the switch (the papers' runs).
    pub softrt_back_to_interactive: bool,
    /// `idle_class_guard` (200 ms): the IDLE class is served first if not served for this long.
    pub idle_class_guard: Nanos,
    /// `seeky_threshold` (8192 sectors): mean seek distance above which a queue is "detected as
    /// random" (seed 000 sec. 4).
    pub seeky_threshold: u64,
    /// `merge` (1): Early Queue Merge (seed 003 sec. V-D).
    pub merge: bool,
    /// `merge_distance` (8192 sectors): how close a new request must be to the in-service queue's next
    /// one for EQM.
    pub merge_distance: u64,
    /// `merge_keeps_weights` (1): a merged queue is served with the sum of its members' weights (they
    /// are of one weight and class), so that a merge changes the order of service, not the shares the
    /// queues had apart. The kernel serves it with one queue's weight: eight tenants of weight 50
    /// reading adjacent files were merged into one stream and read 32 MiB/s each beside a reader of
    /// weight 500 at 2,774 MiB/s, where their shares are 170 and 1,695 (docs/fast-devices.md, "Merged
    /// tenants keep their weights"). And a split gives each queue back the requests it had queued in
    /// the merged queue, rather than leaving them to be served at the merged queue's weight after its
    /// own. 0 = the kernel's and seed 003's rules (beyond the seeds).
    pub merge_keeps_weights: bool,
    /// `large_burst` (1): large-burst detection for v7r8 interactive raising (kernel-bfq-reference.md
    /// "Burst": 8 queues appearing < 180 ms apart are not raised).
    pub large_burst: bool,
    /// `burst_active_only` (1): with `large_burst`, a member of the current burst that has had nothing
    /// queued or in the device for more than `slice_idle` when another queue appears leaves the
    /// burst (beyond the kernel: `bfq::burst`). The burst then counts queues that do I/O at the same
    /// time, as parallel workers do, and not the processes of one application that hand over to each
    /// other one after another: ten such processes, each starting as the previous one ended, made a
    /// large burst after eight, lost their raising mid-start-up and took 2.2-2.3x their idle time
    /// beside four sequential readers and two random ones on this machine's disk file. 0 = the
    /// kernel's rule.
    pub burst_active_only: bool,
    /// `softrt_tenant_burst` (1): with `large_burst`, on a device that is not a spinning disk, a queue
    /// is kept from soft real-time raising only by a large burst of its own tenant's queues (its
    /// group, weight and class), not by one of the whole device (beyond the kernel: `bfq::burst`).
    /// Interactive raising still asks the whole device's burst, and so does soft real-time raising
    /// on a spinning disk, where a raised player is idled for after each read and the disk waits out
    /// most of its period. The kernel ends a burst when a queue of another group (cgroup) appears;
    /// here a tenant's weight and class are configured on its queues as well as on groups. A video
    /// player of weight 200 started with a database of twenty processes of weight 500 was counted in
    /// their large burst and never raised; waiting for injection it was always busy, its weight made
    /// each database process's turn idled for, and the SSD preset delivered 65 MiB/s against
    /// FIFO's 142, with 105 of 451 frames dropped (docs/fast-devices.md, "A player in another
    /// tenant's burst"). 0 = the whole device's burst keeps a queue from both raisings.
    pub softrt_tenant_burst: bool,
    /// `wr_default_weight_only` (0): 1 = raise only queues with the default weight, as the kernel
    /// does (kernel-bfq-reference.md "Interactive weight raising"). Off by default, because an
    /// application-defined queue configured with the default weight beside others with explicit
    /// weights would be raised over them, breaking configured shares for the raising period.
    pub wr_default_weight_only: bool,
    /// `max_lead_wait` (1000 ms; 0 = off, as the kernel): a queue that has had requests queued and
    /// none dispatched for this long while its start time is past the virtual time (a lead from
    /// service out of its turns) starts at the virtual time again (beyond the kernel:
    /// `Bfq::forgive_stale_leads`; docs/fast-devices.md, "Debt from injection").
    pub max_lead_wait: Nanos,
    /// `raised_seeky_timeout` (1): a weight-raised queue that is random (seeky) ends its turn at T_max,
    /// not at T_max x its raising coefficient, while a queue raised at least a second after it (a
    /// newer application starting) is busy (beyond the kernel: `Bfq::raised_seeky_turn`). The kernel
    /// multiplies a raised queue's budget timeout so that it can use its budget in one turn; a random
    /// reader on a disk (some 170 reads a second) needs seconds for one, and a raised one held the
    /// papers' disk for 3.75 s a turn while an xterm starting beside it read nothing
    /// (docs/fast-devices.md, "A raised random reader's turn"). On a spinning disk, also once it has
    /// held the disk for a second in its turns beside a queue raised with it (readers started
    /// together took 3.75-s turns for their whole raising), and when its raising ends during the turn
    /// ("Random readers of unequal weights on a disk"). 0 = the kernel's rule.
    pub raised_seeky_timeout: bool,
    /// `seeky_timeout_waits` (1): on a spinning disk, a random synchronous queue whose turn times out
    /// while its request is in the device, or while it thinks, is expired when its next request
    /// arrives (within the idle window), not at once with nothing queued (beyond the kernel:
    /// `Bfq::timeout_waits`). Expired empty, it left B-WF2Q+ at every turn and could never be served
    /// two turns in a row: a one-read-at-a-time reader got at most half of the turns whatever its
    /// weight (three readers weighted 1:2:5 on the papers' disk got 1:2:3). 0 = the kernel's rule.
    pub seeky_timeout_waits: bool,
    /// `async_held_on_disks` (1): with injection on a device that queues internally, async requests
    /// may take half of its queue beside synchronous ones, except on a spinning disk, where they
    /// wait while synchronous ones are in it, as in the seeds (seed 001 sec. 4.5; `Bfq::async_may_enter`).
    /// 0 = half of the queue on a spinning disk too.
    pub async_held_on_disks: bool,
    /// `async_depth_raised` (0 = off; the kernel's is 3), in sixteenths of the device's queue depth: on
    /// a device that queues internally and is not a spinning disk, while a weight-raised queue is busy
    /// (a starting application, a soft real-time reader), asynchronous requests may hold at most this
    /// part of the device's queue, whatever queue is in service (the kernel's tag limit for async I/O
    /// while some queue is raised, ~18 %; kernel-bfq-reference.md "Writes"; `Bfq::async_may_enter`).
    /// Off by default: beside a buffered writer it did not make a gnome-terminal start-up faster on
    /// this machine's files (docs/fast-devices.md, "Writes held to 3/16 of the device while an
    /// application starts").
    pub async_depth_raised: u32,
    /// `wr_yield_after` (1000 ms; 0 = never, as the kernel): on a device that queues internally, a
    /// queue raised as interactive when no queue had been for this long is a new application starting,
    /// and ends the interactive raisings still in force (beyond the kernel: `bfq::activation`).
    /// Tenants that start together are all raised, and a latency-bound one reads its
    /// `max_service_from_wr` slowly: its x30 weight outlived its own start by seconds and a later
    /// start-up waited behind it (docs/fast-devices.md, "A raising that outlives its start-up").
    pub wr_yield_after: Nanos,
    /// `injection` (1): while the device is idled or held for the in-service queue, dispatch other
    /// queues' requests as long as the in-service queue's request latency stays within
    /// `inject_latency_ratio` of its latency alone (beyond the seeds: kernel-bfq-reference.md
    /// "Injection", design/fast-devices.md; docs/fast-devices.md). 0 = the seeds' BFQ.
    pub injection: bool,
    /// `inject_latency_ratio` (115 %): how much longer than alone the in-service queue's requests may
    /// take while others' requests are injected (the kernel uses 150 %).
    pub inject_latency_ratio: u32,
    /// `inject_reserve` (1): a slot of the device that injection would give to a queue ahead of its
    /// share is kept for the waiting queue B-WF2Q+ ranks first when that one is owed service and deep
    /// (it kept more than 4 requests outstanding lately) and has fewer outstanding now, some in the
    /// device: its next request comes with its own completion, microseconds later. 0 = the slot goes to
    /// any queue with a request queued, which lets queues ahead of their share take the slots of one
    /// that refills them (docs/fast-devices.md, "The reserved slot").
    pub inject_reserve: bool,
    /// `inject_within_share` (1): while the in-service queue's requests take longer than
    /// `inject_latency_ratio` allows (its inject limit held only because it got its share of its
    /// turns) and it could fill the device by itself, injection does not serve a queue more than one
    /// maximum budget ahead of it in B-WF2Q+'s virtual time: the in-service queue pays for what is
    /// injected, and a queue that has had more service for its weight may take only what it cannot
    /// use. The same while, its latency within the ratio, it got less than its weight's share of its
    /// turns, against queues that are not latency-bound. Queues of different groups compare where
    /// their paths meet. 0 = any waiting queue, which lets queues ahead of their share take a greedy
    /// queue's turns (docs/fast-devices.md, "Injection within share", and its 2026-11-29 section).
    pub inject_within_share: bool,
    /// `inject_deep_within_share` (1): with `inject_within_share`, a deep queue (more than
    /// `bypass_depth` requests outstanding, at least 3) is not injected into another deep queue's
    /// turn while it is more than one maximum budget ahead of that queue in B-WF2Q+'s virtual time,
    /// whatever the in-service queue's latency says, as long as the in-service queue could use its
    /// weight's share of the device by itself (one that cannot is owed only what it gets alone, and
    /// the rest is the others'). Between deep queues on a device they saturate, each slot is
    /// taken from someone: the inject limit, learned from the in-service queue's latency, then
    /// decides the shares, not the weights (four random readers of weights 1:1:3:3, eight reads
    /// outstanding each, on this machine's RAM file: 1:1.2-2.5 without it). 0 = the rule of
    /// `inject_within_share` alone (docs/fast-devices.md, "Deep queues injected within their
    /// share").
    pub inject_deep_within_share: bool,
    /// `inject_deep_share_measured` (1): with `inject_deep_within_share`, a deep in-service queue
    /// also counts as able to use its share when, in its recent turns with the deep queues beside it
    /// held to their shares, its own rate was at least three quarters of its weight's share of what
    /// the device delivers at its busiest. Its rate alone from its latency alone is measured beside
    /// the others' work, and on a device that the CPU bounds (this machine's RAM file) that work
    /// inflates it: the more the others were injected, the slower the queue looked alone, the less it
    /// seemed able to use, and the more they were injected. Four random readers of weights
    /// 1:1:3:3 came out 1:1.6-2.3 in a third of the runs. 0 = the latency alone decides
    /// (docs/fast-devices.md, "A deep queue's share measured in its turns").
    pub inject_deep_share_measured: bool,
    /// `inject_think_time` (1): the in-service queue's request latency that the inject limit is
    /// learned from includes the time the queue thought before the request (from its drain to the
    /// request, up to `slice_idle`), and its latency alone includes its think time alone: a queue
    /// with one request outstanding gets one request per think time plus latency, so that is what
    /// `inject_latency_ratio` keeps within the ratio of alone (its throughput), and the time a
    /// single-threaded server spends on injected requests while its client thinks counts too. Its
    /// throughput alone (whether it could fill the device, `inject_within_share`) counts the think
    /// time as well. 0 = the latency from dispatch to completion alone, as the kernel measures it
    /// (docs/fast-devices.md, "Think time in the inject limit").
    pub inject_think_time: bool,
    /// `inject_in_time` (1): a synchronous queue drained while waiting (its requests served by
    /// injection into other queues' turns) whose next request arrives within `slice_idle` keeps its
    /// place in B-WF2Q+: it is back-shifted as an in-service queue whose request comes "in time"
    /// during its idle window (seed 000 sec. 3.1), instead of restarting at the system's virtual time.
    /// Without it a reader with one request outstanding, served between its own turns, loses its lag
    /// at each completion and keeps any lead: it ratchets ahead of its share, is never eligible at
    /// the others' expiries, and gets only what injection gives it (two readers weighted 1:3 on the
    /// RAM file: 1:4 to 1:6.5). 0 = restart at the virtual time, as any queue that emptied.
    pub inject_in_time: bool,
    /// `inject_lower_class` (1): injection may serve queues of a lower class than the in-service
    /// queue's (best-effort ones in a real-time queue's turns, idle-class ones in a best-effort
    /// queue's), after every queue of its own class and above, within the same inject limit, as the
    /// kernel's injection does; after they brought the limit to 0 they are held out for a while
    /// (`InjectLimit::lower_class_held_until`). The class order still decides who holds the device;
    /// injection only fills the part its queue leaves unused. 0 = only the in-service queue's class
    /// and higher ones: a real-time random reader with one read outstanding held the RAM file at
    /// 63-77 MiB/s for whole runs, and the best-effort readers beside it got nothing (beyond the
    /// seeds; docs/fast-devices.md "Classes on a fast device").
    pub inject_lower_class: bool,
    /// `inject_random_backoff` (1): when a random (seeky) in-service queue that got less than its
    /// weight's share of its turns is slowed beyond `inject_latency_ratio` by one injected request
    /// and its inject limit falls to 0, and over the last 100 ms or more it was in service at least
    /// three quarters of the time and still got less than three quarters of its share of all the
    /// device dispatched, the limit is tried again from 1 only after a wait that doubles with each
    /// such fall (100 ms up to 1 s), as after a fall in which a sequential queue's device did not
    /// keep up. Tried again at once, the limit went 0, 1, 0 every few hundred microseconds, and a
    /// random reader with four reads outstanding beside sequential readers on the disk file got
    /// 0.53-0.73 of what it reads alone where weighted max-min fairness owes it all (beyond the
    /// seeds and the kernel, which waits a second after every fall to 0: `bfq::injection`,
    /// docs/fast-devices.md "A random queue's limit at 0" and "... held only for a queue owed the
    /// device"). The two conditions on the span leave alone random readers of small weight served
    /// at their share in short turns, and two random readers taking turns. 0 = tried again at once.
    pub inject_random_backoff: bool,
    /// `inject_beside_bypass` (0; opt-in): requests dispatched by the latency-bound bypass ([`super::bypass`])
    /// are the device's background for the in-service queue's inject limit: they do not count
    /// against the limit, a request of the in-service queue served beside only them is a sample of
    /// its latency alone, and their completions do not unsettle its next one. Bypassed queues are
    /// served only while B-WF2Q+ lets them (eligible), so what they take is within their share; counted
    /// as injected, with a dozen of them always in the device the in-service queue never ran alone,
    /// its baseline was never measured, and nothing else was injected into its turns
    /// (docs/fast-devices.md, "The bypass as background"; off by default: with it, a seq-reader test
    /// of split merged queues, `readers_split_out_of_a_merged_queue_are_served_their_queued_requests`,
    /// left two of eight block readers without a byte for 3 s). Also, a latency-bound in-service queue
    /// whose own requests are all in the device and that keeps its turn (not raised) has eligible
    /// latency-bound queues bypassed beside it. Moot with `injection` off. 0 = they count as any
    /// other queue's, and no bypass beside a latency-bound in-service queue.
    pub inject_beside_bypass: bool,
    /// `inject_starting_apps` (1): while the in-service queue's inject limit refuses every other
    /// queue (at 0, reached, or its latency alone not measured yet), a process of an application
    /// starting beside others (raised as interactive in a chain that began after a quiet
    /// `wr_yield_after`) that waits with requests queued is still dispatched beside it, where the
    /// device has room (not into a raised turn, where `inject_into_raised` decides). Such a process is
    /// ahead of the virtual time after a turn of a few milliseconds, cannot preempt until the others'
    /// service moves V, and behind a random reader whose limit `inject_random_backoff` held at 0 it
    /// waited through that reader's turns: gnome-terminal beside four sequential and two random
    /// readers on the RAM file (fast-seq-rand-1-4) took 0.074 s at the median, 0.109-0.119 with
    /// `inject_beside_bypass` (two sets of eight runs; one read held up to 98 ms), and takes 0.058,
    /// 0.070 with it, with this rule; beside fast-startup-mixed's readers and writer on the RAM file
    /// 0.066-0.127 s (one read held up to 70 ms) against 0.042-0.061 (beyond the seeds and the
    /// kernel: docs/fast-devices.md, "A starting application past the inject limit"). Needs
    /// weight raising (`low_latency`), so it never acts under `bfq serve`'s defaults. 0 = it waits
    /// for its turn or for the limit, as any queue.
    pub inject_starting_apps: bool,
    /// `idle_by_think_time` (1): the in-service queue is not idled for when at most one of its last
    /// 8 think times (from the completion that emptied it to its next request) was within the idle
    /// window it would get, unless it is the only busy queue: the window would expire before its next
    /// request, with the device idle for nothing (the kernel asks the think time only of idling for
    /// throughput, not of idling for guarantees). A video player reading a frame every 40 ms, raised
    /// as soft real-time and idled for 20 ms after each frame, held a simulated NVMe drive idle half
    /// the time beside four greedy readers (862 MiB/s against 1,723 without the player; beyond the
    /// seeds: `bfq::idling`, docs/fast-devices.md "Idling for a queue that comes back late"). 0 = the
    /// seeds' and the kernel's rule.
    pub idle_by_think_time: bool,
    /// `raised_idle_short_think` (1): on a device that queues internally and is not a spinning disk, a
    /// raised queue is idled for only while its think time is short: not when at most one of its
    /// last 8 think times was within `slice_idle`, nor while it is raised as soft real-time with its
    /// last 3 longer than `slice_idle` (unless it is the only busy queue; docs/fast-devices.md "A
    /// player in another tenant's burst"). Its next
    /// request takes the device back on arrival (a raised queue preempts one that is not), into a
    /// device that serves it beside the others' requests at a fraction of a millisecond more. A
    /// video player reading a frame every 20 ms came back within its 20-ms raised window each time:
    /// idled for, it held the simulated NVMe drive beside five random readers and five random
    /// writers at 90 MiB/s against 1,589 under FIFO (1,403 without the player), for a whole
    /// 20-s run, with no frame late under either (beyond the kernel, which idles for raised queues
    /// whatever their think time: `bfq::idling`, docs/fast-devices.md "A raised queue that thinks
    /// long"). 0 = idled for as the kernel does.
    pub raised_idle_short_think: bool,
    /// `share_horizon` (250 ms; 0 = off, as the seeds and the kernel): on a device that queues
    /// internally and is not a spinning disk, a synchronous queue's budget is at most what its
    /// weight's share of the device's peak rate serves in this time, B_max x (share_horizon /
    /// timeout_sync) x its weight over the weights of the queues active in the last second (beyond
    /// the seeds: `bfq::budget_share`). B-WF2Q+ keeps each queue within about one budget of its share
    /// (seed 000 sec. 3.1); with B_max for every queue, a weight-100 reader among twenty-four
    /// latency-bound readers read about four budgets in a run of seconds and was 15-36 % off its
    /// share on this machine's disk file (docs/fast-devices.md, "Budgets sized by the share").
    /// Not applied when `max_budget` fixes B_max.
    pub share_horizon: Nanos,
    /// `raised_idle_shallow_only` (1): while every busy queue is weight-raised, a raised queue is
    /// idled for against a loaded device (others' requests in flight, kernel: at least 4) only if it
    /// is shallow (at most 4 requests outstanding lately): idling protects a queue's next request
    /// from the others' requests in the device, and a deep queue's next request waits behind its own
    /// anyway. Four new tenants of equal weight, eight reads outstanding each, all raised as new
    /// queues, otherwise waited for each other's requests to complete for the whole raising period
    /// (the simulated NVMe drive delivered 0.92 of FIFO's throughput over their first 0.8 s). 0 = the
    /// kernel's rule, whatever the queue's depth (docs/fast-devices.md, "New tenants that are all
    /// raised").
    pub raised_idle_shallow_only: bool,
    /// `waker_detection` (1): a queue that keeps becoming backlogged just after another queue's
    /// completions (3 times within 4 ms) is that queue's wakee; wakers and wakees are injected first
    /// and without the latency limit while the other waits with nothing in the device (kernel-bfq-
    /// reference.md "Waker/wakee"). A wake-up after which the waker issued again before the woken
    /// queue's request completed is no hand-over and does not count (`injection::WakerState::refute`).
    pub waker_detection: bool,
    /// `fair_charge` (1): a slot charged by its time (budget timeout, slow slot) is split among the
    /// in-service queue and the queues injected in it by their sectors; with injection the device was
    /// shared, and charging the whole time to the in-service queue would count the other queues'
    /// service against it too.
    pub fair_charge: bool,
    /// `deep_charge_service` (1): on a device that queues internally and is not a spinning disk (by
    /// its flag, or by serving random requests faster than one can), a slot that ended by budget
    /// timeout or slowly while the queue kept at least half of the device's queue depth outstanding is
    /// charged its service, not its time (beyond the seeds, whose time charge is for queues that
    /// leave a disk seeking or idle: this one kept the device busy, and was slow because the device is
    /// slow for its requests). Charged by time, a database of 32 random 4 KiB reads outstanding
    /// (weight 300) beside a scan of 64 KiB reads (300) and a backup of 1 MiB ones (100) got 18-25 %
    /// less than its share on this machine's disk file and the backup 32-48 % more
    /// (docs/fast-devices.md, "A deep random queue charged by its time").
    pub deep_charge_service: bool,
    /// `drain_grace` (1): a synchronous random queue that keeps more requests outstanding than a
    /// latency-bound one, or (not on a spinning disk) a synchronous queue of few large requests, that
    /// drains for a moment while it is cut off or waiting keeps its place in B-WF2Q+ for `slice_idle`,
    /// and is idled for if selected in that time (beyond the seeds: `bfq::grace`). 0 = it leaves the
    /// tree at once, as in the seeds and the kernel.
    pub drain_grace: bool,
    /// `grace_latency_bound` (0; opt-in): with `drain_grace`, off a spinning disk, a latency-bound sync queue
    /// of small requests (at most `bypass_depth` outstanding) keeps its place for `slice_idle` too
    /// when it drains out of its turns. Such a queue with a think time between its requests (a client
    /// over a network, a reader that computes between reads) drains after most completions; leaving
    /// the tree each time, its weight left the virtual time's sum and the deeper queues beside it got
    /// more than their share: twelve readers of two 4 KiB reads at weight 300 beside twelve of four
    /// at weight 100 (fast-many-tenants) were activated 1,600 times a second each, and the lighter
    /// ones got 14 % over their share (docs/fast-devices.md, "The bypass as background"). 0 = such
    /// a queue leaves at once and comes back at the virtual time, as in the seeds.
    pub grace_latency_bound: bool,
    /// `share_in_flight` (0 = off; opt-in, in percent, e.g. 20): on a device with internal
    /// queueing, in a symmetric scenario (where BFQ does not idle), queues that got more than their
    /// weight's share of what the device completed while another got less (its requests spending
    /// their time in the device, not waiting in the scheduler) have their sectors in the device
    /// capped, the caps learned window by window, let go when holding the others back no longer
    /// speeds the short queue up, and costing at most this percent of the aggregate (beyond the
    /// seeds and the kernel: `bfq::device_share`). Without it, queues of one weight whose requests
    /// all go to the device at once divide it by the bytes each keeps there: random readers of 8,
    /// 16 and 64 KiB with 16 outstanding each, 1:2:8 on the NVMe preset (docs/fast-devices.md,
    /// "Equal weights, different sizes").
    pub share_in_flight: u32,
    /// `preempt_back_in_time` (1): on a device that queues internally and is not a spinning disk,
    /// in a symmetric scenario (one weight, class and group, nobody raised, no queue idled for its
    /// pattern: where BFQ does not idle), a synchronous queue whose turn ended because it had no
    /// more requests, with budget left, takes the device back when its next request comes "in
    /// time" (within `slice_idle` of that expiry, the window of the back-shift, seed 000 sec. 3.1)
    /// if B-WF2Q+ would have served it first: eligible, with an earlier finish time than the
    /// in-service queue (the kernel's preemption by a queue in a "non-blocking wait" for its next
    /// request; beyond the seeds, whose turns are never cut short). Without it such a queue, whose reads were all
    /// in the device when its turn ended, waited for the in-service queue's whole budget: a random
    /// reader of 16 KiB x 8 outstanding beside one of 32 KiB x 32, same weight, got 1.7 % of the
    /// bytes through the engine (docs/fast-devices.md, "A reader whose reads are all in the
    /// device"). 0 = it waits for the in-service queue's turn to end, as in the seeds.
    pub preempt_back_in_time: bool,
    /// `one_group_symmetric` (1): busy queues in one group only, whichever (the root counted as a
    /// group), do not make the scenario asymmetric; busy queues in two groups or more do. This is
    /// the kernel's rule since Linux 6.2 (kernel-bfq-reference.md "Idling": "more than one group
    /// with pending requests"). 0 = any backlogged group other than the root makes the scenario
    /// asymmetric, as in the kernels from 4.19 to 6.1: then `bfq serve`, whose connections are
    /// queues in their export's group, idled for each connection's random reads even with one
    /// export busy, and a client of 16 KiB x 8 reads held one of 32 KiB x 32 on the same export to
    /// its own rate (docs/serve.md, "One export busy is a symmetric scenario").
    pub one_group_symmetric: bool,
    /// `arrival_order` (1): on a device that is not a spinning disk (`Bfq::spinning_disk`: not
    /// rotational, or rotational but serving random requests faster than a disk can), a queue's
    /// requests go in arrival order, sync before async, after expired and metadata ones; on a
    /// spinning disk in C-LOOK order (seed 000 sec. 3, step 2.a), whose point is the seeks it saves.
    /// Without seeks to save, C-LOOK's sweep only reorders a random reader's requests: one just
    /// behind the head waits until the sweep wraps while new ones land ahead of it, up to the FIFO
    /// deadline (`fifo_expire_sync`, 125 ms). Through `bfq serve` a client of 32 random reads of 32
    /// KiB beside a shallower one on another export had a p99 of 46-124 ms (docs/serve.md, "Arrival
    /// order off spinning disks"). 0 = C-LOOK on every device, as in the seeds and the kernel.
    pub arrival_order: bool,
    /// `grace_hand_over` (1): a queue back with its next request within its drain grace (it never
    /// left B-WF2Q+) is judged against the in-service queue as a queue that becomes busy is: the
    /// hand-over within a start-up, and whether the in-service queue still needs idling
    /// (`bfq::activation`, `check_preemption`). 0 = it waits for the in-service queue's turn or
    /// idle window to end, served meanwhile only by injection (moot without `drain_grace`).
    pub grace_hand_over: bool,
    /// `raised_sibling_wait` (1): while a raised queue is idled for on a device that queues
    /// internally, with nothing of its own in the device, and has waited longer than it takes to come
    /// back (twice its median think time, at least 250 us), queues of its group raised as it is (same
    /// class and weight) go in whatever the inject limit (beyond the seeds and the kernel:
    /// `bfq::injection`, "Raised siblings"). 0 = only its waker, its wakee and the inject limit.
    pub raised_sibling_wait: bool,
    /// `inject_into_raised` (`starting-apps`): which queues injection may serve in the turns of a
    /// weight-raised in-service queue whose think time is short (a starting application's process).
    /// The kernel injects only weight-raised queues there, on every device; on a spinning disk each
    /// request injected beside such a queue costs its next request a seek, and start-ups beside
    /// ten readers on seed 003's NCQ disk took 1.1-1.9x as long as with that rule
    /// (`raised-on-disks`). Elsewhere `starting-apps` applies it only to the processes of an
    /// application starting beside others (a chain of raisings that began after a quiet
    /// `wr_yield_after`): on the SSD preset gnome-terminal beside ten sequential readers took 1.6x
    /// its idle time with any queue injected, each of its 4 KiB reads behind a reader's 128 KiB
    /// one, while tenants that start together with the run and stay raised for seconds keep any
    /// queue injected into their turns (the rule for every raised queue, `raised`, left the random
    /// readers of fast-seq-rand-10-1 62 % short of their share, 25 % otherwise). `any` = within the
    /// inject limit like any turn (beyond the kernel).
    pub inject_into_raised: InjectIntoRaised,
    /// `hand_over_budget` (1): on a device that queues internally and is not a spinning disk, a
    /// process of an application starting beside others (raised in a chain of raisings that began
    /// after a quiet `wr_yield_after`) whose turn ends because a raised queue takes the device from
    /// it while it has nothing queued (a hand-over from one process to the next,
    /// `Bfq::check_preemption`) gets the budget of a queue with no more requests, what it used,
    /// not the budget it had (beyond the kernel, which keeps a preempted queue's budget:
    /// `bfq::budget`). With the budget it had (B_max, 8192 sectors on the NVMe preset), its
    /// B-WF2Q+ finish time at its next request was behind that of every sequential reader that
    /// `share_horizon` held to 256 sectors, so at each hand-over the ten readers were selected
    /// first and put ten 128 KiB reads in the device right before the start-up's 4 KiB one.
    /// 0 = a preempted queue keeps its budget.
    pub hand_over_budget: bool,
    /// `wr_cohort_end` (1): on a device that queues internally, when a queue's interactive
    /// raising ends by `max_service_from_wr`, the interactive raisings of the queues raised in the
    /// same chain (each within `wr_yield_after` of the one before: tenants that started together)
    /// end too, but for latency-bound ones (few
    /// small requests outstanding, as a start-up process) and for an application starting beside
    /// others (`Raising::starting_app`, whose processes the cap ends one by one as the kernel does).
    /// Tenants that start together are all raised x30, which keeps their weights' ratio; a heavier
    /// one reads the cap first and loses its raising while a lighter one keeps x30 until it reads the
    /// cap too, so the lighter got ten times the heavier's share in between: on the SSD preset two
    /// random readers of weight 100 beside two of weight 300 got 74 MiB against 46 in the second
    /// second, and through the engine in a slower guest (40 MiB/s of random reads) the weights 1:3
    /// came out 1:1 over eight seconds (docs/fast-devices.md, "Tenants raised together"). 0 = each
    /// raising ends by its own service, as the kernel (beyond the kernel).
    pub wr_cohort_end: bool,
    /// `sibling_wait_any` (1): with `raised_sibling_wait`, past its wait and with the device otherwise
    /// empty, on a device that is not a spinning disk, one request of any queue of the raised
    /// queue's group and class goes in if no queue raised as it is has one (beyond the seeds and
    /// the kernel: `bfq::injection`, "Raised siblings"). 0 = only queues raised as it is.
    pub sibling_wait_any: bool,
    /// `pattern_asymmetry` (1): a random synchronous queue that keeps more requests outstanding than
    /// a latency-bound one (`bypass_depth`) is idled for as in an asymmetric scenario while a
    /// sequential synchronous queue is busy, whatever their weights (beyond the seeds and the
    /// kernel: `bfq::symmetry`). Without it, such a queue whose requests are all in the device has
    /// nothing queued, ends its slot at once and waits the sequential queue's whole slot for its
    /// next turn: of the same weight, a 32-deep random reader beside a reader of 1 MiB blocks got
    /// 89-118 MiB/s of the 349 it reads alone on this machine's disk file, and with the weights 100
    /// and 101 (an asymmetric scenario) 270-294. 0 = the kernel's rule (weights, classes and groups
    /// only).
    pub pattern_asymmetry: bool,
    /// `bypass_depth` (2 requests): on a device with internal queueing, a waiting synchronous queue
    /// that keeps at most this many requests outstanding (latency-bound: it cannot use more than
    /// what its request latency allows) has its next request dispatched at once beside the in-service
    /// queue, as long as that request is B-WF2Q+-eligible, instead of waiting for the in-service
    /// queue's slot to end; the service is charged to it as injected service is (beyond the seeds:
    /// the mirror image of injection, `bfq::bypass`). 0 = off, the seeds' and the kernel's BFQ.
    pub bypass_depth: u32,
    /// `latency_guard` (0 = off; e.g. 150 %): while a latency-bound queue (see `bypass_depth`; for
    /// the guard also with at most 32 KiB outstanding per request) that may be served is active on a
    /// device with internal queueing, the other queues' requests in the device are held to a limit
    /// learned so that its requests take at most this much of their
    /// baseline latency (beyond the seeds: `bfq::guard`). Off by default: it trades the greedy
    /// queues' throughput for the light queue's tail latency, which pays where a device queues
    /// requests behind each other (docs/serve.md) and costs where it does not (docs/fast-devices.md).
    pub latency_guard: u32,
    /// `guard_split_kib` (16 KiB): while the latency guard is on, a read or write of a queue that is
    /// not latency-bound larger than this is inserted as pieces of this size (see
    /// [`crate::Scheduler::split_size`]), so that the guard's limit, which counts requests, bounds the
    /// bytes the others hold in the device ahead of a guarded request, not just their number (a
    /// 4 KiB read behind one 128 KiB read waits for all of it). 0 = never split.
    pub guard_split_kib: u32,
    /// `guard_by_share` (0): what the latency guard's limit follows. 0: the guarded requests' latency
    /// against their baseline (`latency_guard` percent of it, a tail-latency target). 1: the guarded
    /// queue's share: over windows of 16 MiB completed while the guard is on, the limit shrinks when
    /// the queue completed less than its weight's share of them (by more than 1/16, its reads having
    /// spent their time in the device rather than waiting for their turn) and grows otherwise, so
    /// that it settles where the queue gets its weighted max-min share and the others keep every
    /// byte of the device it does not need; the same limit bounds the others in its own turns
    /// (`latency_guard` must be on; beyond the seeds: `bfq::guard`, docs/fast-devices.md "The guard
    /// by share" and "The guard by share, without the ratchet").
    pub guard_by_share: bool,
    /// `guard_inject_floor` (0, opt-in): with the latency guard on (`latency_guard`), in the turn of
    /// a queue it guards (idled for, as in an asymmetric scenario), one request of the other queues
    /// may be in the device even where that queue's learned inject limit is 0 (its latency alone
    /// measured and not due again): the guard's baseline is its latency beside one such request, and
    /// the guard slows the others, never stops them. At 0, a copy beside a light client of another export of
    /// one weight got nothing through the light client's 20-ms turns on this machine's disk file,
    /// where one 16 KiB piece beside a 4 KiB read is enough to fail the inject limit's test
    /// (beyond the seeds and the kernel: `bfq::injection`; docs/serve.md, "A light client of another
    /// export"). It costs the light client: where the copy started first, its median 1.12-1.28x its
    /// median alone against 0.88-0.97x, its p99 1.25-1.48x against 1.14-1.17x (the copy +10-30 %),
    /// so it is not a default. 0 = the inject limit alone decides, as without the guard.
    pub guard_inject_floor: bool,
}

impl Default for BfqConfig {
    fn default() -> Self {
        BfqConfig {
            slice_idle: 8 * MSEC,
            timeout_sync: 125 * MSEC,
            max_budget: 0,
            low_latency: true,
            strict_guarantees: false,
            back_seek_max_kib: 16384,
            back_seek_penalty: 2,
            fifo_expire_sync: 125 * MSEC,
            fifo_expire_async: 250 * MSEC,
            v1_heuristics: true,
            weight_raising: WeightRaising::V7r8,
            peak_rate_estimator: Variant::Paper,
            budget_feedback: Variant::Paper,
            idling_policy: IdlingPolicy::Kernel,
            write_charge: 3,
            write_charge_rule: WriteChargeRule::Kernel,
            wr_coeff: 0,
            wr_budget: 49_152,
            wr_max_time: 6 * SEC,
            wr_min_idle_time: 2 * SEC,
            max_service_from_wr: 120_000,
            softrt_max_rate: 7000,
            softrt_duration: 300 * MSEC,
            softrt_coeff: 3000,
            softrt_back_to_interactive: true,
            idle_class_guard: 200 * MSEC,
            seeky_threshold: 8192,
            merge: true,
            merge_distance: 8192,
            merge_keeps_weights: true,
            large_burst: true,
            burst_active_only: true,
            softrt_tenant_burst: true,
            wr_default_weight_only: false,
            max_lead_wait: SEC,
            raised_seeky_timeout: true,
            seeky_timeout_waits: true,
            async_held_on_disks: true,
            async_depth_raised: 0,
            wr_yield_after: SEC,
            injection: true,
            inject_latency_ratio: 115,
            inject_reserve: true,
            inject_within_share: true,
            inject_deep_within_share: true,
            inject_deep_share_measured: true,
            inject_think_time: true,
            inject_in_time: true,
            inject_lower_class: true,
            inject_random_backoff: true,
            inject_beside_bypass: false,
            inject_starting_apps: true,
            idle_by_think_time: true,
            raised_idle_short_think: true,
            share_horizon: 250 * MSEC,
            raised_idle_shallow_only: true,
            waker_detection: true,
            fair_charge: true,
            deep_charge_service: true,
            drain_grace: true,
            grace_latency_bound: false,
            share_in_flight: 0,
            grace_hand_over: true,
            preempt_back_in_time: true,
            one_group_symmetric: true,
            arrival_order: true,
            raised_sibling_wait: true,
            inject_into_raised: InjectIntoRaised::StartingApps,
            hand_over_budget: true,
            wr_cohort_end: true,
            sibling_wait_any: true,
            pattern_asymmetry: true,
            bypass_depth: 2,
            latency_guard: 0,
            guard_split_kib: 16,
            guard_by_share: false,
            guard_inject_floor: false,
        }
    }
}

/// The tunable names, in the order [`BfqConfig::params`] lists them.
pub const PARAM_NAMES: &[&str] = &[
    "slice_idle",
    "slice_idle_us",
    "timeout_sync",
    "max_budget",
    "low_latency",
    "strict_guarantees",
    "back_seek_max",
    "back_seek_penalty",
    "fifo_expire_sync",
    "fifo_expire_async",
    "v1_heuristics",
    "weight_raising",
    "peak_rate_estimator",
    "budget_feedback",
    "idling_policy",
    "write_charge",
    "write_charge_rule",
    "wr_coeff",
    "wr_budget",
    "wr_max_time",
    "wr_min_idle_time",
    "max_service_from_wr",
    "softrt_max_rate",
    "softrt_duration",
    "softrt_coeff",
    "softrt_back_to_interactive",
    "idle_class_guard",
    "seeky_threshold",
    "merge",
    "merge_distance",
    "merge_keeps_weights",
    "large_burst",
    "wr_default_weight_only",
    "max_lead_wait",
    "raised_seeky_timeout",
    "seeky_timeout_waits",
    "async_held_on_disks",
    "async_depth_raised",
    "wr_yield_after",
    "injection",
    "inject_latency_ratio",
    "inject_reserve",
    "inject_within_share",
    "inject_deep_within_share",
    "inject_deep_share_measured",
    "inject_think_time",
    "inject_in_time",
    "inject_lower_class",
    "inject_random_backoff",
    "inject_beside_bypass",
    "inject_starting_apps",
    "idle_by_think_time",
    "raised_idle_short_think",
    "share_horizon",
    "raised_idle_shallow_only",
    "waker_detection",
    "fair_charge",
    "deep_charge_service",
    "drain_grace",
    "grace_latency_bound",
    "share_in_flight",
    "grace_hand_over",
    "preempt_back_in_time",
    "one_group_symmetric",
    "arrival_order",
    "raised_sibling_wait",
    "inject_into_raised",
    "hand_over_budget",
    "wr_cohort_end",
    "sibling_wait_any",
    "pattern_asymmetry",
    "burst_active_only",
    "softrt_tenant_burst",
    "bypass_depth",
    "latency_guard",
    "guard_split_kib",
    "guard_by_share",
    "guard_inject_floor",
];

const IDLING_POLICIES: [(&str, IdlingPolicy); 3] =
    [("v1", IdlingPolicy::V1), ("v7r8", IdlingPolicy::V7r8), ("kernel", IdlingPolicy::Kernel)];

fn parse_choice<T: Copy>(key: &str, value: &str, choices: &[(&str, T)]) -> Result<T, ParamError> {
    let v = value.trim().to_ascii_lowercase();
    choices.iter().find(|(n, _)| *n == v).map(|(_, c)| *c).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        ParamError::invalid(NAME, key, value, format!("one of {}", names.join(", ")))
    })
}

impl BfqConfig {
    /// The interactive weight-raising coefficient in force (C_rais).
    pub fn interactive_coeff(&self) -> u32 {
        match (self.wr_coeff, self.weight_raising) {
            (0, WeightRaising::V1) => 10,
            (0, WeightRaising::V7r8) => 30,
            (c, _) => c,
        }
    }

    /// Whether the kernel's peak-rate sampler is in force (it is a BFQ+ heuristic: the original
    /// algorithm, `v1_heuristics=0`, keeps its own estimator).
    pub fn kernel_peak_rate(&self) -> bool {
        self.v1_heuristics && self.peak_rate_estimator == Variant::Kernel
    }

    /// Sets the tunable `key` from its textual value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        let ms = |min, max| parse_duration(NAME, key, value, MSEC, min, max);
        match key {
            "slice_idle" => self.slice_idle = ms(0, 1000)?,
            "slice_idle_us" => self.slice_idle = parse_duration(NAME, key, value, USEC, 0, 1_000_000)?,
            "timeout_sync" => self.timeout_sync = ms(1, 10_000)?,
            "max_budget" => self.max_budget = parse_u64(NAME, key, value, 0, 1 << 24)?,
            "low_latency" => self.low_latency = parse_bool(NAME, key, value)?,
            "strict_guarantees" => self.strict_guarantees = parse_bool(NAME, key, value)?,
            "back_seek_max" => self.back_seek_max_kib = parse_u64(NAME, key, value, 0, 1 << 30)?,
            "back_seek_penalty" => self.back_seek_penalty = parse_u64(NAME, key, value, 1, 1000)?,
            "fifo_expire_sync" => self.fifo_expire_sync = ms(1, 100_000)?,
            "fifo_expire_async" => self.fifo_expire_async = ms(1, 100_000)?,
            "v1_heuristics" => self.v1_heuristics = parse_bool(NAME, key, value)?,
            "weight_raising" => {
                self.weight_raising =
                    parse_choice(key, value, &[("v1", WeightRaising::V1), ("v7r8", WeightRaising::V7r8)])?
            }
            "peak_rate_estimator" => {
                self.peak_rate_estimator =
                    parse_choice(key, value, &[("paper", Variant::Paper), ("kernel", Variant::Kernel)])?
            }
            "budget_feedback" => {
                self.budget_feedback =
                    parse_choice(key, value, &[("paper", Variant::Paper), ("kernel", Variant::Kernel)])?
            }
            "idling_policy" => self.idling_policy = parse_choice(key, value, &IDLING_POLICIES)?,
            "write_charge" => self.write_charge = parse_u64(NAME, key, value, 1, 100)?,
            "write_charge_rule" => self.write_charge_rule = parse_choice(key, value, &WRITE_CHARGE_RULES)?,
            "wr_coeff" => self.wr_coeff = parse_u64(NAME, key, value, 0, 1000)? as u32,
            "wr_budget" => self.wr_budget = parse_u64(NAME, key, value, 1, 1 << 30)?,
            "wr_max_time" => self.wr_max_time = ms(1, 3_600_000)?,
            "wr_min_idle_time" => self.wr_min_idle_time = ms(0, 3_600_000)?,
            "max_service_from_wr" => self.max_service_from_wr = parse_u64(NAME, key, value, 0, 1 << 40)?,
            "softrt_max_rate" => self.softrt_max_rate = parse_u64(NAME, key, value, 1, 1 << 30)?,
            "softrt_duration" => self.softrt_duration = ms(1, 3_600_000)?,
            "softrt_coeff" => self.softrt_coeff = parse_u64(NAME, key, value, 1, 10_000)? as u32,
            "softrt_back_to_interactive" => self.softrt_back_to_interactive = parse_bool(NAME, key, value)?,
            "idle_class_guard" => self.idle_class_guard = ms(1, 100_000)?,
            "seeky_threshold" => self.seeky_threshold = parse_u64(NAME, key, value, 1, 1 << 40)?,
            "merge" => self.merge = parse_bool(NAME, key, value)?,
            "merge_distance" => self.merge_distance = parse_u64(NAME, key, value, 0, 1 << 40)?,
            "merge_keeps_weights" => self.merge_keeps_weights = parse_bool(NAME, key, value)?,
            "large_burst" => self.large_burst = parse_bool(NAME, key, value)?,
            "wr_default_weight_only" => self.wr_default_weight_only = parse_bool(NAME, key, value)?,
            "max_lead_wait" => self.max_lead_wait = ms(0, 3_600_000)?,
            "raised_seeky_timeout" => self.raised_seeky_timeout = parse_bool(NAME, key, value)?,
            "seeky_timeout_waits" => self.seeky_timeout_waits = parse_bool(NAME, key, value)?,
            "async_held_on_disks" => self.async_held_on_disks = parse_bool(NAME, key, value)?,
            "async_depth_raised" => self.async_depth_raised = parse_u64(NAME, key, value, 0, 16)? as u32,
            "wr_yield_after" => self.wr_yield_after = ms(0, 3_600_000)?,
            "injection" => self.injection = parse_bool(NAME, key, value)?,
            "inject_reserve" => self.inject_reserve = parse_bool(NAME, key, value)?,
            "inject_within_share" => self.inject_within_share = parse_bool(NAME, key, value)?,
            "inject_deep_within_share" => self.inject_deep_within_share = parse_bool(NAME, key, value)?,
            "inject_deep_share_measured" => self.inject_deep_share_measured = parse_bool(NAME, key, value)?,
            "inject_think_time" => self.inject_think_time = parse_bool(NAME, key, value)?,
            "inject_in_time" => self.inject_in_time = parse_bool(NAME, key, value)?,
            "inject_lower_class" => self.inject_lower_class = parse_bool(NAME, key, value)?,
            "inject_random_backoff" => self.inject_random_backoff = parse_bool(NAME, key, value)?,
            "inject_beside_bypass" => self.inject_beside_bypass = parse_bool(NAME, key, value)?,
            "inject_starting_apps" => self.inject_starting_apps = parse_bool(NAME, key, value)?,
            "idle_by_think_time" => self.idle_by_think_time = parse_bool(NAME, key, value)?,
            "raised_idle_short_think" => self.raised_idle_short_think = parse_bool(NAME, key, value)?,
            "share_horizon" => self.share_horizon = ms(0, 10_000)?,
            "raised_idle_shallow_only" => self.raised_idle_shallow_only = parse_bool(NAME, key, value)?,
            "inject_latency_ratio" => {
                self.inject_latency_ratio = parse_u64(NAME, key, value, 100, 1000)? as u32
            }
            "waker_detection" => self.waker_detection = parse_bool(NAME, key, value)?,
            "fair_charge" => self.fair_charge = parse_bool(NAME, key, value)?,
            "deep_charge_service" => self.deep_charge_service = parse_bool(NAME, key, value)?,
            "drain_grace" => self.drain_grace = parse_bool(NAME, key, value)?,
            "grace_latency_bound" => self.grace_latency_bound = parse_bool(NAME, key, value)?,
            "share_in_flight" => self.share_in_flight = parse_u64(NAME, key, value, 0, 90)? as u32,
            "grace_hand_over" => self.grace_hand_over = parse_bool(NAME, key, value)?,
            "preempt_back_in_time" => self.preempt_back_in_time = parse_bool(NAME, key, value)?,
            "one_group_symmetric" => self.one_group_symmetric = parse_bool(NAME, key, value)?,
            "arrival_order" => self.arrival_order = parse_bool(NAME, key, value)?,
            "raised_sibling_wait" => self.raised_sibling_wait = parse_bool(NAME, key, value)?,
            "inject_into_raised" => self.inject_into_raised = parse_choice(key, value, &INJECT_INTO_RAISED)?,
            "hand_over_budget" => self.hand_over_budget = parse_bool(NAME, key, value)?,
            "wr_cohort_end" => self.wr_cohort_end = parse_bool(NAME, key, value)?,
            "sibling_wait_any" => self.sibling_wait_any = parse_bool(NAME, key, value)?,
            "pattern_asymmetry" => self.pattern_asymmetry = parse_bool(NAME, key, value)?,
            "burst_active_only" => self.burst_active_only = parse_bool(NAME, key, value)?,
            "softrt_tenant_burst" => self.softrt_tenant_burst = parse_bool(NAME, key, value)?,
            "bypass_depth" => self.bypass_depth = parse_u64(NAME, key, value, 0, 4096)? as u32,
            "latency_guard" => {
                let v = parse_u64(NAME, key, value, 0, 1000)? as u32;
                if v != 0 && v <= 100 {
                    return Err(ParamError::invalid(
                        NAME,
                        key,
                        value,
                        "0 (off) or a percentage above 100 (the latency allowed, of the baseline)",
                    ));
                }
                self.latency_guard = v
            }
            "guard_split_kib" => {
                let v = parse_u64(NAME, key, value, 0, 1 << 20)? as u32;
                if v != 0 && v < 4 {
                    return Err(ParamError::invalid(NAME, key, value, "0 (never split) or at least 4 (KiB)"));
                }
                self.guard_split_kib = v
            }
            "guard_by_share" => self.guard_by_share = parse_bool(NAME, key, value)?,
            "guard_inject_floor" => self.guard_inject_floor = parse_bool(NAME, key, value)?,
            _ => return Err(ParamError::unknown(NAME, key, PARAM_NAMES)),
        }
        Ok(())
    }

    /// Every tunable with its value as text, in [`PARAM_NAMES`] order (durations in the tunable's unit).
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let b = |v: bool| u8::from(v).to_string();
        let variant = |v: Variant| if v == Variant::Paper { "paper" } else { "kernel" }.to_string();
        vec![
            ("slice_idle", (self.slice_idle / MSEC).to_string()),
            ("slice_idle_us", (self.slice_idle / USEC).to_string()),
            ("timeout_sync", (self.timeout_sync / MSEC).to_string()),
            ("max_budget", self.max_budget.to_string()),
            ("low_latency", b(self.low_latency)),
            ("strict_guarantees", b(self.strict_guarantees)),
            ("back_seek_max", self.back_seek_max_kib.to_string()),
            ("back_seek_penalty", self.back_seek_penalty.to_string()),
            ("fifo_expire_sync", (self.fifo_expire_sync / MSEC).to_string()),
            ("fifo_expire_async", (self.fifo_expire_async / MSEC).to_string()),
            ("v1_heuristics", b(self.v1_heuristics)),
            (
                "weight_raising",
                if self.weight_raising == WeightRaising::V1 { "v1" } else { "v7r8" }.to_string(),
            ),
            ("peak_rate_estimator", variant(self.peak_rate_estimator)),
            ("budget_feedback", variant(self.budget_feedback)),
            ("idling_policy", choice_name(&IDLING_POLICIES, &self.idling_policy).to_string()),
            ("write_charge", self.write_charge.to_string()),
            ("write_charge_rule", choice_name(&WRITE_CHARGE_RULES, &self.write_charge_rule).to_string()),
            ("wr_coeff", self.wr_coeff.to_string()),
            ("wr_budget", self.wr_budget.to_string()),
            ("wr_max_time", (self.wr_max_time / MSEC).to_string()),
            ("wr_min_idle_time", (self.wr_min_idle_time / MSEC).to_string()),
            ("max_service_from_wr", self.max_service_from_wr.to_string()),
            ("softrt_max_rate", self.softrt_max_rate.to_string()),
            ("softrt_duration", (self.softrt_duration / MSEC).to_string()),
            ("softrt_coeff", self.softrt_coeff.to_string()),
            ("softrt_back_to_interactive", b(self.softrt_back_to_interactive)),
            ("idle_class_guard", (self.idle_class_guard / MSEC).to_string()),
            ("seeky_threshold", self.seeky_threshold.to_string()),
            ("merge", b(self.merge)),
            ("merge_distance", self.merge_distance.to_string()),
            ("merge_keeps_weights", b(self.merge_keeps_weights)),
            ("large_burst", b(self.large_burst)),
            ("wr_default_weight_only", b(self.wr_default_weight_only)),
            ("max_lead_wait", (self.max_lead_wait / MSEC).to_string()),
            ("raised_seeky_timeout", b(self.raised_seeky_timeout)),
            ("seeky_timeout_waits", b(self.seeky_timeout_waits)),
            ("async_held_on_disks", b(self.async_held_on_disks)),
            ("async_depth_raised", self.async_depth_raised.to_string()),
            ("wr_yield_after", (self.wr_yield_after / MSEC).to_string()),
            ("injection", b(self.injection)),
            ("inject_latency_ratio", self.inject_latency_ratio.to_string()),
            ("inject_reserve", b(self.inject_reserve)),
            ("inject_within_share", b(self.inject_within_share)),
            ("inject_deep_within_share", b(self.inject_deep_within_share)),
            ("inject_deep_share_measured", b(self.inject_deep_share_measured)),
            ("inject_think_time", b(self.inject_think_time)),
            ("inject_in_time", b(self.inject_in_time)),
            ("inject_lower_class", b(self.inject_lower_class)),
            ("inject_random_backoff", b(self.inject_random_backoff)),
            ("inject_beside_bypass", b(self.inject_beside_bypass)),
            ("inject_starting_apps", b(self.inject_starting_apps)),
            ("idle_by_think_time", b(self.idle_by_think_time)),
            ("raised_idle_short_think", b(self.raised_idle_short_think)),
            ("share_horizon", (self.share_horizon / MSEC).to_string()),
            ("raised_idle_shallow_only", b(self.raised_idle_shallow_only)),
            ("waker_detection", b(self.waker_detection)),
            ("fair_charge", b(self.fair_charge)),
            ("deep_charge_service", b(self.deep_charge_service)),
            ("drain_grace", b(self.drain_grace)),
            ("grace_latency_bound", b(self.grace_latency_bound)),
            ("share_in_flight", self.share_in_flight.to_string()),
            ("grace_hand_over", b(self.grace_hand_over)),
            ("preempt_back_in_time", b(self.preempt_back_in_time)),
            ("one_group_symmetric", b(self.one_group_symmetric)),
            ("arrival_order", b(self.arrival_order)),
            ("raised_sibling_wait", b(self.raised_sibling_wait)),
            ("inject_into_raised", choice_name(&INJECT_INTO_RAISED, &self.inject_into_raised).to_string()),
            ("hand_over_budget", b(self.hand_over_budget)),
            ("wr_cohort_end", b(self.wr_cohort_end)),
            ("sibling_wait_any", b(self.sibling_wait_any)),
            ("pattern_asymmetry", b(self.pattern_asymmetry)),
            ("burst_active_only", b(self.burst_active_only)),
            ("softrt_tenant_burst", b(self.softrt_tenant_burst)),
            ("bypass_depth", self.bypass_depth.to_string()),
            ("latency_guard", self.latency_guard.to_string()),
            ("guard_split_kib", self.guard_split_kib.to_string()),
            ("guard_by_share", b(self.guard_by_share)),
            ("guard_inject_floor", b(self.guard_inject_floor)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_tunables_have_the_kernel_defaults() {
        // kernel-bfq-reference.md "Tunables".
        let c = BfqConfig::default();
        let p: std::collections::HashMap<_, _> = c.params().into_iter().collect();
        assert_eq!(p["slice_idle"], "8");
        assert_eq!(p["slice_idle_us"], "8000");
        assert_eq!(p["timeout_sync"], "125");
        assert_eq!(p["max_budget"], "0");
        assert_eq!(p["low_latency"], "1");
        assert_eq!(p["strict_guarantees"], "0");
        assert_eq!(p["back_seek_max"], "16384");
        assert_eq!(p["back_seek_penalty"], "2");
        assert_eq!(p["fifo_expire_sync"], "125");
        assert_eq!(p["fifo_expire_async"], "250");
    }

    #[test]
    fn every_listed_param_round_trips_through_set() {
        // Issue 2 "One configuration": every tunable is settable by name from its listed value.
        let mut c = BfqConfig::default();
        for (k, v) in BfqConfig::default().params() {
            c.set(k, &v).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        assert_eq!(c, BfqConfig::default());
    }

    #[test]
    fn invalid_values_are_rejected_naming_the_field() {
        // Issue 2 "One configuration": invalid values rejected with an error naming the field.
        let mut c = BfqConfig::default();
        for (k, v) in [
            ("back_seek_penalty", "0"),
            ("timeout_sync", "0"),
            ("low_latency", "maybe"),
            ("weight_raising", "v3"),
            ("peak_rate_estimator", "guess"),
            ("slice_idle", "-1"),
        ] {
            let err = c.set(k, v).unwrap_err().to_string();
            assert!(err.contains(k), "{err}");
        }
        assert!(matches!(c.set("no_such_knob", "1"), Err(ParamError::Unknown { .. })));
        assert_eq!(c, BfqConfig::default(), "a rejected value leaves the config unchanged");
    }

    #[test]
    fn slice_idle_us_and_slice_idle_set_the_same_field() {
        // Kernel-bfq-reference.md "Tunables": slice_idle and slice_idle_us are one knob.
        let mut c = BfqConfig::default();
        c.set("slice_idle_us", "2500").unwrap();
        assert_eq!(c.slice_idle, 2500 * USEC);
        c.set("slice_idle", "3").unwrap();
        assert_eq!(c.slice_idle, 3 * MSEC);
    }
}
