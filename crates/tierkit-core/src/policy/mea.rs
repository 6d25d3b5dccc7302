//! The Majority Element Algorithm (MEA) of MemPod (Prodromou et al., HPCA 2017, §III and its
//! Algorithm 1; cited as [26] by seed 001), after Karp et al. (2003) and Charikar et al.
//! (2002): the frequent-items counter set of Misra and Gries ("Finding repeated elements",
//! Science of Computer Programming 2(2), 1982), a generalization of Boyer and Moore's
//! majority vote. `k` counters watch a stream of `n` elements; each element does one of
//! MemPod §III's three operations:
//!
//! * (a) an element that holds a counter increments it;
//! * (b) a new element takes a free counter, starting at 1;
//! * (c) a new element that finds every counter taken is dropped, and every counter loses
//!   one (counters that reach 0 are freed).
//!
//! Each decrement step (c) discards `k + 1` occurrences (one of each tracked element and the
//! new one), so there are `d ≤ n / (k + 1)` of them. Each one takes at most one occurrence
//! from any element, so a counter falls short of its element's true count by at most `d`,
//! and every element occurring more than `n / (k + 1)` times holds a counter at the end
//! (Misra and Gries 1982). With `k = 1` this is the majority vote: an element occurring more
//! than `n / 2` times is the one tracked. The set counts its decrement steps
//! ([`MisraGries::decrements`]) so that a caller can bound a true count from both sides:
//! `count ≤ true ≤ count + d`.
//!
//! MemPod §III states the algorithm with `K` entries in its prose, and its Algorithm 1 adds
//! a new entry while `|T| < K − 1`; the prose (`K` counters, the `N / (K + 1)` guarantee,
//! §V-B's "64 MEA entries") is what this follows.
//!
//! Cost: an increment is a hash lookup; a decrement step is O(k), and there are at most
//! `n / (k + 1)` of them, so O(1) amortized per element.

use rustc_hash::FxHashMap;

/// `k` Misra–Gries counters over `u32` elements (page ids).
#[derive(Clone, Debug, Default)]
pub struct MisraGries {
    k: usize,
    keys: Vec<u32>,
    counts: Vec<u32>,
    /// counter index of each tracked element
    index: FxHashMap<u32, u32>,
    /// elements recorded since the last clear
    seen: u64,
    /// decrement steps (operation (c)) since the last clear
    decrements: u64,
}

impl MisraGries {
    /// A counter set with `k ≥ 1` counters.
    pub fn new(k: usize) -> MisraGries {
        assert!(k >= 1, "a Misra-Gries counter set needs at least one counter");
        let mut index = FxHashMap::default();
        index.reserve(k);
        MisraGries { k, keys: Vec::with_capacity(k), counts: Vec::with_capacity(k), index, seen: 0, decrements: 0 }
    }

    /// Count one occurrence of `x`.
    #[inline]
    pub fn record(&mut self, x: u32) {
        self.seen += 1;
        if let Some(&i) = self.index.get(&x) {
            self.counts[i as usize] += 1;
        } else if self.keys.len() < self.k {
            self.index.insert(x, self.keys.len() as u32);
            self.keys.push(x);
            self.counts.push(1);
        } else {
            self.decrement_all();
        }
    }

    /// Every counter loses one; counters at 0 are freed.
    #[cold]
    fn decrement_all(&mut self) {
        self.decrements += 1;
        let mut i = 0;
        while i < self.keys.len() {
            self.counts[i] -= 1;
            if self.counts[i] > 0 {
                i += 1;
                continue;
            }
            self.index.remove(&self.keys[i]);
            self.keys.swap_remove(i);
            self.counts.swap_remove(i);
            // the element moved into slot i has not been decremented yet
            if i < self.keys.len() {
                self.index.insert(self.keys[i], i as u32);
            }
        }
    }

    /// Whether `x` holds a counter.
    #[inline]
    pub fn contains(&self, x: u32) -> bool {
        self.index.contains_key(&x)
    }

    /// The counter of `x`, if tracked: at most its true count, and at least its true count
    /// minus `decrements()` (itself at most `seen() / (k + 1)`).
    pub fn count(&self, x: u32) -> Option<u32> {
        self.index.get(&x).map(|&i| self.counts[i as usize])
    }

