//! A job's rank-to-rank communication as a sparse symmetric graph.
//!
//! Rank matrices of whole jobs are large and sparse (a 3-D stencil has 26 neighbours per rank
//! whatever the rank count), so they are read as an edge list and kept in compressed rows:
//! memory grows with the edges, not with n².
//!
//! Edge-list format (`ranks/comm.edges`): one `SRC DST BYTES [MESSAGES]` per line, ranks from
//! 0, separated by spaces, tabs or commas; `#` starts a comment; a first line whose first field
//! is not a number is a header. Both directions may be listed (they are added up) or just one.

use crate::error::{MapError, Result};
use crate::matrix::CommMatrix;
use std::path::Path;

/// Largest rank count accepted (a typo must not allocate for billions of ranks).
pub const MAX_RANKS: usize = 1 << 24;

/// Symmetric rank graph in compressed-row form; `bytes[e]`/`messages[e]` weigh edge `e` of
/// row `r` (`start[r]..start[r + 1]`), which goes to `to[e]`. No self-edges.
#[derive(Debug, Clone, PartialEq)]
pub struct RankGraph {
    start: Vec<usize>,
    to: Vec<u32>,
    bytes: Vec<f64>,
    messages: Vec<f64>,
}

impl RankGraph {
    /// Build from directed edges `(src, dst, bytes, messages)` among `n` ranks: both
    /// directions are summed into one undirected weight, self-edges are dropped.
    pub fn from_edges(n: usize, edges: &[(usize, usize, f64, f64)]) -> Result<RankGraph> {
        if n == 0 || n > MAX_RANKS {
            return Err(MapError::input(
                "rank graph",
                format!("{n} ranks: expected 1..={MAX_RANKS}"),
            ));
        }
        let mut pairs: Vec<(u32, u32, f64, f64)> = Vec::with_capacity(2 * edges.len());
        for &(a, b, w, m) in edges {
            if a >= n || b >= n {
                return Err(MapError::input(
                    "rank graph",
                    format!("edge {a}-{b} names a rank beyond {}", n - 1),
                ));
            }
            if a != b && (w > 0.0 || m > 0.0) {
                pairs.push((a as u32, b as u32, w, m));
                pairs.push((b as u32, a as u32, w, m));
            }
        }
        pairs.sort_unstable_by_key(|p| (p.0, p.1));
        let mut g = RankGraph {
            start: vec![0; n + 1],
            to: Vec::new(),
            bytes: Vec::new(),
            messages: Vec::new(),
        };
        let mut prev = None;
        for (a, b, w, m) in pairs {
            if prev == Some((a, b)) {
                *g.bytes.last_mut().expect("pushed before") += w;
                *g.messages.last_mut().expect("pushed before") += m;
                continue;
            }
            prev = Some((a, b));
            g.to.push(b);
            g.bytes.push(w);
            g.messages.push(m);
            g.start[a as usize + 1] += 1;
        }
        for r in 0..n {
            g.start[r + 1] += g.start[r];
        }
        crate::matrix::check_sum("rank graph", &g.bytes)?;
        Ok(g)
    }

    /// The graph of a dense matrix (bytes; one message per non-zero cell).
    pub fn from_dense(m: &CommMatrix) -> RankGraph {
        let n = m.n();
        let mut edges = Vec::new();
        for i in 0..n {
            for j in (i + 1)..n {
                let v = m.get(i, j);
                if v > 0.0 {
                    edges.push((i, j, v, 1.0));
                }
            }
        }
        RankGraph::from_edges(n, &edges).expect("a checked matrix is a valid graph")
    }

    /// Number of ranks.
    pub fn n(&self) -> usize {
        self.start.len() - 1
    }

    /// The compressed rows: row starts, neighbours, bytes (each edge in both rows).
    pub(crate) fn csr(&self) -> (&[usize], &[u32], &[f64]) {
        (&self.start, &self.to, &self.bytes)
    }

    /// Number of undirected edges.
    pub fn edges(&self) -> usize {
        self.to.len() / 2
    }

    /// Neighbours of `r` with their bytes and messages.
    pub fn neighbours(&self, r: usize) -> impl Iterator<Item = (usize, f64, f64)> + '_ {
        let (a, b) = (self.start[r], self.start[r + 1]);
        (a..b).map(move |e| (self.to[e] as usize, self.bytes[e], self.messages[e]))
    }

    /// Bytes between ranks in different groups of `group` (each pair once).
    pub fn cut(&self, group: &[usize]) -> f64 {
        let mut c = 0.0;
        for r in 0..self.n() {
            for (s, w, _) in self.neighbours(r) {
                if s > r && group[r] != group[s] {
                    c += w;
                }
            }
        }
        c
    }

    /// Total bytes of every edge (each pair once).
    pub fn total(&self) -> f64 {
        self.bytes.iter().sum::<f64>() / 2.0
    }

    /// The dense matrix of the ranks `members` (in that order): what a node's inner mapping
    /// works on.
    pub fn submatrix(&self, members: &[usize]) -> CommMatrix {
        let mut pos = std::collections::HashMap::with_capacity(members.len());
        for (k, &r) in members.iter().enumerate() {
            pos.insert(r, k);
        }
        let mut m = CommMatrix::zeros(members.len());
        for (k, &r) in members.iter().enumerate() {
            for (s, w, _) in self.neighbours(r) {
                if let Some(&l) = pos.get(&s) {
                    if l > k {
                        m.add_sym(k, l, w);
                    }
                }
            }
        }
        m
    }
}

