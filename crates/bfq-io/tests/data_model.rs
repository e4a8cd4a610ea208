//! The engine's data path against a model of the file (issue 15 part 4's operations; the completion
//! path of requests done at dispatch, docs/engine.md "How it works"): random batches of reads, writes,
//! FUA writes, discards, write-zeroes and flushes, of 4 KiB to 1 MiB (both sides of
//! `IN_MEMORY_READS_AT_DISPATCH`), many in flight at once and on disjoint ranges within a batch, on a
//! file in memory read at dispatch, the same file read through the ring, and a file on disk. Every
//! read returns what the model holds, every request succeeds, and the file ends equal to the model.
//!
//! Cases: `BFQ_IO_MODEL_CASES` (default 24 per kind of target, a few seconds).

use bfq_io::{AlignedBuf, Engine, QueueId, QueueSpec, Ticket};
use proptest::prelude::*;

const BLOCK: usize = 4096;
const BLOCKS: usize = 1024; // a 4 MiB file

#[derive(Clone, Debug)]
enum Op {
    Read,
    Write(u8),
    WriteFua(u8),
    Discard,
    WriteZeroes,
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Read),
        3 => any::<u8>().prop_map(Op::Write),
        1 => any::<u8>().prop_map(Op::WriteFua),
        1 => Just(Op::Discard),
        1 => Just(Op::WriteZeroes),
        1 => Just(Op::Flush),
    ]
}

/// Lengths in blocks: mostly short, some of 64 (256 KiB, the limit) and 65, some of 256 (1 MiB).
fn blocks() -> impl Strategy<Value = usize> {
    prop_oneof![6 => 1usize..16, 2 => 60usize..70, 1 => Just(256usize)]
}

type Batch = Vec<(Op, usize, usize)>;

fn batches() -> impl Strategy<Value = Vec<Batch>> {
    proptest::collection::vec(proptest::collection::vec((op(), 0..BLOCKS, blocks()), 1..16), 1..8)
}

fn cases() -> u32 {
    std::env::var("BFQ_IO_MODEL_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

struct Temp(std::path::PathBuf);

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `batches` on a fresh file in `dir`; an error names the request and what differed.
fn run(dir: &str, reads_at_dispatch: u32, batches: &[Batch], case: u64) -> Result<(), String> {
    let path = std::path::PathBuf::from(format!("{dir}/bfq-io-model-{}-{case}", std::process::id()));
    let mut model = vec![0x5au8; BLOCKS * BLOCK];
    std::fs::write(&path, &model).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = Temp(path);
    let engine = Engine::builder()
        .scheduler_name("bfq", &[])
        .target_path(&file.0)
        .depth(8)
        .in_memory_reads_at_dispatch(reads_at_dispatch)
        .build()
        .map_err(|e| e.to_string())?;
    let c = engine.client(QueueId(1), QueueSpec::default()).map_err(|e| e.to_string())?;
    for (b, batch) in batches.iter().enumerate() {
        // Disjoint ranges within a batch: their order on the device is the scheduler's.
        let mut taken = vec![false; BLOCKS];
        let mut issued: Vec<(Ticket, &Op, usize, usize)> = Vec::new();
        for (op, start, len) in batch {
            let (start, len) = (*start, (*len).min(BLOCKS - *start));
            if !matches!(op, Op::Flush) {
                if taken[start..start + len].iter().any(|&t| t) {
                    continue;
                }
                taken[start..start + len].iter_mut().for_each(|t| *t = true);
            }
            let (offset, bytes) = ((start * BLOCK) as u64, len * BLOCK);
            let filled = |v: u8| {
                let mut buf = AlignedBuf::zeroed(bytes);
                buf.as_mut_slice().fill(v);
                buf
            };
            let ticket = match op {
                Op::Read => c.read(offset, AlignedBuf::zeroed(bytes), true),
                Op::Write(v) => c.write(offset, filled(*v), false),
                Op::WriteFua(v) => c.write_fua(offset, filled(*v)),
                Op::Discard => c.discard(offset, bytes as u32),
                Op::WriteZeroes => c.write_zeroes(offset, bytes as u32),
                Op::Flush => c.flush(),
            };
            issued.push((ticket, op, start, len));
        }
        // Every read sees the model as it was before this batch (nothing in the batch overlaps it).
        let before = model.clone();
        for (ticket, op, start, len) in issued {
            let range = start * BLOCK..(start + len) * BLOCK;
            let done =
                ticket.wait().map_err(|e| format!("batch {b}: {op:?} of blocks {start}+{len}: {e}"))?;
            match op {
                Op::Read => {
                    if done.buf.as_slice()[..range.len()] != before[range.clone()] {
                        return Err(format!(
                            "batch {b}: read of blocks {start}+{len} differs from the model"
                        ));
                    }
                }
                Op::Write(v) | Op::WriteFua(v) => model[range].fill(*v),
                Op::Discard | Op::WriteZeroes => model[range].fill(0),
                Op::Flush => {}
            }
        }
    }
    engine.shutdown().map_err(|e| e.to_string())?;
    let on_file = std::fs::read(&file.0).map_err(|e| e.to_string())?;
    match on_file.iter().zip(&model).position(|(a, b)| a != b) {
        Some(at) => Err(format!("the file differs from the model first at byte {at}")),
        None => Ok(()),
    }
}

fn shm() -> &'static str {
    if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/var/tmp"
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// A file in memory with reads up to 256 KiB done at dispatch (as `bfq serve` runs it).
    #[test]
    fn a_file_in_memory_read_at_dispatch_holds_what_was_written(batches in batches(), case in any::<u64>()) {
        prop_assert_eq!(run(shm(), bfq_io::IN_MEMORY_READS_AT_DISPATCH, &batches, case), Ok(()));
    }

    /// The same file read through the ring (the engine's default), its writes still at dispatch.
    #[test]
    fn a_file_in_memory_read_through_the_ring_holds_what_was_written(batches in batches(), case in any::<u64>()) {
        prop_assert_eq!(run(shm(), 0, &batches, case), Ok(()));
    }

    /// A file on disk: everything through the ring, one request per enter.
    #[test]
    fn a_file_on_disk_holds_what_was_written(batches in batches(), case in any::<u64>()) {
        prop_assert_eq!(run("/var/tmp", u32::MAX, &batches, case), Ok(()));
    }
}
