//! Seek time as a function of distance in cylinders: the Lee & Katz three-point fit used by DiskSim's
//! `curve` seek type (devices.md, "Seek curves"), a refinement of Ruemmler & Wilkes' observation that
//! short seeks are dominated by head acceleration (time ~ sqrt(distance)) and long ones by coasting at
//! top speed (time ~ distance).
//!
//! From the single-cylinder seek `m`, the average seek `A` over uniformly random positions and the full
//! stroke `M` over `N` cylinders:
//!
//! `t(d) = a*sqrt(d-1) + b*(d-1) + m` for `d >= 1`, `t(0) = 0`, with
//! `a = (-10m + 15A - 5M) / (3 sqrt(N))` and `b = (7m - 15A + 8M) / (3N)`.
//!
//! Then `t(N) = M`, and the mean of `t` over two independent uniform positions is `A` (the distance of two
//! uniform points has density `2(N-d)/N^2`, so `E[sqrt d] = 8 sqrt(N)/15` and `E[d] = N/3`).

use bfq_sched::Nanos;

/// A seek curve through the three points single-cylinder, average and full-stroke seek.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeekCurve {
    single_ns: f64,
    sqrt_coeff: f64,
    linear_coeff: f64,
}

/// Why three seek figures cannot make a Lee & Katz curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SeekCurveError {
    /// The figures must satisfy `0 < single < average < full stroke`.
    #[error("seek times must satisfy 0 < track-to-track < average < full stroke")]
    Unordered,
    /// The fit needs non-negative coefficients: the average is too close to one of the ends.
    #[error("the average seek is too close to the track-to-track or full-stroke seek for a monotone curve")]
    NotMonotone,
    /// At least two cylinders are needed.
    #[error("a disk needs at least two cylinders")]
    TooFewCylinders,
}

impl SeekCurve {
    /// The curve through `single` (one cylinder), `average` and `full` (all `cylinders`).
    pub fn lee_katz(
        single: Nanos,
        average: Nanos,
        full: Nanos,
        cylinders: u64,
    ) -> Result<Self, SeekCurveError> {
        if cylinders < 2 {
            return Err(SeekCurveError::TooFewCylinders);
        }
        if !(0 < single && single < average && average < full) {
            return Err(SeekCurveError::Unordered);
        }
        let (m, a, f, n) = (single as f64, average as f64, full as f64, cylinders as f64);
        let sqrt_coeff = (-10.0 * m + 15.0 * a - 5.0 * f) / (3.0 * n.sqrt());
        let linear_coeff = (7.0 * m - 15.0 * a + 8.0 * f) / (3.0 * n);
        if sqrt_coeff < 0.0 || linear_coeff < 0.0 {
            return Err(SeekCurveError::NotMonotone);
        }
        Ok(SeekCurve { single_ns: m, sqrt_coeff, linear_coeff })
    }

    /// Seek time over `distance` cylinders, in nanoseconds (0 for no movement).
    #[inline]
    pub fn seek_ns(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let d = (distance - 1) as f64;
        self.sqrt_coeff * d.sqrt() + self.linear_coeff * d + self.single_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sched::MSEC;
    use proptest::prelude::*;

    /// devices.md "desktop-2012": m = 1 ms, A = 8.5 ms, M = 17 ms over 300,000 cylinders.
    fn desktop() -> SeekCurve {
        SeekCurve::lee_katz(MSEC, 8 * MSEC + MSEC / 2, 17 * MSEC, 300_000).unwrap()
    }

    #[test]
    fn the_curve_passes_through_single_cylinder_and_full_stroke_seeks() {
        let c = desktop();
        assert_eq!(c.seek_ns(0), 0.0);
        assert!((c.seek_ns(1) - 1e6).abs() < 1.0);
        assert!((c.seek_ns(300_000) - 17e6).abs() / 17e6 < 1e-3);
    }

    #[test]
    fn the_mean_over_uniform_random_positions_is_the_average_seek() {
        // Integrate t(|x - y|) over a fine grid of both positions.
        let c = desktop();
        let n = 300_000u64;
        let steps = 600u64;
        let mut sum = 0.0;
        for i in 0..steps {
            for j in 0..steps {
                let x = (2 * i + 1) * n / (2 * steps);
                let y = (2 * j + 1) * n / (2 * steps);
                sum += c.seek_ns(x.abs_diff(y));
            }
        }
        let mean = sum / (steps * steps) as f64;
        assert!((mean - 8.5e6).abs() / 8.5e6 < 0.02, "mean seek {mean}");
    }

    #[test]
    fn figures_without_a_monotone_fit_are_rejected() {
        // Average nearly equal to the full stroke: the sqrt term would have to be negative... or linear.
        assert_eq!(SeekCurve::lee_katz(MSEC, 16 * MSEC, 17 * MSEC, 1000), Err(SeekCurveError::NotMonotone));
        assert_eq!(SeekCurve::lee_katz(MSEC, MSEC, 17 * MSEC, 1000), Err(SeekCurveError::Unordered));
    }

    proptest! {
        #[test]
        fn seek_time_never_decreases_with_distance(d in 0u64..299_999) {
            let c = desktop();
            prop_assert!(c.seek_ns(d + 1) >= c.seek_ns(d));
        }
    }
}
