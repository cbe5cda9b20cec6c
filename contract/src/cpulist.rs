//! The Linux CPU list format (`0-3,8,10-11`), as in `Cpus_allowed_list`, `taskset -c`,
//! cgroup `cpuset.cpus`, Slurm's `S_STEP_ALLOC_CORES` and `--cpu-bind=map_cpu`.

use std::fmt;

/// Why a CPU list did not parse; the text names the offending item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuListError(pub String);

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CpuListError {}

/// The most CPUs a list may name, counting repeats (a range is refused before it is allocated).
const MAX_ITEMS: usize = 1 << 20;

/// Parse a CPU list such as `"0-3,8,10-11"` into sorted, de-duplicated CPU numbers.
/// Whitespace around items is ignored; an empty list, a reversed range (`5-3`) or anything
/// that is not a non-negative integer is an error naming the offending item.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, CpuListError> {
    let err = |msg: String| CpuListError(msg);
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Err(err("empty CPU list (expected e.g. 0-3,8)".into()));
    }
    for (k, item) in text.split(',').enumerate() {
        let item = item.trim();
        if item.is_empty() {
            return Err(err(format!("item {} is empty", k + 1)));
        }
        let num = |s: &str| -> Result<u32, CpuListError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err(format!(
                    "'{item}' is not a CPU number or range (e.g. 4 or 0-3)"
                )));
            }
            s.parse::<u32>()
                .map_err(|_| err(format!("'{s}' is too large for a CPU number")))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(err(format!("range '{item}' is reversed")));
                }
                // Refuse absurd ranges before allocating for them.
                if b - a >= 1 << 20 {
                    return Err(err(format!("range '{item}' is too large")));
                }
                // Ranges that overlap add up before the de-duplication: bound their sum too.
                if out.len() + (b - a) as usize >= MAX_ITEMS {
                    return Err(err(format!(
                        "the list names more than {MAX_ITEMS} CPUs at '{item}'"
                    )));
                }
                out.extend(a..=b);
            }
            None if out.len() >= MAX_ITEMS => {
                return Err(err(format!(
                    "the list names more than {MAX_ITEMS} CPUs at '{item}'"
                )))
            }
            None => out.push(num(item)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Format CPU numbers (any order, duplicates allowed) in the list format, runs as ranges.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_singles() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list(" 5 , 1-2 ,2").unwrap(), vec![1, 2, 5]);
        assert_eq!(parse_cpu_list("7-7").unwrap(), vec![7]);
    }

    #[test]
    fn rejects_bad_lists_with_the_item() {
        let e = |s: &str| parse_cpu_list(s).unwrap_err().to_string();
        assert!(e("").contains("empty CPU list"));
        assert!(e("0-3,,5").contains("item 2 is empty"));
        assert!(e("0-3,x").contains("'x' is not a CPU number"));
        assert!(e("5-3").contains("range '5-3' is reversed"));
        assert!(e("-1").contains("'-1' is not a CPU number"));
        assert!(e("1-2-3").contains("'1-2-3' is not a CPU number"));
        assert!(e("99999999999").contains("too large"));
        assert!(e("0-4000000000").contains("too large"));
    }

    #[test]
    fn overlapping_ranges_are_bounded_before_they_are_allocated() {
        // Found after the same bug in the Slurm layout: each range was bounded, their sum not,
        // so repeated ranges (S_STEP_ALLOC_CORES, `cmlb topology --cpuset`) took gigabytes.
        let text = ["0-1048575"; 2].join(",");
        assert_eq!(
            parse_cpu_list(&text).unwrap_err().0,
            "the list names more than 1048576 CPUs at '0-1048575'"
        );
        assert_eq!(parse_cpu_list("0-1048575").unwrap().len(), 1 << 20);
        assert!(parse_cpu_list("0-1048575,7").is_err());
        assert_eq!(parse_cpu_list("0-3,2-5,5").unwrap(), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn formats_runs_as_ranges() {
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[4]), "4");
        assert_eq!(format_cpu_list(&[]), "");
        let v = parse_cpu_list("0-3,8,10-11").unwrap();
        assert_eq!(parse_cpu_list(&format_cpu_list(&v)).unwrap(), v);
    }
}
