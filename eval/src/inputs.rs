//! What the evaluation maps: synthetic known patterns, EagerMap's published matrices and
//! profile directories, each a communication matrix with a load vector; and the synthetic
//! machines they are mapped onto.

use crate::error::{EvalError, Result};
use mapper::{read_samples_csv, SampleLog, SAMPLES_FILE};
use mapper::{CommMatrix, Topology};
use std::path::{Path, PathBuf};

/// One matrix + load vector to map.
#[derive(Debug, Clone)]
pub struct EvalInput {
    pub name: String,
    /// Where it came from (pattern description or file).
    pub source: String,
    pub comm: CommMatrix,
    pub load: Vec<f64>,
    /// The raw-sample log of a profile (`samples.csv`), for strategies that use it (dagtm).
    pub samples: Option<std::sync::Arc<SampleLog>>,
}

fn pattern(name: &str, source: &str, n: usize, f: impl Fn(usize, usize) -> f64) -> EvalInput {
    let mut comm = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            let v = f(i, j);
            if v > 0.0 {
                comm.add_sym(i, j, v);
            }
        }
    }
    // Uneven but deterministic per-thread loads, so Load_std separates strategies.
    let load = (0..n).map(|t| 1.0 + ((t * 7) % 5) as f64).collect();
    EvalInput {
        name: name.to_string(),
        source: source.to_string(),
        comm,
        load,
        samples: None,
    }
}

/// Synthetic matrices with a known best grouping, `n` threads each (n ≥ 8, multiple of 8).
pub fn patterns(n: usize) -> Vec<EvalInput> {
    let side = (1..=n)
        .rev()
        .find(|w| n.is_multiple_of(*w) && w * w <= n)
        .unwrap_or(1);
    let (cols, rows) = (n / side, side);
    let mut v = vec![
        pattern("pairs", "thread 2k talks to 2k+1 only", n, |i, j| {
            if i / 2 == j / 2 {
                100.0
            } else {
                0.0
            }
        }),
        pattern(
            "cliques-interleaved",
            "4 cliques: t talks to every t' with t ≡ t' (mod 4), weak noise elsewhere",
            n,
            |i, j| if i % 4 == j % 4 { 100.0 } else { 1.0 },
        ),
        pattern(
            "ring",
            "1-D nearest neighbour with wrap-around",
            n,
            |i, j| {
                if j - i == 1 || (i == 0 && j == n - 1) {
                    100.0
                } else {
                    0.0
                }
            },
        ),
        pattern(
            "stencil-2d",
            &format!("{cols}×{rows} grid, 4 neighbours"),
            n,
            |i, j| {
                let (xi, yi, xj, yj) = (i % cols, i / cols, j % cols, j / cols);
                if (yi == yj && xi.abs_diff(xj) == 1) || (xi == xj && yi.abs_diff(yj) == 1) {
                    100.0
                } else {
                    0.0
                }
            },
        ),
        pattern(
            "all-to-all",
            "uniform: every placement is equally good",
            n,
            |_, _| 10.0,
        ),
        pattern(
            "master-worker",
            "thread 0 talks to everyone, workers to nobody",
            n,
            |i, _| if i == 0 { 100.0 } else { 0.0 },
        ),
    ];
    // Communication says "keep each clique together", load says "spread clique 0": the case
    // where communication-only grouping loses memory balance (the thesis's motivation).
    let mut heavy = pattern(
        "cliques-heavy-load",
        "2 interleaved cliques (t mod 2); clique 0 has 4× the memory load",
        n,
        |i, j| if i % 2 == j % 2 { 100.0 } else { 1.0 },
    );
    heavy.load = (0..n).map(|t| if t % 2 == 0 { 4.0 } else { 1.0 }).collect();
    v.push(heavy);
    v
}

/// Every `*.csv` under `dir` (recursively, sorted), read in EagerMap's order (rows in reverse
/// task order); loads are all ones (EagerMap's matrices carry none).
pub fn read_eagermap_dir(dir: &Path) -> Result<Vec<EvalInput>> {
    let mut files = Vec::new();
    collect_csv(dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(EvalError::NoMatrices(dir.to_path_buf()));
    }
    files
        .into_iter()
        .map(|f| {
            let comm = mapper::read_comm_csv(&f, true)?;
            let name = f
                .file_stem()
                .map(|s| s.to_string_lossy().replace(".nb_messages", ""))
                .unwrap_or_default();
            Ok(EvalInput {
                name,
                source: f.display().to_string(),
                load: vec![1.0; comm.n()],
                comm,
                samples: None,
            })
        })
        .collect()
}

fn collect_csv(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| EvalError::io(dir, e))? {
        let p = e.map_err(|e| EvalError::io(dir, e))?.path();
        if p.is_dir() {
            collect_csv(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "csv") {
            out.push(p);
        }
    }
    Ok(())
}

/// A profile directory as an input (its comm.csv and load.csv).
pub fn read_profile(dir: &Path) -> Result<EvalInput> {
    let p = profile::Profile::read_dir(dir)?;
    let name = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let log = dir.join(SAMPLES_FILE);
    let samples = if log.exists() {
        Some(std::sync::Arc::new(read_samples_csv(&log)?))
    } else {
        None
    };
    Ok(EvalInput {
        name,
        samples,
        source: format!(
            "`cmlb profile` ({} backend, {} samples) of `{}`",
            p.meta.backend,
            p.meta.samples,
            p.meta
                .command
                .iter()
                .map(|a| a.rsplit('/').next().unwrap_or(a))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        comm: p.comm,
        load: p.load,
    })
}

/// A synthetic machine with `numa` NUMA nodes and at least `n` PUs (2 PUs per core).
pub fn synthetic_topology(numa: usize, n: usize) -> Result<Topology> {
    let cores = n.div_ceil(numa * 2).max(1);
    let spec = format!("numa:{numa} core:{cores} pu:2");
    Ok(Topology::load(&spec)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_symmetric_and_sized() {
        for p in patterns(32) {
            assert_eq!(p.comm.n(), 32, "{}", p.name);
            assert_eq!(p.load.len(), 32);
            let total: f64 = (0..32).map(|i| p.comm.row(i).iter().sum::<f64>()).sum();
            assert!(total > 0.0, "{} is empty", p.name);
        }
    }
}
