//! Memory load vector, thesis section 3.2.2: timeslice series -> outlier smoothing ->
//! phase split (Algorithm 3-2) -> phase weights (Eq. 3-2) -> `V = Σ w_i p_i` (Eq. 3-3).
//!
//! Everything here is a pure function of per-timeslice counts so each step can be tested on
//! hand-made series. Edge cases the thesis's pseudocode does not handle are decided as follows
//! (each is tested):
//! * Algorithm 3-2 loops `while right <= len(s)` and reads `s[len(s)]`: the loop stops at the
//!   last slice here.
//! * `num = len(s) * 0.05` is 0 for series shorter than 20 slices, and the mean of no values is
//!   undefined: at least one slice is used (the low value is then the minimum).
//! * The pseudocode only closes a phase at a low point, so whatever follows the last low point
//!   is dropped (a run that ends at high load would lose its last phase). The end of the series
//!   acts as a closing low point here: the run stops, so its memory traffic drops to zero.
//!   The tail becomes a phase when it is at least `min_width` slices wide, like any phase.
//! * When no phase of at least `min_width` slices exists (series shorter than the minimum
//!   width, all zeros, ...), the whole series is one phase, so the load vector is never zero
//!   while there are samples.
//! * Phases are `s[left : right+1]`, so consecutive phases share their boundary (low) slice. The
//!   weight of a phase (Eq. 3-2) uses all its slices, as printed; for the per-thread counts `p_i`
//!   and the timeline the shared slice belongs to the earlier phase, so no sample counts twice.
//! * Slices between phases (a stretch shorter than `min_width` between two low points, which
//!   the pseudocode skips by moving `left` to every low point) belong to no phase (-1).

/// Replace the `fraction` of values that differ most from the series mean by linear
/// interpolation between the nearest kept neighbours (thesis, after Rocka: "outliers are
/// usually < 5 %"). `k = floor(len * fraction)` values are replaced; none for series shorter
/// than `1 / fraction`. An outlier with a kept neighbour on one side only takes that
/// neighbour's value. Ties in distance are broken by position (earlier first), so the result
/// is deterministic.
pub fn smooth_outliers(series: &[f64], fraction: f64) -> Vec<f64> {
    let n = series.len();
    let k = ((n as f64) * fraction).floor() as usize;
    if k == 0 || k >= n {
        return series.to_vec();
    }
    let mean = series.iter().sum::<f64>() / n as f64;
    let mut idx: Vec<usize> = (0..n).collect();
    let dev = |i: usize| (series[i] - mean).abs();
    idx.select_nth_unstable_by(k - 1, |&a, &b| dev(b).total_cmp(&dev(a)).then(a.cmp(&b)));
    let mut outlier = vec![false; n];
    for &i in &idx[..k] {
        outlier[i] = true;
    }
    let mut out = series.to_vec();
    let mut prev_kept: Option<usize> = None;
    let mut i = 0;
    while i < n {
        if !outlier[i] {
            prev_kept = Some(i);
            i += 1;
            continue;
        }
        // A run of outliers [i, j); interpolate between prev_kept and j.
        let mut j = i;
        while j < n && outlier[j] {
            j += 1;
        }
        let next_kept = (j < n).then_some(j);
        for (m, slot) in out.iter_mut().enumerate().take(j).skip(i) {
            *slot = match (prev_kept, next_kept) {
                (Some(a), Some(b)) => {
                    let t = (m - a) as f64 / (b - a) as f64;
                    series[a] + t * (series[b] - series[a])
                }
                (Some(a), None) => series[a],
                (None, Some(b)) => series[b],
                (None, None) => series[m], // unreachable: k < n keeps one value
            };
        }
        i = j;
    }
    out
}

/// Algorithm 3-2 line 4-5: the mean of the lowest `fraction` of the series (at least one
/// value). 0 for an empty series.
pub fn low_value(series: &[f64], fraction: f64) -> f64 {
    let n = series.len();
    if n == 0 {
        return 0.0;
    }
    let num = (((n as f64) * fraction).floor() as usize).clamp(1, n);
    let mut v = series.to_vec();
    v.select_nth_unstable_by(num - 1, |a, b| a.total_cmp(b));
    v[..num].iter().sum::<f64>() / num as f64
}

