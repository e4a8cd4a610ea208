//! Zone bit recording: where a byte offset lies on the platter (cylinder, angle) and how fast the
//! media passes under the head there (seed 001 sec. 4.2: the STM332061 reads at 55 to about 90 MB/s
//! depending on the zone; seed 002: the DTLA-307030 is ~35% slower in its inner zones).
//!
//! With constant linear density, a track's capacity (and so the media rate at constant rpm) is
//! proportional to its radius `r`, and cylinders are evenly spaced in radius from the outer edge
//! `r_o` to the inner `r_i = k r_o`, `k` being the inner/outer rate ratio. The capacity outside radius
//! `r` is proportional to `r_o^2 - r^2`, so the fraction `f` of the capacity (counted from the outer
//! edge, where logical block 0 lies) lies at radius `r(f) = r_o sqrt(1 - f(1 - k^2))`. Hence the rate
//! `R(f) = R_outer sqrt(1 - f(1 - k^2))` (devices.md) and the cylinder
//! `c(f) = N (1 - sqrt(1 - f(1 - k^2))) / (1 - k)`.
//!
//! Real drives group cylinders into a few tens of zones of constant sectors per track; the rate is
//! therefore constant inside each of the `zones` zones (equal shares of the capacity), from `R_outer`
//! in the first to `R_outer * k` in the last. A byte's angle is its position within its track: with
//! `T = R * revolution` bytes per track, `angle = frac(offset / T)`, so that a transfer of `n` bytes
//! turns the platter by exactly `n / T` of a revolution and consecutive sectors follow each other.

/// Where a byte lies and how fast it is read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Location {
    /// Cylinder, 0 at the outer edge.
    pub cylinder: u64,
    /// Media rate of the zone, in bytes per nanosecond.
    pub rate: f64,
    /// Angular position in revolutions, in `[0, 1)`.
    pub angle: f64,
}

/// The layout of logical bytes on a zoned platter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    capacity: f64,
    cylinders: u64,
    outer_rate: f64,
    inner_ratio: f64,
    zones: u32,
    revolution_ns: f64,
}

impl Geometry {
    /// A platter of `capacity` bytes over `cylinders` cylinders, read at `outer_rate` and `inner_rate`
    /// bytes per nanosecond at the edges, with `zones` zones, turning once in `revolution_ns`.
    /// Callers validate: `inner_rate <= outer_rate`, all positive, `zones >= 1`.
    pub fn new(
        capacity: u64,
        cylinders: u64,
        outer_rate: f64,
        inner_rate: f64,
        zones: u32,
        revolution_ns: f64,
    ) -> Self {
        Geometry {
            capacity: capacity.max(1) as f64,
            cylinders: cylinders.max(1),
            outer_rate,
            inner_ratio: (inner_rate / outer_rate).clamp(0.01, 1.0),
            zones: zones.max(1),
            revolution_ns,
        }
    }

    /// Number of cylinders.
    pub fn cylinders(&self) -> u64 {
        self.cylinders
    }

    /// Duration of one revolution in nanoseconds.
    pub fn revolution_ns(&self) -> f64 {
        self.revolution_ns
    }

    /// Fraction of the capacity before `offset`, clamped to `[0, 1]`.
    #[inline]
    fn fraction(&self, offset: u64) -> f64 {
        (offset as f64 / self.capacity).min(1.0)
    }

    /// The cylinder holding `offset`.
    #[inline]
    pub fn cylinder(&self, offset: u64) -> u64 {
        let f = self.fraction(offset);
        let k = self.inner_ratio;
        let outward = if k >= 1.0 { f } else { (1.0 - (1.0 - f * (1.0 - k * k)).sqrt()) / (1.0 - k) };
        ((outward * self.cylinders as f64) as u64).min(self.cylinders - 1)
    }

    /// Media rate in bytes per nanosecond in the zone holding `offset`.
    #[inline]
    pub fn rate(&self, offset: u64) -> f64 {
        let zone = ((self.fraction(offset) * self.zones as f64) as u32).min(self.zones - 1);
        if self.zones == 1 {
            return self.outer_rate;
        }
        // Zone z reads at the continuous rate of fraction z/(zones-1): the first at R_outer, the last
        // at R_inner.
        let f = zone as f64 / (self.zones - 1) as f64;
        let k = self.inner_ratio;
        self.outer_rate * (1.0 - f * (1.0 - k * k)).sqrt()
    }

    /// Where `offset` lies.
    #[inline]
    pub fn locate(&self, offset: u64) -> Location {
        let rate = self.rate(offset);
        let track_bytes = rate * self.revolution_ns;
        let turns = offset as f64 / track_bytes;
        Location { cylinder: self.cylinder(offset), rate, angle: turns - turns.floor() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The STM332061 of seed 001 Table 1 / sec. 4.2: 320 GB, 89 MB/s outer, 55 MB/s inner.
    fn stm() -> Geometry {
        Geometry::new(320_000_000_000, 120_000, 0.089, 0.055, 16, 60e9 / 7200.0)
    }

    #[test]
    fn zoned_rate_falls_from_the_outer_to_the_inner_zone_seed001_sec4_2() {
        let g = stm();
        assert!((g.rate(0) - 0.089).abs() < 1e-12);
        assert!((g.rate(319_999_999_999) - 0.055).abs() < 1e-9);
        let mid = g.rate(160_000_000_000);
        assert!(mid < 0.089 && mid > 0.055);
    }

    #[test]
    fn outer_cylinders_hold_more_bytes_than_inner_ones() {
        let g = stm();
        // The first half of the capacity lies on fewer than half of the cylinders.
        let half = g.cylinder(160_000_000_000);
        assert!(half < 60_000, "{half}");
        assert_eq!(g.cylinder(0), 0);
        assert_eq!(g.cylinder(320_000_000_000), 119_999);
    }

    proptest! {
        #[test]
        fn cylinder_never_decreases_and_angle_stays_in_a_revolution(o in 0u64..320_000_000_000) {
            let g = stm();
            prop_assert!(g.cylinder(o + 4096) >= g.cylinder(o));
            let l = g.locate(o);
            prop_assert!((0.0..1.0).contains(&l.angle));
        }
    }
}
