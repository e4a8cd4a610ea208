//! The named devices of the papers' test beds, with the figures they are built from.
//!
//! Figures marked *seed* come from the papers; the others are the typical values collected in
//! `shared/design/devices.md` (drive manuals, DiskSim parameter files, reviews) for a drive of that
//! class and year, chosen where the papers give nothing. All are overridable by key.
//!
//! | preset | figures |
//! |---|---|
//! | `hdd-stm332061` (`default`) | MAXTOR STM332061, seed 001 Table 1 third system (most results): 320 GB, 89 MB/s read peak, 55 to ~90 MB/s across zones (seed 001 sec. 4.2), no NCQ; 7200 rpm, seeks 0.8 / 8.5 / 17 ms, 8 MiB cache, SATA 150 MB/s |
//! | `hdd-6l080l0` | MAXTOR 6L080L0, seed 001 Table 1 first system (video benchmark): 82 GB, 55 MB/s, no NCQ; 7200 rpm, inner zones at 55% of the outer rate, seeks 0.8 / 9 / 17.8 ms, 2 MiB cache, ATA-133 |
//! | `hdd-7l250s0` | MAXTOR 7L250S0, seed 001 Table 1 second system: 250 GB, 61 MB/s, NCQ; 7200 rpm, inner at 55%, seeks 0.8 / 9 / 17.8 ms, 16 MiB cache, SATA 150 MB/s, 32 tags |
//! | `hdd-dtla307030` | IBM-DTLA-307030, seed 002 test bed: 30 GB, 7200 rpm, ~36 MB/s in the outer zones, ~35% lower in the inner ones, no NCQ; seeks 1.2 / 8.5 / 15 ms, 2 MiB cache, ATA-100 |
//! | `hdd-st1000dm003` | Seagate ST1000DM003, seed 003 sec. VI (high-speed HDD, NCQ): 1 TB, 7200 rpm; devices.md "desktop-2012" set: 210 MB/s outer, 100 MB/s inner, seeks 1 / 8.5 / 17 ms over 300,000 cylinders, 64 MiB cache, SATA 600 MB/s, 32 tags |
//! | `ssd-px256m5s` | PLEXTOR PX-256M5S, seed 003 sec. VI: SATA SSD, ~515 MB/s sequential read, random reads 160-200 MB/s at depth, one synchronous 4 KiB random reader ~23 MB/s (Linaro 2019): 8 units, 16 KiB pages read in 146 us, 24 us firmware, link 515 MB/s (half duplex), 32 tags, reads and programming in arrival order |
//! | `nvme-960evo` | an NVMe drive of the Samsung 960 EVO class (devices.md calibration): 3.2 GB/s read, 4 KiB reads ~14K IOPS at depth 1 and ~380K at depth 32: 128 units, 44 us page read, 26 us firmware, 256 tags; full-duplex link (PCIe), reads ahead of queued programming |
//! | `constant` | every command takes `service_time_us` (not a real device) |
//!
//! The cylinder counts only set the resolution of the seek curve; the cache split (segments, write
//! share, destage thresholds) follows DiskSim's buffer parameters with typical values.

use bfq_sched::{MSEC, USEC};

use super::hdd::HddParams;
use super::ssd::SsdParams;

/// The name the `default` preset stands for: the disk of most of seed 001's results.
pub const DEFAULT_DEVICE: &str = "hdd-stm332061";

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// Figures shared by the 7200 rpm desktop disks, overridden per drive below.
fn desktop_7200() -> HddParams {
    HddParams {
        capacity_bytes: 320_000_000_000,
        rpm: 7200,
        cylinders: 120_000,
        outer_mbps: 89.0,
        inner_mbps: 55.0,
        zones: 16,
        track_to_track: 800 * USEC,
        avg_seek: 8 * MSEC + 500 * USEC,
        full_stroke: 17 * MSEC,
        write_settle: 500 * USEC,
        overhead: 100 * USEC,
        bus_mbps: 150.0,
        cache_bytes: 8 * MIB,
        cache_segments: 8,
        read_ahead_bytes: 512 * KIB,
        write_cache: true,
        write_cache_bytes: 4 * MIB,
        write_cache_extents: 128,
        max_destage_bytes: 512 * KIB,
        destage_high_water_pct: 75,
        destage_idle: MSEC,
        ncq: false,
        queue_depth: 1,
        ncq_aging_permille: 10,
    }
}

