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

/// Metrics and gains add values up: values whose sum overflows would turn them into inf/NaN,
/// so matrices and load vectors with such values are refused (`what` names the input).
pub(crate) fn check_sum(what: &str, values: &[f64]) -> Result<()> {
    if values.iter().sum::<f64>().is_finite() {
        Ok(())
    } else {
        Err(MapError::input(
            what,
            "values sum to more than a 64-bit float holds; scale them down",
        ))
    }
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
    /// `what` names the source in error messages (e.g. a file path). Cells are named
    /// `A[i][j]` with threads counted from 0, like the plan's `thread` field.
    pub fn from_rows(what: &str, rows: Vec<Vec<f64>>) -> Result<Self> {
        Self::from_rows_at(what, rows, None)
    }

    /// Like [`Self::from_rows`]; `lines[i]` is the 1-based file line that holds row i, so
    /// errors can also say where to look in the file (columns are 1-based thread order).
    pub fn from_rows_at(what: &str, rows: Vec<Vec<f64>>, lines: Option<&[usize]>) -> Result<Self> {
        let n = rows.len();
        if n == 0 {
            return Err(MapError::input(what, "empty matrix (no rows)"));
        }
        let at = |i: usize, j: usize| match lines {
            Some(l) => format!(" (line {}, column {})", l[i], j + 1),
            None => String::new(),
        };
        let mut data = Vec::with_capacity(n * n);
        for (i, row) in rows.iter().enumerate() {
            if row.len() != n {
                let place = match lines {
                    Some(l) => format!("line {}", l[i]),
                    None => format!("row {i}"),
                };
                return Err(MapError::input(
                    what,
                    format!(
                        "matrix is not square: {place} has {} values, expected {n} (one per row; there are {n} rows)",
                        row.len()
                    ),
                ));
            }
            for (j, &v) in row.iter().enumerate() {
                if !v.is_finite() || v < 0.0 {
                    return Err(MapError::input(
                        what,
                        format!(
                            "A[{i}][{j}]{} is {v}: values must be finite and >= 0",
                            at(i, j)
                        ),
                    ));
                }
            }
            data.extend_from_slice(row);
        }
        check_sum(what, &data)?;
        let m = CommMatrix { n, data };
        for i in 0..n {
            for j in (i + 1)..n {
                let (a, b) = (m.get(i, j), m.get(j, i));
                let tol = 1e-9 * a.abs().max(b.abs()).max(1.0);
                if (a - b).abs() > tol {
                    return Err(MapError::input(
                        what,
                        format!(
                            "matrix is not symmetric: A[{i}][{j}]{} = {a} but A[{j}][{i}]{} = {b}",
                            at(i, j),
                            at(j, i)
                        ),
                    ));
                }
            }
        }
        Ok(m)
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

    /// The matrix between `members` only (row k = member k).
    pub fn submatrix_of(&self, members: &[usize]) -> CommMatrix {
        let k = members.len();
        let mut data = Vec::with_capacity(k * k);
        for &i in members {
            for &j in members {
                data.push(self.get(i, j));
            }
        }
        CommMatrix { n: k, data }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(rows: Vec<Vec<f64>>, lines: Option<&[usize]>) -> String {
        CommMatrix::from_rows_at("m.csv", rows, lines)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_the_cell() {
        assert_eq!(err(vec![], None), "m.csv: empty matrix (no rows)");
        assert_eq!(
            err(vec![vec![0.0, 1.0], vec![1.0]], None),
            "m.csv: matrix is not square: row 1 has 1 values, expected 2 (one per row; there are 2 rows)"
        );
        assert_eq!(
            err(vec![vec![0.0, 1.0], vec![2.0, 0.0]], Some(&[3, 4])),
            "m.csv: matrix is not symmetric: A[0][1] (line 3, column 2) = 1 but A[1][0] (line 4, column 1) = 2"
        );
        assert_eq!(
            err(vec![vec![0.0, -1.0], vec![-1.0, 0.0]], None),
            "m.csv: A[0][1] is -1: values must be finite and >= 0"
        );
        assert!(err(vec![vec![f64::NAN]], None).contains("A[0][0] is NaN"));
    }

    #[test]
    fn accepts_symmetric_and_keeps_values() {
        let m = CommMatrix::from_rows("m", vec![vec![0.0, 3.0], vec![3.0, 5.0]]).unwrap();
        assert_eq!((m.n(), m.get(0, 1), m.get(1, 1)), (2, 3.0, 5.0));
        assert_eq!(m.row(1), &[3.0, 5.0]);
    }
}
