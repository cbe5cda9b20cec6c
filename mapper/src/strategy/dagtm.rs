//! `dagtm`: Data-Affinity-Grouping-based Thread Mapping of Ju et al. (digest 003).
//!
//! Works from the profile's sample log ([`crate::samples`], `profile/samples.csv`),
//! not from the communication matrix:
//! 1. per thread, the sampled data addresses (cut to `line`-byte lines, 64 by default) in time
//!    order; reuse-distance analysis ([`crate::reuse`]) gives R_j and M_j (distinct lines);
//! 2. classification by `R_j / M_j` — the paper's thresholds are fractions of "the amount of
//!    data accessed in the measurement interval", here the thread's whole sampled window:
//!    `< dmin` (0.5) DSP, `dmin ..= dmax` (0.85) DDP, `> dmax` DIP; threads without samples
//!    form no class;
//! 3. affinity matrix: for two threads of the same class, the number of distinct lines both
//!    accessed; 0 across classes;
//! 4. affinity subtrees (Prim-like): start from the heaviest remaining edge, grow by the heaviest
//!    edge leaving the subtree until it has N_p threads (N_p = `np`, by default the PUs per
//!    core), repeat. Ties go to the lowest thread indexes. A subtree whose component runs out
//!    closes early; threads left without edges then fill the groups with free places, in
//!    order, and further groups of N_p — so normally K = ⌈N_t/N_p⌉ groups;
//! 5. binding: Rule 1, a group's threads on the PUs of one core, spilling onto the next
//!    (adjacent) core when it is full; Rule 2, every group starts on a core no other group
//!    uses while such cores remain. Groups are bound in the order they were formed (heaviest
//!    first), cores in topology order. With more threads than PUs, binding starts a new round.
//!
//! Without a sample log the strategy fails with a message saying how to get one: it never
//! falls back silently to another method.

use super::{MapInput, Params, Strategy};
use crate::error::{MapError, Result};
use crate::reuse::average_reuse_distance;
use crate::samples::SampleLog;
use crate::topology::Topology;
use std::collections::HashMap;
use std::sync::Arc;

/// Locality pattern of a thread (digest 003 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Data sharing: strong temporal locality.
    Dsp,
    /// Data dependency: some temporal locality.
    Ddp,
    /// Data isolation: poor temporal locality.
    Dip,
    /// No samples for this thread.
    None,
}

/// `R_j < dmin·M_j` → DSP; `≤ dmax·M_j` → DDP; above → DIP.
pub fn classify(r: f64, m: usize, dmin: f64, dmax: f64) -> Pattern {
    let ratio = r / m as f64;
    if ratio < dmin {
        Pattern::Dsp
    } else if ratio <= dmax {
        Pattern::Ddp
    } else {
        Pattern::Dip
    }
}

#[derive(Debug, Clone)]
pub struct Dagtm {
    pub dmin: f64,
    pub dmax: f64,
    /// Threads per group; None = PUs per core of the topology.
    pub np: Option<usize>,
    /// Bytes per datum (addresses are cut to this granularity).
    pub line: u64,
    samples: Option<Arc<SampleLog>>,
}

impl Default for Dagtm {
    fn default() -> Self {
        Dagtm {
            dmin: 0.5,
            dmax: 0.85,
            np: None,
            line: 64,
            samples: None,
        }
    }
}

const KEYS: &[&str] = &["dmin", "dmax", "np", "line"];

