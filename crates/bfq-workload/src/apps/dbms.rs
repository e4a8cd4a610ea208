//! Workloads of many processes on one shared file (seed 002): a DBMS-like load — processes issuing
//! direct (uncached, hence synchronous) 4 KiB reads at random positions of a common file, each keeping
//! a fixed number of requests outstanding (1 to 10 in seed 002) — and interleaved readers, processes
//! that read interleaved chunks of one file as QEMU's I/O threads do (chunk `i`, `i + n`, `i + 2n`, ... for
//! process `i` of `n`), which look random one by one but sequential together (seed 003 sec. V-D,
//! Early Queue Merge).

use bfq_sched::{Op, QueueSpec};

/// Alignment of a DBMS process's random positions (a database page of 4 KiB at least).
pub const DBMS_ALIGN: u64 = 4096;

use super::{App, Ctx, Done, NewRequest, Region};

/// DBMS-like random readers of one common file.
#[derive(Clone, Debug)]
pub struct Dbms {
    spec: QueueSpec,
    region: Region,
    processes: usize,
    outstanding: u32,
    request_bytes: u32,
}

impl Dbms {
    /// `processes` processes reading `request_bytes` at random in `region`, each with `outstanding`
    /// requests in flight.
    pub fn new(
        spec: QueueSpec,
        region: Region,
        processes: usize,
        outstanding: u32,
        request_bytes: u32,
    ) -> Self {
        Dbms {
            spec,
            region,
            processes: processes.max(1),
            outstanding: outstanding.max(1),
            request_bytes: request_bytes.max(512),
        }
    }

    fn issue(&self, ctx: &mut Ctx, process: usize) {
        let offset = self.region.random_offset(ctx.rng, u64::from(self.request_bytes), DBMS_ALIGN);
        ctx.submit(NewRequest {
            queue: process,
            op: Op::Read,
            offset,
            len: self.request_bytes,
            sync: true,
            meta: false,
            tag: process as u64,
        });
    }
}

impl App for Dbms {
    fn kind(&self) -> &'static str {
        "dbms"
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec; self.processes]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        for p in 0..self.processes {
            for _ in 0..self.outstanding {
                self.issue(ctx, p);
            }
        }
    }

    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done) {
        self.issue(ctx, done.tag as usize);
    }

    fn greedy(&self) -> bool {
        true
    }
}

/// Processes reading interleaved chunks of one file.
#[derive(Clone, Debug)]
pub struct Interleaved {
    spec: QueueSpec,
    region: Region,
    processes: usize,
    chunk_bytes: u32,
    next_chunk: Vec<u64>,
}

impl Interleaved {
    /// `processes` processes reading `region` in interleaved chunks of `chunk_bytes`.
    pub fn new(spec: QueueSpec, region: Region, processes: usize, chunk_bytes: u32) -> Self {
        let processes = processes.max(1);
        Interleaved {
            spec,
            region,
            processes,
            chunk_bytes: chunk_bytes.max(512),
            next_chunk: (0..processes as u64).collect(),
        }
    }

    fn issue(&mut self, ctx: &mut Ctx, process: usize) {
        let chunks = (self.region.len / u64::from(self.chunk_bytes)).max(1);
        let mut chunk = self.next_chunk[process];
        if chunk >= chunks {
            // Start over at the file's beginning, keeping the interleaving.
            chunk = process as u64 % chunks;
        }
        self.next_chunk[process] = chunk + self.processes as u64;
        ctx.submit(NewRequest {
            queue: process,
            op: Op::Read,
            offset: self.region.start + chunk * u64::from(self.chunk_bytes),
            len: self.chunk_bytes,
            sync: true,
            meta: false,
            tag: process as u64,
        });
    }
}

impl App for Interleaved {
    fn kind(&self) -> &'static str {
        "interleaved"
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec; self.processes]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        for p in 0..self.processes {
            self.issue(ctx, p);
        }
    }

    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done) {
        self.issue(ctx, done.tag as usize);
    }

    fn greedy(&self) -> bool {
        true
    }
}