/// How a phase list came about, for the profile's params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseSplit {
    /// Only low points closed phases.
    LowPoints,
    /// The end of the series closed the last phase.
    WithTail,
    /// No phase of the minimum width: the whole series is one phase.
    Whole,
    /// Empty series: no phases.
    Empty,
}

/// Algorithm 3-2 with the edge cases of the module doc. Returns inclusive slice ranges
/// `(start, end)` in order.
pub fn split_phases(
    series: &[f64],
    low: f64,
    min_width: usize,
) -> (Vec<(usize, usize)>, PhaseSplit) {
    let n = series.len();
    if n == 0 {
        return (Vec::new(), PhaseSplit::Empty);
    }
    let mut phases = Vec::new();
    let mut left = 0usize;
    for (right, &v) in series.iter().enumerate() {
        if v <= low {
            if right - left >= min_width {
                phases.push((left, right));
            }
            left = right;
        }
    }
    let mut how = PhaseSplit::LowPoints;
    if n - 1 - left >= min_width && n - 1 > left {
        phases.push((left, n - 1));
        how = PhaseSplit::WithTail;
    }
    if phases.is_empty() {
        phases.push((0, n - 1));
        how = PhaseSplit::Whole;
    }
    (phases, how)
}

/// Eq. 3-2: the mean number of samples per slice over the phase's slices (inclusive range).
pub fn phase_weight(raw: &[f64], (start, end): (usize, usize)) -> f64 {
    let slice = &raw[start..=end];
    slice.iter().sum::<f64>() / slice.len() as f64
}