    /// The tracked elements and their counters, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.keys.iter().copied().zip(self.counts.iter().copied())
    }

    /// Elements tracked now (at most `k`).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The number of counters, `k`.
    pub fn capacity(&self) -> usize {
        self.k
    }

    /// Elements recorded since the last clear, `n`.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Decrement steps since the last clear, `d ≤ n / (k + 1)`: the most any counter can
    /// fall short of its element's true count.
    pub fn decrements(&self) -> u64 {
        self.decrements
    }

    /// Free every counter (a new window).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.counts.clear();
        self.index.clear();
        self.seen = 0;
        self.decrements = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::MisraGries;
    use rand::{RngExt, SeedableRng};
    use std::collections::HashMap;

    fn run(k: usize, stream: &[u32]) -> MisraGries {
        let mut m = MisraGries::new(k);
        for &x in stream {
            m.record(x);
        }
        m
    }

    /// The worked example, step by step, with k = 2 counters over a b a c a b d a b (n = 9):
    /// {a:1} {a:1 b:1} {a:2 b:1}, c finds both taken: {a:1} (b freed), {a:2} {a:2 b:1},
    /// d: {a:1}, {a:2} {a:2 b:1}. a occurs 4 > 9/3 times and is tracked, 2 short of its
    /// count (≤ 9/3); b (3, not more than 9/3) happens to be tracked too.
    #[test]
    fn worked_example_k2() {
        let (a, b, c, d) = (10, 11, 12, 13);
        let m = run(2, &[a, b, a, c, a, b, d, a, b]);
        assert_eq!(m.count(a), Some(2));
        assert_eq!(m.count(b), Some(1));
        assert!(!m.contains(c) && !m.contains(d));
        assert_eq!((m.len(), m.seen(), m.decrements()), (2, 9, 2), "c and d each cost a step");
    }

    /// k = 1 is Boyer–Moore's majority vote: an element with more than half of the stream
    /// is the one left tracked, wherever its occurrences fall.
    #[test]
    fn one_counter_finds_the_majority() {
        let m = run(1, &[5, 1, 5, 2, 3, 5, 5, 4, 5]);
        assert_eq!(m.entries().collect::<Vec<_>>(), vec![(5, 1)]);
        let m = run(1, &[1, 2, 3, 4, 7, 7, 7, 7, 7]);
        assert!(m.contains(7));
    }

    /// The guarantee, on random streams: with k counters every element occurring more than
    /// n/(k+1) times is tracked, and each counter is at most its true count and at least
    /// the true count minus n/(k+1).
    #[test]
    fn frequent_elements_are_always_tracked() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for trial in 0..300 {
            let k = 1 + trial % 9;
            let n = 1 + rng.random_range(0..400usize);
            let universe = 1 + rng.random_range(0..30u32);
            // skewed: half the draws from a few elements
            let stream: Vec<u32> =
                (0..n).map(|_| if rng.random_bool(0.5) { rng.random_range(0..3u32.min(universe)) } else { rng.random_range(0..universe) }).collect();
            let m = run(k, &stream);
            let mut truth: HashMap<u32, u64> = HashMap::new();
            for &x in &stream {
                *truth.entry(x).or_default() += 1;
            }
            let bound = n as u64 / (k as u64 + 1);
            assert!(m.len() <= k && m.decrements() <= bound);
            for (&x, &c) in &truth {
                if c * (k as u64 + 1) > n as u64 {
                    assert!(m.contains(x), "k={k} n={n}: {x} occurs {c} times but is not tracked");
                }
                if let Some(est) = m.count(x) {
                    assert!(est as u64 <= c && est as u64 + m.decrements() >= c, "k={k} n={n}: {x}: counter {est}, true {c}");
                }
            }
        }
    }

    #[test]
    fn clear_starts_a_new_window() {
        let mut m = run(3, &[1, 1, 2, 3, 4]);
        assert_eq!((m.count(1), m.len(), m.decrements()), (Some(1), 1, 1));
        m.clear();
        assert!(m.is_empty() && m.seen() == 0 && m.decrements() == 0 && !m.contains(1));
        m.record(9);
        assert_eq!(m.count(9), Some(1));
        assert_eq!(m.capacity(), 3);
    }
}
