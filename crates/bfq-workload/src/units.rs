//! Sizes and durations as people write them in job files (`"128KiB"`, `"5GB"`, `"500ms"`, `"30s"`).
//!
//! Written here rather than taken from a crate: bytesize reads a bare `K` as 1000 (here, as in fio
//! and the kernel, 1024), byte-unit reads `Kb` as kilobits, and neither knows 512-byte sectors, so
//! either would need this same unit table in front of it; humantime (2.4) refuses plain decimals such
//! as `"0.001h"` or `"1.2345h"` with an error about sub-nanosecond precision.

use bfq_sched::{Nanos, MSEC, SEC, USEC};

/// Parses a size: a number with an optional unit `B`, `K`/`KB`/`KiB`, `M`/`MB`/`MiB`, `G`/`GB`/`GiB`,
/// `T`/`TB`/`TiB`, `s` (512-byte sectors). `KB`, `MB`, ... are powers of ten; `K`, `KiB`, ... powers of two.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("expected a size such as \"128KiB\", got {text:?}"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "s" | "sectors" => 512,
        "K" | "k" | "KiB" => 1 << 10,
        "KB" | "kB" => 1_000,
        "M" | "MiB" => 1 << 20,
        "MB" => 1_000_000,
        "G" | "GiB" => 1 << 30,
        "GB" => 1_000_000_000,
        "T" | "TiB" => 1 << 40,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!("unknown size unit {other:?} in {text:?} (use B, KiB, MiB, GiB, KB, MB, GB)"))
        }
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("size out of range: {text:?}"));
    }
    Ok(bytes.round() as u64)
}

/// A size as a person reads it, in the binary unit that keeps it at or above 1 (`"4 KiB"`,
/// `"465.7 GiB"`); a whole number of the unit is written without decimals.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if bytes % scale == 0 {
        format!("{} {}", bytes / scale, UNITS[unit])
    } else {
        format!("{:.1} {}", bytes as f64 / scale as f64, UNITS[unit])
    }
}

/// Parses a duration: a number with a unit `ns`, `us`, `ms`, `s`, `min`, `h`.
pub fn parse_duration(text: &str) -> Result<Nanos, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 =
        num.parse().map_err(|_| format!("expected a duration such as \"500ms\" or \"30s\", got {text:?}"))?;
    let mult: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => USEC,
        "ms" => MSEC,
        "s" => SEC,
        "min" => 60 * SEC,
        "h" => 3600 * SEC,
        "" => return Err(format!("duration {text:?} needs a unit (ns, us, ms, s, min, h)")),
        other => {
            return Err(format!("unknown duration unit {other:?} in {text:?} (use ns, us, ms, s, min, h)"))
        }
    };
    let ns = value * mult as f64;
    if !ns.is_finite() || !(0.0..=1e18).contains(&ns) {
        return Err(format!("duration out of range: {text:?}"));
    }
    Ok(ns.round() as Nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_formatted_in_the_largest_binary_unit_that_keeps_them_whole_or_above_one() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(200 << 30), "200 GiB");
        assert_eq!(format_size(500_000_000_000), "465.7 GiB");
        assert_eq!(format_size(3 << 40), "3 TiB");
        assert_eq!(parse_size(&format_size(128 << 20)).unwrap(), 128 << 20);
    }

    #[test]
    fn sizes_and_durations_parse_with_their_units() {
        assert_eq!(parse_size("128KiB").unwrap(), 131_072);
        assert_eq!(parse_size("5GB").unwrap(), 5_000_000_000);
        assert_eq!(parse_size("8s").unwrap(), 4096);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("4 parsecs").is_err());
        assert_eq!(parse_duration("500ms").unwrap(), 500 * MSEC);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500 * MSEC);
        assert!(parse_duration("30").is_err());
    }
}
