//! The Linux CPU list format, from the contract crate (one encoding for every process), with
//! errors as the mapper's typed [`MapError`] naming the list.

use crate::error::{MapError, Result};

pub use contract::format_cpu_list;

/// Parse a CPU list such as `"0-3,8,10-11"` (see [`contract::parse_cpu_list`]); the error
/// names the list and the offending item.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>> {
    contract::parse_cpu_list(text)
        .map_err(|e| MapError::input(format!("cpuset '{}'", text.trim()), e.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_list() {
        let e = parse_cpu_list(" 0-3,x ").unwrap_err().to_string();
        assert_eq!(
            e,
            "cpuset '0-3,x': 'x' is not a CPU number or range (e.g. 4 or 0-3)"
        );
    }
}
