//! The thread-to-thread communication matrix `A[n][n]` (thesis Algorithm 3-1 output).

use crate::error::{MapError, Result};
use serde::{Deserialize, Serialize};

/// A dense, square, symmetric, non-negative matrix stored row-major.
/// Row/column i is thread i in creation order inside its process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommMatrix {
    n: usize,
    data: Vec<f64>,
}

impl CommMatrix {
    /// An all-zero n×n matrix.
    pub fn zeros(n: usize) -> Self {
        CommMatrix {
            n,
            data: vec![0.0; n * n],
        }
    }

    /// Build from rows, checking shape, finiteness, sign and symmetry.
    /// `what` names the source in error messages (e.g. a file path).
    pub fn from_rows(what: &str, rows: Vec<Vec<f64>>) -> Result<Self> {
        let n = rows.len();
        if n == 0 {
            return Err(MapError::input(what, "empty matrix"));
        }
        let mut data = Vec::with_capacity(n * n);
        for (i, row) in rows.iter().enumerate() {
            if row.len() != n {
                return Err(MapError::input(
                    what,
                    format!(
                        "matrix is not square: row {} has {} values, expected {n}",
                        i + 1,
                        row.len()
                    ),
                ));
            }
            for (j, &v) in row.iter().enumerate() {
                if !v.is_finite() || v < 0.0 {
                    return Err(MapError::input(
                        what,
                        format!(
                            "cell ({}, {}) is {v}: values must be finite and >= 0",
                            i + 1,
                            j + 1
                        ),
                    ));
                }
            }
            data.extend_from_slice(row);
        }
        let m = CommMatrix { n, data };
        m.check_symmetric(what)?;
        Ok(m)
    }

    fn check_symmetric(&self, what: &str) -> Result<()> {
        for i in 0..self.n {
            for j in (i + 1)..self.n {
                let (a, b) = (self.get(i, j), self.get(j, i));
                let tol = 1e-9 * a.abs().max(b.abs()).max(1.0);
                if (a - b).abs() > tol {
                    return Err(MapError::input(
                        what,
                        format!(
                            "matrix is not symmetric: cell ({}, {}) = {a} but cell ({}, {}) = {b}",
                            i + 1,
                            j + 1,
                            j + 1,
                            i + 1
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Number of threads.
    pub fn n(&self) -> usize {
        self.n
    }

    #[inline]
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    /// Add `v` to both (i, j) and (j, i); keeps the matrix symmetric.
    #[inline]
    pub fn add_sym(&mut self, i: usize, j: usize, v: f64) {
        self.data[i * self.n + j] += v;
        if i != j {
            self.data[j * self.n + i] += v;
        }
    }

    /// Row i as a slice.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    /// Rows as owned vectors (for writers).
    pub fn rows(&self) -> impl Iterator<Item = &[f64]> {
        self.data.chunks(self.n.max(1))
    }
}
