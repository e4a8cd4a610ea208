//! The simulator's only source of randomness (STYLE.md lesson 6): xoshiro256++ from `rand_xoshiro`, a
//! fixed published algorithm whose output does not change between crate versions, seeded from the job's
//! seed. Each application gets its own stream, derived from the job seed and the application's index, so
//! adding an application does not perturb the random choices of the others.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A seeded, reproducible random stream.
#[derive(Clone, Debug)]
pub struct SimRng(Xoshiro256PlusPlus);

impl SimRng {
    /// The stream for `stream` (an application index) of the job seeded with `seed`.
    pub fn new(seed: u64, stream: u64) -> Self {
        // SplitMix64-style mixing of the pair, so that nearby (seed, stream) pairs give unrelated streams.
        let mut z = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        SimRng(Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31)))
    }

    /// A uniformly distributed `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniformly distributed integer in `0..n` (`0` when `n` is 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift with rejection.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniformly distributed integer in `lo..=hi`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` (clamped to 0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_stream_give_the_same_values() {
        let mut a = SimRng::new(7, 3);
        let mut b = SimRng::new(7, 3);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn different_streams_differ() {
        let mut a = SimRng::new(7, 3);
        let mut b = SimRng::new(7, 4);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_ne!(va, vb);
    }

    proptest::proptest! {
        #[test]
        fn below_stays_in_range(seed in 0u64..1000, n in 1u64..1_000_000) {
            let mut r = SimRng::new(seed, 0);
            for _ in 0..20 {
                proptest::prop_assert!(r.below(n) < n);
            }
        }
    }
}
