//! Today's BFQ (the registry's default `bfq`, with injection) on the simulated rotational disks of
//! the papers: what is added for fast devices must not cost a disk that seeks its throughput
//! (docs/fast-devices.md, "Injection on a disk that seeks").

use bfq_sim::{run_job, Job};

fn ten_sequential_readers(preset: &str) -> Job {
    let text = format!(
        "name = \"10r-seq\"\nseed = 1\nduration = \"10s\"\nwarmup = \"2s\"\nworkload = \"10r-seq\"\n\
         [device]\npreset = \"{preset}\"\n"
    );
    Job::from_toml(&text, "10r-seq").unwrap()
}

#[test]
fn injection_does_not_make_sequential_readers_seek_on_a_rotational_disk() {
    // Ten sequential readers on seed 003's NCQ disk (seed 001 sec. 6.2, "10r-seq"). Idling for each
    // reader in turn keeps the disk streaming (seed 001 sec. 3). Injecting another reader's request
    // into a turn makes every request seek: 0.6 ms per 128 KiB read became 9-17 ms, and the disk
    // delivered 25 MiB/s against 189 with injection off (the reader's share of its turns had kept
    // the limit growing, and a switch's seek had been taken for its latency alone).
    for preset in ["hdd-st1000dm003", "hdd-7l250s0", "default"] {
        let job = ten_sequential_readers(preset);
        let today = run_job(&job, "bfq", &[]).unwrap().totals.throughput_mib_s;
        let off = [("injection".to_string(), "0".to_string())];
        let without = run_job(&job, "bfq", &off).unwrap().totals.throughput_mib_s;
        eprintln!("{preset}: {today:.1} MiB/s with injection, {without:.1} without");
        assert!(today >= 0.9 * without, "{preset}: {today:.1} MiB/s with injection, {without:.1} without");
    }
}