/// MAXTOR STM332061 (seed 001 Table 1, sec. 4.2): the project's default device.
pub fn hdd_stm332061() -> HddParams {
    desktop_7200()
}

/// MAXTOR 6L080L0 (seed 001 Table 1, first system).
pub fn hdd_6l080l0() -> HddParams {
    HddParams {
        capacity_bytes: 82_000_000_000,
        cylinders: 60_000,
        outer_mbps: 55.0,
        inner_mbps: 30.0,
        avg_seek: 9 * MSEC,
        full_stroke: 17 * MSEC + 800 * USEC,
        bus_mbps: 133.0,
        cache_bytes: 2 * MIB,
        cache_segments: 4,
        read_ahead_bytes: 256 * KIB,
        write_cache_bytes: MIB,
        write_cache_extents: 64,
        ..desktop_7200()
    }
}

/// MAXTOR 7L250S0 (seed 001 Table 1, second system, with NCQ).
pub fn hdd_7l250s0() -> HddParams {
    HddParams {
        capacity_bytes: 250_000_000_000,
        cylinders: 100_000,
        outer_mbps: 61.0,
        inner_mbps: 33.5,
        avg_seek: 9 * MSEC,
        full_stroke: 17 * MSEC + 800 * USEC,
        cache_bytes: 16 * MIB,
        cache_segments: 16,
        write_cache_bytes: 8 * MIB,
        write_cache_extents: 128,
        ncq: true,
        queue_depth: 32,
        ..desktop_7200()
    }
}

/// IBM-DTLA-307030 (seed 002 test bed).
pub fn hdd_dtla307030() -> HddParams {
    HddParams {
        capacity_bytes: 30_000_000_000,
        cylinders: 30_000,
        outer_mbps: 36.0,
        inner_mbps: 36.0 * 0.65,
        track_to_track: 1_200 * USEC,
        avg_seek: 8 * MSEC + 500 * USEC,
        full_stroke: 15 * MSEC,
        bus_mbps: 100.0,
        cache_bytes: 2 * MIB,
        cache_segments: 4,
        read_ahead_bytes: 256 * KIB,
        write_cache_bytes: MIB,
        write_cache_extents: 64,
        ..desktop_7200()
    }
}

/// Seagate ST1000DM003 (seed 003 sec. VI, with NCQ).
pub fn hdd_st1000dm003() -> HddParams {
    HddParams {
        capacity_bytes: 1_000_000_000_000,
        cylinders: 300_000,
        outer_mbps: 210.0,
        inner_mbps: 100.0,
        zones: 24,
        track_to_track: MSEC,
        overhead: 50 * USEC,
        bus_mbps: 600.0,
        cache_bytes: 64 * MIB,
        cache_segments: 32,
        read_ahead_bytes: MIB,
        write_cache_bytes: 32 * MIB,
        write_cache_extents: 256,
        max_destage_bytes: MIB,
        ncq: true,
        queue_depth: 32,
        ..desktop_7200()
    }
}

/// PLEXTOR PX-256M5S (seed 003 sec. VI).
pub fn ssd_px256m5s() -> SsdParams {
    SsdParams {
        capacity_bytes: 256_000_000_000,
        units: 8,
        page_bytes: 16 * KIB,
        read_time: 146 * USEC,
        // 8 units x 16 KiB per 285 us ~ 460 MB/s sequential writes (the drive's rating).
        program_time: 285 * USEC,
        firmware: 24 * USEC,
        link_mbps: 515.0,
        queue_depth: 32,
        write_buffer: 2 * MSEC,
        // SATA carries one transfer at a time; the drive's firmware of 2012 is modelled without read
        // priority, as the seed 003 sec. VI calibration was made.
        full_duplex: false,
        read_priority: false,
    }
}

/// An NVMe drive of the Samsung 960 EVO class (devices.md calibration points).
pub fn nvme_960evo() -> SsdParams {
    SsdParams {
        capacity_bytes: 500_000_000_000,
        units: 128,
        page_bytes: 16 * KIB,
        read_time: 44 * USEC,
        // 128 units x 16 KiB per 1160 us ~ 1.8 GB/s sequential writes.
        program_time: 1160 * USEC,
        firmware: 26 * USEC,
        link_mbps: 3200.0,
        queue_depth: 256,
        write_buffer: 2 * MSEC,
        // PCIe has a lane pair per direction; NVMe firmware reads ahead of queued programming
        // (read-first scheduling, program suspend), as MQSim's priority scheduling models.
        full_duplex: true,
        read_priority: true,
    }
}
