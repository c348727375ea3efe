//! [`Rng`]: the tests' seeded source of cases (`#[path = "common/rng.rs"] mod rng;`), partlog's
//! own generator (`partlog::unstable::SplitMix64`) with the draws the tests make of it, so that
//! a case is a pure function of its seed.

use partlog::unstable::SplitMix64;

/// A seeded generator of test cases.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

#[allow(dead_code, reason = "each test binary draws what it needs")]
impl Rng {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (0 when `n` is 0), by modulo: the draw the cases were written with.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `true` with a chance of `percent` in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