impl Strategy for Dagtm {
    fn name(&self) -> &'static str {
        "dagtm"
    }
    fn describe(&self) -> &'static str {
        "reuse-distance classes + affinity subtrees, one group per core (Ju et al.; needs \
         profile/samples.csv; params: dmin=0.5, dmax=0.85, np=PUs per core, line=64)"
    }
    fn param_keys(&self) -> &'static [&'static str] {
        KEYS
    }
    fn configure(&self, p: &mut Params) -> Result<Box<dyn Strategy>> {
        let mut s = self.clone();
        if let Some(v) = p.take_f64("dmin")? {
            s.dmin = v;
        }
        if let Some(v) = p.take_f64("dmax")? {
            s.dmax = v;
        }
        if let Some(v) = p.take_usize("np", 1)? {
            s.np = Some(v);
        }
        if let Some(v) = p.take_usize("line", 1)? {
            if !v.is_power_of_two() {
                return Err(MapError::Strategy(format!(
                    "'dagtm': parameter line={v} is invalid: expected a power of two"
                )));
            }
            s.line = v as u64;
        }
        p.finish(KEYS)?;
        if s.dmin > s.dmax {
            return Err(MapError::Strategy(format!(
                "'dagtm': dmin={} must not exceed dmax={}",
                s.dmin, s.dmax
            )));
        }
        Ok(Box::new(s))
    }
    fn with_samples(&self, log: Arc<SampleLog>) -> Option<Box<dyn Strategy>> {
        let mut s = self.clone();
        s.samples = Some(log);
        Some(Box::new(s))
    }
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>> {
        let n = input.comm.n();
        let log = self.samples.as_deref().ok_or_else(|| {
            MapError::Strategy(
                "'dagtm' needs the profile's sample log (samples.csv with \
                 tid_index,time_ns,addr): give a profile directory that has one, or --samples FILE"
                    .into(),
            )
        })?;
        if log.threads.len() > n {
            return Err(MapError::input(
                "sample log",
                format!(
                    "has samples of thread {} but the profile has {n} threads",
                    log.threads.len() - 1
                ),
            ));
        }
        if log.is_empty() {
            return Err(MapError::input("sample log", "has no samples"));
        }
        let lines: Vec<Vec<u64>> = (0..n)
            .map(|t| {
                log.threads
                    .get(t)
                    .map(|a| a.iter().map(|x| x / self.line).collect())
                    .unwrap_or_default()
            })
            .collect();
        let classes: Vec<Pattern> = lines
            .iter()
            .map(|tr| match average_reuse_distance(tr) {
                Some((r, m)) => classify(r, m, self.dmin, self.dmax),
                None => Pattern::None,
            })
            .collect();
        let aff = affinity(&lines, &classes);
        let np = self.np.unwrap_or_else(|| pus_per_core(input.topology));
        let groups = subtrees(&aff, np);
        log::info!(
            "dagtm: classes {:?}, N_p = {np}, {} groups: {:?}",
            classes,
            groups.len(),
            groups
        );
        Ok(Some(bind(&groups, input.topology, n)))
    }
}

/// The most PUs any core has (the hardware threads per core, N_p).
pub fn pus_per_core(topo: &Topology) -> usize {
    cores(topo).iter().map(Vec::len).max().unwrap_or(1)
}

/// PUs grouped by core, cores in topology order.
fn cores(topo: &Topology) -> Vec<Vec<usize>> {
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, pu) in topo.pus.iter().enumerate() {
        let k = *index.entry(pu.core).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[k].push(i);
    }
    out
}

/// Affinity matrix: distinct data shared by two threads of the same class (0 otherwise).
pub fn affinity(lines: &[Vec<u64>], classes: &[Pattern]) -> Vec<Vec<f64>> {
    let n = lines.len();
    let mut who: HashMap<u64, Vec<usize>> = HashMap::new();
    for (t, tr) in lines.iter().enumerate() {
        for &l in tr {
            let v = who.entry(l).or_default();
            if v.last() != Some(&t) {
                v.push(t);
            }
        }
    }
    let mut a = vec![vec![0.0; n]; n];
    for ts in who.values() {
        for (x, &i) in ts.iter().enumerate() {
            for &j in &ts[x + 1..] {
                if classes[i] == classes[j] && classes[i] != Pattern::None {
                    a[i][j] += 1.0;
                    a[j][i] += 1.0;
                }
            }
        }
    }
    a
}

/// Affinity subtrees of at most `np` threads (see the module docs for the completion rules).
pub fn subtrees(aff: &[Vec<f64>], np: usize) -> Vec<Vec<usize>> {
    let n = aff.len();
    let np = np.max(1);
    let mut free = vec![true; n];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    if np >= 2 {
        let mut edges: Vec<(f64, usize, usize)> = Vec::new();
        for (i, row) in aff.iter().enumerate() {
            for (j, &w) in row.iter().enumerate().skip(i + 1) {
                if w > 0.0 {
                    edges.push((w, i, j));
                }
            }
        }
        // Heaviest first, then lowest indexes.
        edges.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let mut next = 0;
        loop {
            while next < edges.len() && !(free[edges[next].1] && free[edges[next].2]) {
                next += 1;
            }
            let Some(&(_, u, v)) = edges.get(next) else {
                break;
            };
            let mut s = vec![u, v];
            free[u] = false;
            free[v] = false;
            while s.len() < np {
                let mut best: Option<(f64, usize)> = None;
                for x in (0..n).filter(|&x| free[x]) {
                    let w = s.iter().map(|&y| aff[y][x]).fold(0.0, f64::max);
                    if w > 0.0 && best.is_none_or(|(bw, _)| w > bw) {
                        best = Some((w, x));
                    }
                }
                match best {
                    Some((_, x)) => {
                        free[x] = false;
                        s.push(x);
                    }
                    None => break,
                }
            }
            groups.push(s);
        }
    }
    // Threads without edges: fill open places first, then new groups.
    let mut left = (0..n).filter(|&x| free[x]);
    for g in groups.iter_mut() {
        while g.len() < np {
            match left.next() {
                Some(x) => g.push(x),
                None => break,
            }
        }
    }
    let rest: Vec<usize> = left.collect();
    groups.extend(rest.chunks(np).map(<[usize]>::to_vec));
    groups
}

