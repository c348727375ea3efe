//! [`SplitMix64`]: the crate's one random-number generator, small, fast and fully determined by
//! its seed. The simulator draws its crash images from it, the log its roll jitter, and the
//! crash tests their cases (through `partlog::unstable::SplitMix64`).
//!
//! A crash image must be reproducible from a seed printed by a failing test, on any machine and
//! any Rust version, so the generator is written out here instead of borrowed from a crate whose
//! output could change between releases.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
///
/// Every seed, including 0, gives a good stream, which matters because tests seed it with small
/// consecutive integers.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound`, or 0 when `bound` is 0.
    ///
    /// Multiply-and-shift (Lemire) instead of `%`: the bias is below 2^-64 per draw for the small
    /// bounds the simulator uses, and it costs no division.
    pub fn below(&mut self, bound: u64) -> u64 {
        let wide = u128::from(self.next_u64()) * u128::from(bound);
        // The high half of a u64 x u64 product always fits in a u64.
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// A number in `0..=max` (an index into a list of `max + 1` choices).
    pub fn up_to(&mut self, max: usize) -> usize {
        let bound = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        usize::try_from(self.below(bound)).unwrap_or(max)
    }

    /// A number in `[0, 1)` with 53 random bits, for comparing against a probability.
    pub fn unit(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        (self.next_u64() >> 11) as f64 * SCALE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_splitmix64_stream() {
        // The first outputs of the reference C implementation seeded with 0.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn bounded_draws_stay_in_range_and_cover_it() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = rng.up_to(4);
            assert!(v <= 4);
            seen[v] = true;
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(
            seen.iter().all(|&s| s),
            "every value of 0..=4 was drawn: {seen:?}"
        );
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.up_to(0), 0);
    }
}
