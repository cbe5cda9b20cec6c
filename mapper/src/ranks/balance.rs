//! Balancing the ranks' load over parts without giving up any cut.
//!
//! The rule (docs/ranks.md, "Load"): rank counts are exact and the cut comes first; among
//! plans with the same cut, cmlb prefers the one whose parts carry loads closer to their
//! share. Concretely, two ranks `u` (of part `a`) and `v` (of part `b`) are swapped when
//! - the swap does not raise the cut between the parts being split (gain ≥ 0), and
//! - it lowers `Φ = Σ_p L_p² / n_p` (`L_p` the part's load, `n_p` its ranks), i.e. it brings
//!   the two parts' load per rank closer without overshooting;
//!
//! best swap first for each pair of parts, until no such swap is left. The candidates are the
//! ranks on the boundary between the two parts and the ranks that exchange nothing at all
//! (those can go anywhere at no cost): a swap between two ranks deep inside their parts always
//! raises the cut. Since Φ strictly decreases, it ends.

use super::multilevel::Wg;

/// Swaps per pair of parts per sweep, and sweeps at most.
const SWAPS_PER_PAIR: usize = 64;
const SWEEPS: usize = 32;

/// Bytes `v` exchanges with part `p`.
fn conn(g: &Wg, part: &[u32], v: usize, p: u32) -> f64 {
    (g.xadj[v]..g.xadj[v + 1])
        .filter(|&e| part[g.adj[e] as usize] == p)
        .map(|e| g.ew[e])
        .sum()
}

fn edge(g: &Wg, u: usize, v: usize) -> f64 {
    (g.xadj[u]..g.xadj[u + 1])
        .find(|&e| g.adj[e] as usize == v)
        .map_or(0.0, |e| g.ew[e])
}

/// Apply the rule of the module doc to `part` (parts of exact `sizes`, unit vertex weights),
/// with `load[v]` per vertex. Returns the swaps made.
pub(crate) fn balance(g: &Wg, part: &mut [u32], sizes: &[usize], load: &[f64]) -> usize {
    let n = g.n();
    let k = sizes.len();
    if k < 2 || n < 2 {
        return 0;
    }
    let mut lp = vec![0.0f64; k];
    for v in 0..n {
        lp[part[v] as usize] += load[v];
    }
    let total: f64 = lp.iter().sum();
    if total <= 0.0 {
        return 0;
    }
    let eps_load = 1e-12 * total;
    let isolated: Vec<bool> = (0..n)
        .map(|v| (g.xadj[v]..g.xadj[v + 1]).all(|e| g.ew[e] == 0.0))
        .collect();
    let mut swaps = 0;
    for _ in 0..SWEEPS {
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
        for v in 0..n {
            members[part[v] as usize].push(v);
        }
        // Pairs to look at: parts that share an edge, and parts that both hold isolated ranks.
        let mut pairs: std::collections::BTreeSet<(u32, u32)> = Default::default();
        for v in 0..n {
            for e in g.xadj[v]..g.xadj[v + 1] {
                let (a, b) = (part[v], part[g.adj[e] as usize]);
                if a != b && g.ew[e] > 0.0 {
                    pairs.insert((a.min(b), a.max(b)));
                }
            }
        }
        let with_isolated: Vec<u32> = (0..k as u32)
            .filter(|&p| members[p as usize].iter().any(|&v| isolated[v]))
            .collect();
        for (i, &a) in with_isolated.iter().enumerate() {
            for &b in &with_isolated[i + 1..] {
                pairs.insert((a, b));
            }
        }
        let before = swaps;
        for (a, b) in pairs {
            let (a, b) = (a as usize, b as usize);
            if sizes[a] == 0 || sizes[b] == 0 {
                continue;
            }
            for _ in 0..SWAPS_PER_PAIR {
                let (na, nb) = (sizes[a] as f64, sizes[b] as f64);
                // Heavier per rank first: loads flow from `h` to `l`.
                let (h, l) = if lp[a] / na >= lp[b] / nb {
                    (a, b)
                } else {
                    (b, a)
                };
                let (nh, nl) = (sizes[h] as f64, sizes[l] as f64);
                let gap = lp[h] / nh - lp[l] / nl;
                if gap * nh.min(nl) <= eps_load {
                    break;
                }
                let cand = |from: usize, to: usize| -> Vec<(usize, f64, f64)> {
                    members[from]
                        .iter()
                        .filter_map(|&v| {
                            let c_to = conn(g, part, v, to as u32);
                            (c_to > 0.0 || isolated[v])
                                .then(|| (v, c_to - conn(g, part, v, from as u32), load[v]))
                        })
                        .collect()
                };
                let (ch, cl) = (cand(h, l), cand(l, h));
                let mut best: Option<(f64, usize, usize)> = None;
                for &(u, gu, xu) in &ch {
                    for &(v, gv, xv) in &cl {
                        let d = xu - xv;
                        if d <= eps_load {
                            continue;
                        }
                        // ΔΦ of moving load d from h to l.
                        let dphi = d * (-2.0 * gap + d * (1.0 / nh + 1.0 / nl));
                        if dphi >= -eps_load * d {
                            continue;
                        }
                        if best.is_some_and(|(bd, _, _)| dphi >= bd) {
                            continue;
                        }
                        let gain = gu + gv - 2.0 * edge(g, u, v);
                        if gain < -1e-9 * (gu.abs() + gv.abs() + 1.0) {
                            continue;
                        }
                        best = Some((dphi, u, v));
                    }
                }
                let Some((_, u, v)) = best else { break };
                let d = load[u] - load[v];
                part[u] = l as u32;
                part[v] = h as u32;
                lp[h] -= d;
                lp[l] += d;
                if let Some(i) = members[h].iter().position(|&x| x == u) {
                    members[h][i] = v;
                }
                if let Some(i) = members[l].iter().position(|&x| x == v) {
                    members[l][i] = u;
                }
                swaps += 1;
            }
        }
        if swaps == before {
            break;
        }
    }
    swaps
}
