//! The thread-to-thread communication matrix `A[n][n]` (thesis Algorithm 3-1 output).

use crate::error::{MapError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A dense, square, symmetric, non-negative matrix stored row-major.
/// Row/column i is thread i in creation order inside its process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommMatrix {
    n: usize,
    data: Vec<f64>,
}

/// Metrics and gains add values up: values whose sum overflows would turn them into inf/NaN,
/// so matrices and load vectors with such values are refused (`what` names the input).
pub fn check_sum(what: &str, values: &[f64]) -> Result<()> {
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

// The matrix and load-vector files (`comm.csv`, `load.csv`, EagerMap's matrices): what
// `cmlb map` reads without a profile, and what a profile directory holds.

/// Parse a comma-separated numeric table. Accepts a trailing comma (EagerMap's files),
/// blank lines and `#` comments. Errors name the file, line and column.
pub fn parse_numeric_csv(what: &str, text: &str) -> Result<Vec<Vec<f64>>> {
    Ok(parse_numeric_lines(what, text)?
        .into_iter()
        .map(|(_, r)| r)
        .collect())
}

/// [`parse_numeric_csv`], keeping each row's 1-based line number.
pub fn parse_numeric_lines(what: &str, text: &str) -> Result<Vec<(usize, Vec<f64>)>> {
    let mut rows = Vec::new();
    // Spreadsheets save CSV with a UTF-8 byte-order mark, invisible in any error message.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_suffix(',').unwrap_or(line);
        let mut row = Vec::new();
        for (col, cell) in line.split(',').enumerate() {
            let cell = cell.trim();
            let v: f64 = cell.parse().map_err(|_| {
                MapError::input(
                    what,
                    format!(
                        "line {}, column {}: '{cell}' is not a number",
                        ln + 1,
                        col + 1
                    ),
                )
            })?;
            if !v.is_finite() || v < 0.0 {
                return Err(MapError::input(
                    what,
                    format!(
                        "line {}, column {}: {v} is not allowed (values must be finite and >= 0)",
                        ln + 1,
                        col + 1
                    ),
                ));
            }
            row.push(v);
        }
        rows.push((ln + 1, row));
    }
    Ok(rows)
}

/// Read a communication matrix CSV. `eagermap_order`: rows are in reverse task order
/// (EagerMap's format: the first task is on the last line), columns in task order.
pub fn read_comm_csv(path: &Path, eagermap_order: bool) -> Result<CommMatrix> {
    let text = std::fs::read_to_string(path).map_err(|e| MapError::io(path, e))?;
    let what = path.display().to_string();
    let mut rows = parse_numeric_lines(&what, &text)?;
    if eagermap_order {
        rows.reverse();
    }
    let (lines, rows): (Vec<usize>, Vec<Vec<f64>>) = rows.into_iter().unzip();
    CommMatrix::from_rows_at(&what, rows, Some(&lines))
}

/// Write a communication matrix CSV (plain order, or EagerMap's reversed rows).
pub fn write_comm_csv(path: &Path, m: &CommMatrix, eagermap_order: bool) -> Result<()> {
    let mut lines: Vec<String> = m
        .rows()
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    if eagermap_order {
        lines.reverse();
    }
    let mut s = lines.join("\n");
    s.push('\n');
    std::fs::write(path, s.as_bytes()).map_err(|e| MapError::io(path, e))
}

/// Read a load vector: one value per line, or one comma-separated line.
pub fn read_load_csv(path: &Path) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| MapError::io(path, e))?;
    let rows = parse_numeric_csv(&path.display().to_string(), &text)?;
    let v: Vec<f64> = rows.into_iter().flatten().collect();
    if v.is_empty() {
        return Err(MapError::input(
            path.display().to_string(),
            "empty load vector",
        ));
    }
    check_sum(&format!("{}: load vector", path.display()), &v)?;
    Ok(v)
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
