//! `pair-exchange`: the MPIPP-style Pair-Exchange baseline of digest 002 (§4.3, "pe-500k").
//!
//! Start from a mapping (`compact` by default, or a seeded random permutation), then for a fixed
//! budget of iterations pick a random pair of slots and exchange their contents when that
//! strictly lowers the QAP cost `Σ a_ij · hops(pu_i, pu_j)` (see [`super::qap`]). Seeded:
//! the same input and seed give the same plan.

use super::baseline::compact_pu;
use super::qap::{pair_exchange, Mapping, PuDistance, Qap, Slots};
use super::{MapInput, Params, Strategy};
use crate::error::Result;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// The paper's baseline budget ("pe-500k").
pub const DEFAULT_ITERS: usize = 500_000;

#[derive(Debug, Clone, PartialEq)]
pub struct PairExchange {
    /// Pair evaluations.
    pub iters: usize,
    /// Start from a seeded random permutation instead of `compact`.
    pub random_start: bool,
}

impl Default for PairExchange {
    fn default() -> Self {
        PairExchange {
            iters: DEFAULT_ITERS,
            random_start: false,
        }
    }
}

const KEYS: &[&str] = &["iters", "init"];

impl Strategy for PairExchange {
    fn name(&self) -> &'static str {
        "pair-exchange"
    }
    fn describe(&self) -> &'static str {
        "MPIPP-style pair exchange on the hop-count QAP cost (params: iters=500000, init=compact|random)"
    }
    fn param_keys(&self) -> &'static [&'static str] {
        KEYS
    }
    fn configure(&self, p: &mut Params) -> Result<Box<dyn Strategy>> {
        let mut s = self.clone();
        // Bounded like the default's anneal=: 100× the default is already minutes on big jobs.
        if let Some(i) = p.take_usize_in("iters", 0, 100 * DEFAULT_ITERS)? {
            s.iters = i;
        }
        if let Some(init) = p.take_choice("init", &["compact", "random"])? {
            s.random_start = init == "random";
        }
        p.finish(KEYS)?;
        Ok(Box::new(s))
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let n = input.comm.n();
        let topo = input.topology;
        let slots = Slots::new(topo, n);
        let dist = PuDistance::hops(topo);
        let q = Qap::new(input.comm, &slots, &dist);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(input.seed);
        let pos: Vec<usize> = if self.random_start {
            let mut all: Vec<usize> = (0..slots.len()).collect();
            all.shuffle(&mut rng);
            all.truncate(n);
            all
        } else {
            compact_slots(&slots, n)
        };
        let mut m = Mapping::from_pos(pos, slots.len());
        let st = pair_exchange(
            &q,
            &mut m,
            std::slice::from_ref(&(0..slots.len())),
            self.iters,
            &mut rng,
        );
        log::info!(
            "pair-exchange: cost {} -> {} ({} of {} exchanges accepted)",
            st.initial,
            st.cost,
            st.accepted,
            st.evaluated
        );
        Ok(Some(m.pus(&slots)))
    }
}

/// The slots `compact` uses: thread t on its PU ([`compact_pu`]); when oversubscribed, the
/// threads of one block take that PU's copies in turn.
pub(crate) fn compact_slots(slots: &Slots, n: usize) -> Vec<usize> {
    let p = slots.pu.iter().copied().max().map_or(0, |m| m + 1);
    let mut copies: Vec<Vec<usize>> = vec![Vec::new(); p];
    for (s, &pu) in slots.pu.iter().enumerate() {
        copies[pu].push(s);
    }
    let order: Vec<&Vec<usize>> = copies.iter().filter(|c| !c.is_empty()).collect();
    let p = order.len();
    let mut used = vec![0; p];
    (0..n)
        .map(|t| {
            let b = compact_pu(t, n, p);
            used[b] += 1;
            order[b][used[b] - 1]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::qap::tests::{random_comm, topo};
    use super::*;
    use crate::strategy::{by_name, compute_plan};

    fn input<'a>(
        comm: &'a crate::CommMatrix,
        load: &'a [f64],
        t: &'a crate::Topology,
    ) -> MapInput<'a> {
        MapInput {
            comm,
            load,
            topology: t,
            seed: 7,
        }
    }

    #[test]
    fn improves_a_scattered_pattern_and_is_deterministic() {
        // Threads 2i and 2i+1 talk; compact puts pairs together already, so shuffle the
        // pattern: thread i talks to thread i+8 (compact places them on different nodes).
        let t = topo(2, 1, 4, 2);
        let mut comm = crate::CommMatrix::zeros(16);
        for i in 0..8 {
            comm.add_sym(i, i + 8, 100.0);
        }
        let load = vec![1.0; 16];
        let inp = input(&comm, &load, &t);
        let s = by_name("pair-exchange:iters=20000").unwrap();
        let a = s.map(&inp).unwrap().unwrap();
        let b = s.map(&inp).unwrap().unwrap();
        assert_eq!(a, b);
        let c = compute_plan("pair-exchange:iters=20000", &inp).unwrap();
        let compact = compute_plan("compact", &inp).unwrap();
        assert_eq!(compact.metrics.remote_comm, 800.0);
        assert_eq!(
            c.metrics.remote_comm, 0.0,
            "every pair should end on one node"
        );
        let mut used = a.clone();
        used.sort();
        used.dedup();
        assert_eq!(used.len(), 16, "one thread per PU");
    }

    #[test]
    fn random_start_and_zero_budget() {
        let t = topo(1, 2, 2, 1);
        let comm = random_comm(4, 3, 1.0);
        let load = vec![1.0; 4];
        let inp = input(&comm, &load, &t);
        let p = by_name("pair-exchange:iters=0").unwrap().map(&inp).unwrap();
        assert_eq!(
            p,
            Some(vec![0, 1, 2, 3]),
            "no budget: compact start unchanged"
        );
        let r = by_name("pair-exchange:init=random,iters=0")
            .unwrap()
            .map(&inp)
            .unwrap()
            .unwrap();
        let mut sorted = r.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
    }

    #[test]
    fn oversubscribed_start_is_compact() {
        let t = topo(1, 2, 1, 2);
        let slots = Slots::new(&t, 6);
        let pos = compact_slots(&slots, 6);
        let pus: Vec<usize> = pos.iter().map(|&s| slots.pu[s]).collect();
        assert_eq!(pus, vec![0, 0, 1, 2, 2, 3]);
        let comm = random_comm(6, 1, 0.5);
        let load = vec![1.0; 6];
        let p = by_name("pair-exchange:iters=0")
            .unwrap()
            .map(&input(&comm, &load, &t))
            .unwrap();
        assert_eq!(p, Some(vec![0, 0, 1, 2, 2, 3]));
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = by_name("pair-exchange:iters=-3").err().unwrap().to_string();
        assert!(e.contains("iters=-3") && e.contains("integer"), "{e}");
        let e = by_name("pair-exchange:init=best")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("init=best") && e.contains("compact, random"),
            "{e}"
        );
        let e = by_name("pair-exchange:k=3").err().unwrap().to_string();
        assert!(
            e.contains("no parameter 'k'") && e.contains("iters, init"),
            "{e}"
        );
        let e = by_name("pair-exchange:iters").err().unwrap().to_string();
        assert!(e.contains("key=value"), "{e}");
        let e = by_name("compact:x=1").err().unwrap().to_string();
        assert!(e.contains("takes no parameters"), "{e}");
    }
}