/// Read an edge list (see the module doc); the rank count is one more than the largest rank
/// named, or `n` when given. Errors name the file and line.
pub fn read_edges(path: &Path, n: Option<usize>) -> Result<RankGraph> {
    let text = std::fs::read_to_string(path).map_err(|e| MapError::io(path, e))?;
    parse_edges(&path.display().to_string(), &text, n)
}

/// [`read_edges`] on text; `what` names the source in errors.
pub fn parse_edges(what: &str, text: &str, n: Option<usize>) -> Result<RankGraph> {
    let mut edges = Vec::new();
    let mut max = 0usize;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        let bad = |msg: String| MapError::input(format!("{what}:{}", i + 1), msg);
        // A line of separators alone has no first field: it is refused below, not a header.
        if edges.is_empty() && f.first().is_some_and(|x| x.parse::<f64>().is_err()) {
            continue; // header
        }
        if f.len() < 3 || f.len() > 4 {
            return Err(bad(format!(
                "expected SRC DST BYTES [MESSAGES], found {} fields",
                f.len()
            )));
        }
        let rank = |s: &str| -> Result<usize> {
            s.parse::<usize>()
                .ok()
                .filter(|&r| r < MAX_RANKS)
                .ok_or_else(|| bad(format!("'{s}' is not a rank number (0..{MAX_RANKS})")))
        };
        let num = |s: &str| -> Result<f64> {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(format!("'{s}' is not a finite number >= 0")))
        };
        let (a, b) = (rank(f[0])?, rank(f[1])?);
        let w = num(f[2])?;
        let m = f.get(3).map(|s| num(s)).transpose()?.unwrap_or(0.0);
        max = max.max(a).max(b);
        edges.push((a, b, w, m));
    }
    if edges.is_empty() && n.is_none() {
        return Err(MapError::input(what, "no edges"));
    }
    let n = match n {
        Some(n) if n <= max && !edges.is_empty() => {
            return Err(MapError::input(
                what,
                format!("names rank {max} but the job has {n} ranks"),
            ))
        }
        Some(n) => n,
        None => max + 1,
    };
    RankGraph::from_edges(n, &edges).map_err(|e| MapError::input(what, e.to_string()))
}

/// Write `g` as an edge list (each pair once, `src dst bytes messages`), atomically.
pub fn write_edges(g: &RankGraph, path: &Path) -> Result<()> {
    let mut s = String::from("# src dst bytes messages\n");
    for r in 0..g.n() {
        for (t, w, m) in g.neighbours(r) {
            if t > r {
                s.push_str(&format!("{r} {t} {w} {m}\n"));
            }
        }
    }
    crate::output::write_atomic(path, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_add_up_and_rows_are_sorted() {
        let g = parse_edges("t", "src,dst,bytes\n0 2 5\n2 0 3 1\n1,2,4\n# c\n", None).unwrap();
        assert_eq!((g.n(), g.edges()), (3, 2));
        let n0: Vec<_> = g.neighbours(0).collect();
        assert_eq!(n0, vec![(2, 8.0, 1.0)]);
        let n2: Vec<_> = g.neighbours(2).collect();
        assert_eq!(n2, vec![(0, 8.0, 1.0), (1, 4.0, 0.0)]);
        assert_eq!(g.total(), 12.0);
        assert_eq!(g.cut(&[0, 0, 1]), 12.0);
        assert_eq!(g.cut(&[0, 1, 0]), 4.0);
        let m = g.submatrix(&[2, 0]);
        assert_eq!(m.get(0, 1), 8.0);
    }

    #[test]
    fn isolated_ranks_keep_empty_rows() {
        let g = parse_edges("t", "3 4 1\n", Some(6)).unwrap();
        assert_eq!(g.n(), 6);
        assert_eq!(g.neighbours(0).count(), 0);
        assert_eq!(g.neighbours(5).count(), 0);
        assert_eq!(g.neighbours(4).collect::<Vec<_>>(), vec![(3, 1.0, 0.0)]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = |t: &str| parse_edges("f.edges", t, None).unwrap_err().to_string();
        assert_eq!(
            e("0 1 2\n0 x 2\n"),
            "f.edges:2: 'x' is not a rank number (0..16777216)"
        );
        assert!(
            e("0 1\n").contains("f.edges:1: expected SRC DST BYTES"),
            "{}",
            e("0 1\n")
        );
        assert!(e("0 1 -2\n").contains("'-2' is not a finite number"));
        assert!(e("").contains("no edges"));
        let e = parse_edges("f", "0 9 1\n", Some(4))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names rank 9 but the job has 4 ranks"), "{e}");
    }

    #[test]
    fn fuzz_regression_a_line_of_separators_is_an_error_naming_the_line() {
        // fuzz/seeds/rank_edges/crash-df1501d2…: "\t," indexed the first of no fields.
        let e = parse_edges("f.edges", "\t,", None).unwrap_err().to_string();
        assert_eq!(
            e,
            "f.edges:1: expected SRC DST BYTES [MESSAGES], found 0 fields"
        );
        let e = parse_edges("f.edges", "0 1 2\n , ,\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "f.edges:2: expected SRC DST BYTES [MESSAGES], found 0 fields"
        );
    }

    #[test]
    fn round_trip_through_the_file() {
        let g = parse_edges("t", "0 1 2 1\n1 2 3 2\n0 3 1.5 1\n", None).unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("g.edges");
        write_edges(&g, &p).unwrap();
        assert_eq!(read_edges(&p, None).unwrap(), g);
        let dense = RankGraph::from_dense(&g.submatrix(&[0, 1, 2, 3]));
        assert_eq!(dense.total(), g.total());
    }
}
