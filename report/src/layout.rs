//! A plan resolved against a topology: which PU and NUMA node each thread sits on.

use crate::error::{ReportError, Result};
use mapper::{Plan, Topology};

/// Per-thread placement of a plan, as indexes into the topology's `pus` and `numa` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanView {
    /// `None` when the plan does not bind threads (strategy `identity`/`none`).
    pub pu: Option<Vec<usize>>,
    /// Position in `Topology::numa` of each thread's node (empty when unbound).
    pub numa: Vec<usize>,
    pub strategy: String,
    /// Number of threads.
    pub n: usize,
}

impl PlanView {
    /// Check the plan covers threads `0..n` exactly once and only uses PUs of `topo`.
    pub fn new(plan: &Plan, topo: &Topology, n: usize) -> Result<Self> {
        if plan.assignment.is_empty() {
            return Ok(PlanView {
                pu: None,
                numa: Vec::new(),
                strategy: plan.strategy.clone(),
                n,
            });
        }
        let mut pu = vec![usize::MAX; n];
        for a in &plan.assignment {
            if a.thread >= n {
                return Err(ReportError::Plan(format!(
                    "assigns thread {} but the profile has only {n} threads (0..{})",
                    a.thread,
                    n - 1
                )));
            }
            if pu[a.thread] != usize::MAX {
                return Err(ReportError::Plan(format!(
                    "assigns thread {} twice",
                    a.thread
                )));
            }
            let p = topo.pu_position(a.pu).ok_or_else(|| {
                ReportError::Plan(format!(
                    "puts thread {} on PU {}, which the topology ({}) does not have",
                    a.thread, a.pu, topo.source
                ))
            })?;
            pu[a.thread] = p;
        }
        if let Some(t) = pu.iter().position(|&p| p == usize::MAX) {
            return Err(ReportError::Plan(format!(
                "has no PU for thread {t} (it covers {} of the profile's {n} threads)",
                plan.assignment.len()
            )));
        }
        let numa = pu
            .iter()
            .map(|&p| topo.numa_position(topo.pus[p].numa).unwrap_or(0))
            .collect();
        Ok(PlanView {
            pu: Some(pu),
            numa,
            strategy: plan.strategy.clone(),
            n,
        })
    }

    /// Threads sorted by (NUMA node, PU in topology order, creation index): the heat map in this
    /// order shows each NUMA group as a diagonal block. Creation order when unbound.
    pub fn thread_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.n).collect();
        if let Some(pu) = &self.pu {
            order.sort_by_key(|&t| (self.numa[t], pu[t], t));
        }
        order
    }

    /// Sizes of the consecutive NUMA groups in [`Self::thread_order`], with their NUMA positions.
    pub fn groups(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for t in self.thread_order() {
            let Some(&k) = self.numa.get(t) else {
                return Vec::new();
            };
            match out.last_mut() {
                Some((node, count)) if *node == k => *count += 1,
                _ => out.push((k, 1)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mapper::NodeSpec;
    use mapper::{Assignment, Level};

    fn topo() -> Topology {
        // 2 NUMA nodes x 2 cores x 1 PU: PUs 0,1 on node 0 and 2,3 on node 1.
        let numa = |i: u32| {
            NodeSpec::new(
                Level::Numa,
                i,
                (0..2)
                    .map(|c| {
                        let id = i * 2 + c;
                        NodeSpec::new(Level::Core, id, vec![NodeSpec::new(Level::Pu, id, vec![])])
                    })
                    .collect(),
            )
        };
        Topology::build(
            &NodeSpec::new(Level::Machine, 0, vec![numa(0), numa(1)]),
            "test",
        )
        .unwrap()
    }

    fn plan(pus: &[u32]) -> Plan {
        Plan {
            strategy: "test".into(),
            topology: String::new(),
            assignment: pus
                .iter()
                .enumerate()
                .map(|(t, &p)| Assignment {
                    thread: t,
                    pu: p,
                    core: p,
                    numa: p / 2,
                })
                .collect(),
            metrics: Default::default(),
        }
    }

    #[test]
    fn orders_threads_by_numa_then_pu() {
        let v = PlanView::new(&plan(&[2, 0, 3, 1]), &topo(), 4).unwrap();
        assert_eq!(v.thread_order(), vec![1, 3, 0, 2]);
        assert_eq!(v.groups(), vec![(0, 2), (1, 2)]);
    }

    #[test]
    fn rejects_plans_that_do_not_fit() {
        let e = PlanView::new(&plan(&[0, 1, 7]), &topo(), 3).unwrap_err();
        assert!(e.to_string().contains("thread 2 on PU 7"), "{e}");
        let e = PlanView::new(&plan(&[0, 1]), &topo(), 3).unwrap_err();
        assert!(e.to_string().contains("no PU for thread 2"), "{e}");
        let e = PlanView::new(&plan(&[0, 1, 2]), &topo(), 2).unwrap_err();
        assert!(e.to_string().contains("only 2 threads"), "{e}");
    }
}