/// For each slice, the phase it belongs to (a boundary slice shared by two phases belongs to
/// the earlier one), or -1.
pub fn phase_of_slices(n: usize, phases: &[(usize, usize)]) -> Vec<i64> {
    let mut of = vec![-1i64; n];
    for (p, &(s, e)) in phases.iter().enumerate().rev() {
        for slot in &mut of[s..=e] {
            *slot = p as i64;
        }
    }
    of
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn smoothing_replaces_the_most_extreme_five_percent_by_interpolation() {
        // 20 values -> 1 outlier: the spike at index 10 becomes the mean of its neighbours.
        let mut s: Vec<f64> = (0..20).map(|i| 10.0 + i as f64).collect();
        s[10] = 1000.0;
        let out = smooth_outliers(&s, 0.05);
        assert!(close(out[10], (19.0 + 21.0) / 2.0), "{}", out[10]);
        for i in (0..20).filter(|&i| i != 10) {
            assert_eq!(out[i], s[i]);
        }
    }

    #[test]
    fn smoothing_interpolates_runs_of_outliers_linearly() {
        // 40 values -> 2 outliers, adjacent: linear between 10 (idx 4) and 40 (idx 7).
        let mut s = vec![10.0; 40];
        s[7] = 40.0;
        for v in s.iter_mut().skip(8) {
            *v = 40.0;
        }
        s[5] = -500.0; // would-be counts can't be negative, but the maths must still hold
        s[6] = -400.0;
        let out = smooth_outliers(&s, 0.05);
        assert!(close(out[5], 20.0), "{}", out[5]);
        assert!(close(out[6], 30.0), "{}", out[6]);
    }

    #[test]
    fn smoothing_at_the_edges_copies_the_only_neighbour() {
        let mut s = vec![5.0; 20];
        s[0] = 900.0;
        assert_eq!(smooth_outliers(&s, 0.05)[0], 5.0);
        let mut s = vec![5.0; 20];
        s[19] = 900.0;
        assert_eq!(smooth_outliers(&s, 0.05)[19], 5.0);
    }

    #[test]
    fn smoothing_short_series_is_identity() {
        let s = vec![1.0, 100.0, 3.0];
        assert_eq!(smooth_outliers(&s, 0.05), s);
        assert!(smooth_outliers(&[], 0.05).is_empty());
    }

    #[test]
    fn smoothing_constant_series_is_identity() {
        let s = vec![7.0; 100];
        assert_eq!(smooth_outliers(&s, 0.05), s);
    }

    #[test]
    fn low_value_is_the_mean_of_the_lowest_five_percent() {
        // 40 values: the lowest 2 are 1 and 3.
        let mut s = vec![50.0; 40];
        s[13] = 3.0;
        s[30] = 1.0;
        s[2] = 4.0;
        assert!(close(low_value(&s, 0.05), 2.0));
    }

    #[test]
    fn low_value_of_short_series_is_its_minimum() {
        assert_eq!(low_value(&[9.0, 4.0, 6.0], 0.05), 4.0);
        assert_eq!(low_value(&[], 0.05), 0.0);
    }

    /// A series of `high` with low points at the given indices.
    fn series_with_lows(n: usize, lows: &[usize]) -> Vec<f64> {
        let mut s = vec![100.0; n];
        for &i in lows {
            s[i] = 0.0;
        }
        s
    }

    #[test]
    fn phases_close_at_low_points_at_least_min_width_apart() {
        let s = series_with_lows(400, &[0, 150, 399]);
        let (p, how) = split_phases(&s, 0.0, 100);
        assert_eq!(p, vec![(0, 150), (150, 399)]);
        assert_eq!(how, PhaseSplit::LowPoints);
    }

    #[test]
    fn low_points_closer_than_min_width_move_the_left_pointer_as_printed() {
        // Lows at 0, 50, 120, 260: 50-0 and 120-50 are too narrow, each moves `left`;
        // 260-120 = 140 closes (120, 260). Slices 0..120 belong to no phase; the tail
        // 260..299 is 39 wide, too narrow for a phase.
        let s = series_with_lows(300, &[0, 50, 120, 260]);
        let (p, how) = split_phases(&s, 0.0, 100);
        assert_eq!(p, vec![(120, 260)]);
        assert_eq!(how, PhaseSplit::LowPoints);
        let of = phase_of_slices(300, &p);
        assert_eq!(of[119], -1);
        assert_eq!(of[120], 0);
        assert_eq!(of[260], 0);
        assert_eq!(of[261], -1);
    }

    #[test]
    fn the_end_of_the_run_closes_a_wide_tail() {
        // Starts low, then high to the end: the pseudocode records nothing.
        let s = series_with_lows(250, &[0]);
        let (p, how) = split_phases(&s, 0.0, 100);
        assert_eq!(p, vec![(0, 249)]);
        assert_eq!(how, PhaseSplit::WithTail);
        let s = series_with_lows(400, &[0, 150]);
        let (p, _) = split_phases(&s, 0.0, 100);
        assert_eq!(p, vec![(0, 150), (150, 399)]);
    }

    #[test]
    fn series_shorter_than_min_width_is_one_phase() {
        let s = vec![3.0, 5.0, 1.0, 8.0];
        let low = low_value(&s, 0.05);
        let (p, how) = split_phases(&s, low, 100);
        assert_eq!(p, vec![(0, 3)]);
        assert_eq!(how, PhaseSplit::Whole);
    }

    #[test]
    fn all_zero_series_is_one_phase_of_weight_zero() {
        let s = vec![0.0; 500];
        let (p, how) = split_phases(&s, low_value(&s, 0.05), 100);
        assert_eq!(p, vec![(0, 499)]);
        assert_eq!(how, PhaseSplit::Whole);
        assert_eq!(phase_weight(&s, p[0]), 0.0);
    }

    #[test]
    fn series_without_a_low_point_after_the_start_is_one_tail_phase() {
        // Strictly increasing: only slice 0 is <= the low value (lowest 5 % of 200 = 10
        // values 0..9, mean 4.5: slices 0..=4 are low points, then never again).
        let s: Vec<f64> = (0..200).map(|i| i as f64).collect();
        let low = low_value(&s, 0.05);
        assert!(close(low, 4.5));
        let (p, how) = split_phases(&s, low, 100);
        assert_eq!(p, vec![(4, 199)]);
        assert_eq!(how, PhaseSplit::WithTail);
    }

    #[test]
    fn empty_series_has_no_phases() {
        let (p, how) = split_phases(&[], 0.0, 100);
        assert!(p.is_empty());
        assert_eq!(how, PhaseSplit::Empty);
    }

    #[test]
    fn weight_is_the_mean_samples_per_slice_including_both_ends() {
        let raw = vec![0.0, 10.0, 20.0, 30.0, 0.0, 99.0];
        assert!(close(phase_weight(&raw, (0, 4)), 12.0));
        assert!(close(phase_weight(&raw, (5, 5)), 99.0));
    }

    #[test]
    fn shared_boundary_slice_belongs_to_the_earlier_phase() {
        let of = phase_of_slices(6, &[(0, 3), (3, 5)]);
        assert_eq!(of, vec![0, 0, 0, 0, 1, 1]);
    }
}
