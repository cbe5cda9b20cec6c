//! The k largest eigenpairs of a dense symmetric matrix, with `nalgebra`.
//!
//! Small matrices (n ≤ [`DENSE_MAX`]) use the full `SymmetricEigen` decomposition. Above that a
//! full O(n³) decomposition is the bottleneck of spectral clustering (measured in
//! `docs/methods.md`), while only k ≪ n eigenvectors are needed: a block Krylov subspace
//! (block size k + 8, a dozen blocks, orthonormalised twice, Rayleigh–Ritz with nalgebra's
//! `SymmetricEigen` on the small projected matrix, restarted from the Ritz vectors until the
//! residuals are small) costs a few n×n×b products. A *block* method is needed because the
//! interesting eigenvalues are often repeated (one eigenvalue 1 per disconnected group of
//! threads), which a single-vector Lanczos run cannot resolve.

use nalgebra::{DMatrix, DVector, SymmetricEigen};
use rand::{Rng, SeedableRng};

/// Largest n solved with the dense decomposition.
pub const DENSE_MAX: usize = 256;

/// Residual norm ‖M v − θ v‖ accepted for a Ritz pair (inputs here have ‖M‖ ≤ 1). By the
/// Davis–Kahan bound the subspace angle is at most TOL / gap, far below what changes a k-means
/// assignment of unit-length rows; the eigenvalues are accurate to about TOL².
const TOL: f64 = 1e-4;

/// Restarts of the Krylov pass before the best Ritz vectors so far are used as they are.
const MAX_PASSES: usize = 8;

/// The `k` largest eigenvalues of symmetric `m` (descending) and their eigenvectors as columns.
pub fn top_eigen(m: &DMatrix<f64>, k: usize, seed: u64) -> (Vec<f64>, DMatrix<f64>) {
    let n = m.nrows();
    let k = k.min(n);
    if n <= DENSE_MAX {
        dense(m, k)
    } else {
        krylov(m, k, seed)
    }
}

/// Eigen-decompose a symmetric matrix and keep the `k` largest pairs, ties in index order.
fn ritz(t: DMatrix<f64>, k: usize) -> (Vec<f64>, DMatrix<f64>) {
    let e = SymmetricEigen::new(t);
    let mut idx: Vec<usize> = (0..e.eigenvalues.len()).collect();
    idx.sort_by(|&a, &b| {
        e.eigenvalues[b]
            .total_cmp(&e.eigenvalues[a])
            .then(a.cmp(&b))
    });
    idx.truncate(k);
    let vals = idx.iter().map(|&i| e.eigenvalues[i]).collect();
    let vecs = DMatrix::from_columns(
        &idx.iter()
            .map(|&i| e.eigenvectors.column(i).into_owned())
            .collect::<Vec<_>>(),
    );
    (vals, vecs)
}

fn dense(m: &DMatrix<f64>, k: usize) -> (Vec<f64>, DMatrix<f64>) {
    ritz(m.clone(), k)
}

/// Orthonormalise `v` against the first `cols` columns of `q` (two classical Gram–Schmidt
/// passes). Returns None when `v` lies (numerically) in their span.
fn orthonormalise(q: &DMatrix<f64>, cols: usize, mut v: DVector<f64>) -> Option<DVector<f64>> {
    let start = v.norm();
    if start == 0.0 {
        return None;
    }
    for _ in 0..2 {
        if cols > 0 {
            let basis = q.columns(0, cols);
            let h = basis.tr_mul(&v);
            v -= basis * h;
        }
    }
    let nrm = v.norm();
    (nrm > 1e-10 * start).then(|| v / nrm)
}

/// `M·X`, with M stored sparse (compressed rows) when at most 1/8 of it is non-zero:
/// communication patterns such as stencils are mostly zeros, and the products are then
/// O(nnz·b) instead of O(n²·b). Symmetric M, so row i of M is also column i.
enum Operator<'a> {
    Dense(&'a DMatrix<f64>),
    Sparse {
        ptr: Vec<usize>,
        idx: Vec<usize>,
        val: Vec<f64>,
    },
}

