//! A tiny seeded random number generator for env authors.

/// SplitMix64: a small, fast, seedable generator whose output is identical on every platform,
/// natively and in WebAssembly. Envs derive all episode randomness from the reset seed with it
/// (or with any generator of their choice), never from a clock or the OS.
///
/// Kept here instead of depending on `rand`: env-api stays serde-only for WebAssembly guests,
/// and an env's episodes must not change when a dependency's generator or its seeding does
/// (`rand`'s `StdRng` documents that its algorithm may change between releases), because
/// recorded trajectories are replayed from their seeds.
///
/// ```
/// use sandgym_env_api::SplitMix64;
/// let mut a = SplitMix64::new(42);
/// let mut b = SplitMix64::new(42);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "SplitMix64::below(0)");
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Picks one element of a non-empty slice.
    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Shuffles `items` in place (Fisher–Yates, from the last item down): the same order for
    /// the same seed on every platform, as every draw of this generator.
    ///
    /// ```
    /// use sandgym_env_api::SplitMix64;
    /// let mut v: Vec<u32> = (0..10).collect();
    /// SplitMix64::new(7).shuffle(&mut v);
    /// let mut w = v.clone();
    /// w.sort_unstable();
    /// assert_eq!(w, (0..10).collect::<Vec<_>>());
    /// ```
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }

    /// The generator's state, for snapshots.
    pub fn state(&self) -> u64 {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn shuffle_keeps_its_order_for_a_seed() {
        // Episodes and curricula are drawn with this shuffle and replayed from their seeds:
        // its order for a seed must never change.
        let mut v: Vec<u32> = (0..8).collect();
        SplitMix64::new(9).shuffle(&mut v);
        assert_eq!(v, vec![3, 6, 5, 1, 7, 0, 2, 4]);
        // Fisher–Yates from the last item down, one `below` draw per swap.
        let mut reference: Vec<u32> = (0..8).collect();
        let mut rng = SplitMix64::new(9);
        for i in (1..reference.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            reference.swap(i, j);
        }
        assert_eq!(v, reference);
        let mut empty: Vec<u32> = Vec::new();
        SplitMix64::new(1).shuffle(&mut empty);
        let mut one = vec![5];
        SplitMix64::new(1).shuffle(&mut one);
        assert_eq!(one, vec![5]);
    }
}