/// Rules 1 and 2: thread -> index into `topo.pus`.
pub fn bind(groups: &[Vec<usize>], topo: &Topology, n: usize) -> Vec<usize> {
    let cores = cores(topo);
    let mut used: Vec<Vec<bool>> = cores.iter().map(|c| vec![false; c.len()]).collect();
    let mut out = vec![0; n];
    let free_in = |used: &Vec<Vec<bool>>, c: usize| used[c].iter().position(|u| !u);
    for g in groups {
        // Rule 2: a core no other group uses; else any core with room; else a new round.
        let start = (0..cores.len())
            .find(|&c| used[c].iter().all(|u| !u))
            .or_else(|| (0..cores.len()).find(|&c| free_in(&used, c).is_some()));
        let mut c = match start {
            Some(c) => c,
            None => {
                used.iter_mut()
                    .for_each(|u| u.iter_mut().for_each(|x| *x = false));
                0
            }
        };
        for &t in g {
            // Rule 1: same core while it has PUs, then the next core with room.
            if free_in(&used, c).is_none() {
                match (1..=cores.len())
                    .map(|d| (c + d) % cores.len())
                    .find(|&k| free_in(&used, k).is_some())
                {
                    Some(k) => c = k,
                    None => {
                        used.iter_mut()
                            .for_each(|u| u.iter_mut().for_each(|x| *x = false));
                        c = (c + 1) % cores.len();
                    }
                }
            }
            let k = free_in(&used, c).expect("the chosen core has a free PU");
            used[c][k] = true;
            out[t] = cores[c][k];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::qap::tests::topo;
    use super::*;
    use crate::strategy::{by_name, compute_plan_with};
    use crate::CommMatrix;

    #[test]
    fn classification_boundaries() {
        // R/M < 0.5 DSP, 0.5..=0.85 DDP, > 0.85 DIP.
        assert_eq!(classify(4.9, 10, 0.5, 0.85), Pattern::Dsp);
        assert_eq!(classify(5.0, 10, 0.5, 0.85), Pattern::Ddp);
        assert_eq!(classify(8.5, 10, 0.5, 0.85), Pattern::Ddp);
        assert_eq!(classify(8.6, 10, 0.5, 0.85), Pattern::Dip);
        assert_eq!(classify(2.0, 3, 0.7, 0.9), Pattern::Dsp); // `a b c b a`: R/M = 2/3
    }

    #[test]
    fn affinity_counts_shared_distinct_data_within_a_class() {
        let lines = vec![vec![1, 2, 2, 3], vec![2, 3, 4], vec![3, 4], vec![]];
        let cl = [Pattern::Dsp, Pattern::Dsp, Pattern::Dip, Pattern::None];
        let a = affinity(&lines, &cl);
        assert_eq!(a[0][1], 2.0); // lines 2 and 3, each once
        assert_eq!(a[1][2], 0.0); // different classes
        assert_eq!(a[0][3], 0.0);
    }

    /// Claim D2: K = ⌈N_t/N_p⌉, at most N_p per group, grown from the heaviest edge.
    #[test]
    fn eight_threads_four_per_core_make_two_groups() {
        let mut a = vec![vec![0.0; 8]; 8];
        let mut e = |i: usize, j: usize, w: f64| {
            a[i][j] = w;
            a[j][i] = w;
        };
        // Heavy clique {1, 3, 6, 7} (the paper's high-sharing threads), another {0, 2, 4, 5}.
        for (i, j) in [(1, 3), (3, 6), (6, 7), (1, 7)] {
            e(i, j, 10.0);
        }
        for (i, j) in [(0, 2), (2, 4), (4, 5)] {
            e(i, j, 5.0);
        }
        e(5, 6, 1.0);
        let g = subtrees(&a, 4);
        assert_eq!(g.len(), 2);
        let mut g0 = g[0].clone();
        g0.sort();
        assert_eq!(g0, vec![1, 3, 6, 7]);
        let mut g1 = g[1].clone();
        g1.sort();
        assert_eq!(g1, vec![0, 2, 4, 5]);
        // Isolated threads fill places, then new groups: 5 threads, no edges, N_p 2 -> 3 groups.
        assert_eq!(
            subtrees(&vec![vec![0.0; 5]; 5], 2),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
    }

    /// Claim D3: a group of ≤ N_p threads shares one core; groups never share a core while
    /// free cores remain; a larger group continues on the adjacent core.
    #[test]
    fn binding_rules() {
        let t = topo(1, 2, 4, 2); // 8 cores of 2 PUs
        let core = |p: usize| t.pus[p].core;
        let pus = bind(&[vec![5, 2], vec![0], vec![1, 3, 4]], &t, 6);
        assert_eq!(core(pus[5]), core(pus[2]));
        assert_ne!(core(pus[0]), core(pus[5]));
        // The 3-group fills a fresh core and spills onto the next one.
        assert_eq!(core(pus[1]), core(pus[3]));
        assert_ne!(core(pus[4]), core(pus[1]));
        let mut all = pus.clone();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6);
        // More threads than PUs: a new round, still valid.
        let many: Vec<Vec<usize>> = (0..10).map(|i| vec![2 * i, 2 * i + 1]).collect();
        let p = bind(&many, &t, 20);
        assert!(p.iter().all(|&x| x < t.pus.len()));
    }

    fn log(threads: Vec<Vec<u64>>) -> Arc<SampleLog> {
        Arc::new(SampleLog { threads })
    }

    #[test]
    fn end_to_end_groups_sharing_threads_on_cores() {
        // 4 threads on 2 cores × 2 PUs: threads 0 and 3 reuse lines A, threads 1 and 2 lines B.
        let t = topo(1, 1, 2, 2);
        let a: Vec<u64> = (0..8).map(|i| i * 64).collect();
        let b: Vec<u64> = (100..108).map(|i| i * 64).collect();
        let rep = |v: &Vec<u64>| v.iter().chain(v).chain(v).copied().collect::<Vec<_>>();
        let samples = log(vec![rep(&a), rep(&b), rep(&b), rep(&a)]);
        let comm = CommMatrix::zeros(4);
        let load = vec![1.0; 4];
        let input = MapInput {
            comm: &comm,
            load: &load,
            topology: &t,
            seed: 1,
        };
        let s = by_name("dagtm").unwrap().with_samples(samples).unwrap();
        let plan = compute_plan_with(s.as_ref(), &input).unwrap();
        let core: Vec<u32> = plan.assignment.iter().map(|x| x.core).collect();
        assert_eq!(core[0], core[3]);
        assert_eq!(core[1], core[2]);
        assert_ne!(core[0], core[1]);
    }

    #[test]
    fn missing_or_bad_sample_logs_are_clear_errors() {
        let t = topo(1, 1, 2, 2);
        let comm = CommMatrix::zeros(2);
        let load = vec![1.0; 2];
        let input = MapInput {
            comm: &comm,
            load: &load,
            topology: &t,
            seed: 1,
        };
        let e = crate::strategy::compute_plan("dagtm", &input)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("needs the profile's sample log") && e.contains("samples.csv"),
            "{e}"
        );
        let s = by_name("dagtm").unwrap();
        let e = compute_plan_with(
            s.with_samples(log(vec![vec![], vec![], vec![1]]))
                .unwrap()
                .as_ref(),
            &input,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("thread 2") && e.contains("2 threads"), "{e}");
        let e = compute_plan_with(s.with_samples(log(vec![vec![]])).unwrap().as_ref(), &input)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no samples"), "{e}");
        let e = by_name("dagtm:dmin=0.9,dmax=0.5")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("dmin=0.9"), "{e}");
        let e = by_name("dagtm:line=48").err().unwrap().to_string();
        assert!(e.contains("power of two"), "{e}");
        let e = by_name("dagtm:np=0").err().unwrap().to_string();
        assert!(e.contains("np=0"), "{e}");
    }
}