impl<'a> Operator<'a> {
    fn new(m: &'a DMatrix<f64>) -> Self {
        let n = m.nrows();
        let nnz = m.iter().filter(|&&x| x != 0.0).count();
        if nnz * 8 > n * n {
            return Operator::Dense(m);
        }
        let (mut ptr, mut idx, mut val) =
            (vec![0], Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        for i in 0..n {
            for (j, &x) in m.column(i).iter().enumerate() {
                if x != 0.0 {
                    idx.push(j);
                    val.push(x);
                }
            }
            ptr.push(idx.len());
        }
        Operator::Sparse { ptr, idx, val }
    }

    fn apply(&self, x: nalgebra::DMatrixView<f64>) -> DMatrix<f64> {
        match self {
            Operator::Dense(m) => *m * x,
            Operator::Sparse { ptr, idx, val } => {
                let n = ptr.len() - 1;
                let mut out = DMatrix::<f64>::zeros(n, x.ncols());
                for c in 0..x.ncols() {
                    let xc = x.column(c);
                    let mut oc = out.column_mut(c);
                    for i in 0..n {
                        let mut s = 0.0;
                        for p in ptr[i]..ptr[i + 1] {
                            s += val[p] * xc[idx[p]];
                        }
                        oc[i] = s;
                    }
                }
                out
            }
        }
    }
}

fn krylov(m: &DMatrix<f64>, k: usize, seed: u64) -> (Vec<f64>, DMatrix<f64>) {
    let n = m.nrows();
    let op = Operator::new(m);
    let b = (k + 8).min(n);
    let dim = (b * 12).min(n);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_e16e);
    let random = |rng: &mut rand_chacha::ChaCha8Rng| {
        DVector::from_iterator(n, (0..n).map(|_| rng.gen_range(-1.0..1.0)))
    };
    let mut block = DMatrix::from_columns(&(0..b).map(|_| random(&mut rng)).collect::<Vec<_>>());
    let mut best = None;
    for _restart in 0..MAX_PASSES {
        let mut q = DMatrix::<f64>::zeros(n, dim);
        // M·q, filled block by block as the basis grows (each block's product is the next block).
        let mut mq = DMatrix::<f64>::zeros(n, dim);
        let mut cols = 0;
        while cols < dim {
            let first = cols;
            let norms: Vec<f64> = block.column_iter().map(|c| c.norm()).collect();
            // Two block Gram–Schmidt passes against the basis so far (matrix products).
            if cols > 0 {
                for _ in 0..2 {
                    let basis = q.columns(0, cols);
                    let h = basis.tr_mul(&block);
                    block -= basis * h;
                }
            }
            for (j, v) in block.column_iter().enumerate() {
                if cols == dim {
                    break;
                }
                // Then against the block's own accepted columns. A direction already in the
                // space (an exhausted Krylov space) is replaced by a fresh random one so the
                // basis keeps growing and stays orthonormal.
                let mut v = v.into_owned();
                for _ in 0..2 {
                    for c in first..cols {
                        let u = q.column(c);
                        let d = u.dot(&v);
                        v.axpy(-d, &u, 1.0);
                    }
                }
                let mut cand = (v.norm() > 1e-10 * norms[j]).then(|| v.normalize());
                let mut tries = 0;
                while cand.is_none() && tries < 4 {
                    cand = orthonormalise(&q, cols, random(&mut rng));
                    tries += 1;
                }
                if let Some(u) = cand {
                    q.set_column(cols, &u);
                    cols += 1;
                }
            }
            if cols == first {
                break;
            }
            let prod = op.apply(q.columns(first, cols - first));
            mq.columns_mut(first, cols - first).copy_from(&prod);
            block = prod;
        }
        let basis = q.columns(0, cols).into_owned();
        let mb = mq.columns(0, cols).into_owned();
        let t = basis.tr_mul(&mb);
        let t = (&t + t.transpose()) * 0.5;
        let (vals_b, ub) = ritz(t, b.min(cols));
        let kk = k.min(vals_b.len());
        let vals = vals_b[..kk].to_vec();
        let u = ub.columns(0, kk).into_owned();
        let vecs = &basis * &u;
        let resid = &mb * &u - &vecs * DMatrix::from_diagonal(&DVector::from_vec(vals.clone()));
        let worst = resid
            .column_iter()
            .map(|c| c.norm())
            .fold(0.0_f64, f64::max);
        let done = worst <= TOL || cols >= n;
        log::debug!("eigen: Krylov pass {_restart}: dimension {cols}, worst residual {worst:.2e}");
        // Restart from the b best Ritz vectors (the top k plus the next few).
        block = &basis * ub;
        best = Some((vals, vecs));
        if done {
            break;
        }
    }
    best.expect("at least one Krylov pass runs")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A normalised similarity matrix with `groups` planted clusters plus noise.
    fn planted(n: usize, groups: usize, seed: u64) -> DMatrix<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut s = DMatrix::<f64>::zeros(n, n);
        for i in 0..n {
            for j in (i + 1)..n {
                let w = if i % groups == j % groups {
                    rng.gen_range(0.5..1.0)
                } else {
                    rng.gen_range(0.0..0.05)
                };
                s[(i, j)] = w;
                s[(j, i)] = w;
            }
            s[(i, i)] = 1.0;
        }
        let d: Vec<f64> = (0..n).map(|i| s.row(i).sum().sqrt().recip()).collect();
        DMatrix::from_fn(n, n, |i, j| s[(i, j)] * d[i] * d[j])
    }

    #[test]
    fn krylov_agrees_with_dense() {
        // n above the Krylov dimension 12·(k + 8), so restarts are exercised (small: debug builds).
        for (n, k, g) in [(160, 3, 3), (200, 4, 4), (170, 2, 5)] {
            let m = planted(n, g, n as u64);
            let (dv, dvec) = dense(&m, k + 1);
            let dvec = dvec.columns(0, k).into_owned();
            let (kv, kvec) = krylov(&m, k, 1);
            for i in 0..k {
                assert!(
                    (dv[i] - kv[i]).abs() < 1e-7,
                    "n={n} eigenvalue {i}: {} vs {}",
                    dv[i],
                    kv[i]
                );
            }
            // Same invariant subspace: every singular value of Dᵀ K is 1.
            let overlap = dvec.transpose() * &kvec;
            let sv = overlap.singular_values();
            if dv[k - 1] - dv.get(k).copied().unwrap_or(-1.0) > 1e-6 {
                for s in sv.iter() {
                    assert!((s - 1.0).abs() < 1e-6, "n={n}: subspace overlap {s}");
                }
            }
        }
    }

    /// A sparse pattern (a ring of neighbours) takes the compressed-row path; same answer.
    #[test]
    fn sparse_operator_agrees_with_dense() {
        let n = 160;
        let mut s = DMatrix::<f64>::identity(n, n);
        for i in 0..n {
            for d in 1..=3 {
                let j = (i + d * 7) % n;
                s[(i, j)] += 1.0 / d as f64;
                s[(j, i)] += 1.0 / d as f64;
            }
        }
        let dinv: Vec<f64> = (0..n).map(|i| s.row(i).sum().sqrt().recip()).collect();
        let m = DMatrix::from_fn(n, n, |i, j| s[(i, j)] * dinv[i] * dinv[j]);
        assert!(matches!(Operator::new(&m), Operator::Sparse { .. }));
        let x = DMatrix::from_fn(n, 3, |i, j| ((i * 3 + j) % 7) as f64);
        let full = &m * &x;
        let sparse = Operator::new(&m).apply(x.columns(0, 3));
        assert!((full - sparse).norm() < 1e-12);
        let (dv, _) = dense(&m, 5);
        let (kv, _) = krylov(&m, 5, 2);
        for i in 0..5 {
            assert!((dv[i] - kv[i]).abs() < 1e-7, "{dv:?} vs {kv:?}");
        }
    }

    #[test]
    fn repeated_eigenvalues_are_all_found() {
        // Four disconnected uniform blocks: eigenvalue 1 four times, the rest 0.
        let n = 160;
        let m = DMatrix::from_fn(n, n, |i, j| if i / 40 == j / 40 { 1.0 / 40.0 } else { 0.0 });
        let (vals, vecs) = krylov(&m, 4, 3);
        for v in &vals {
            assert!((v - 1.0).abs() < 1e-8, "{vals:?}");
        }
        let gram = vecs.transpose() * &vecs;
        assert!((gram - DMatrix::identity(4, 4)).norm() < 1e-8);
    }
}
