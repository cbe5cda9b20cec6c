//! Trace import: samples recorded elsewhere (e.g. `perf mem record` on a node with PEBS, IBS
//! or SPE) into the sample stream of the analysis.
//!
//! **perf script** text, as printed by
//! `perf script -F comm,pid,tid,time,event,addr,data_src --show-task-events` (any subset that
//! keeps `tid`, `time` and `addr`; `--ns` is fine). A sample line looks like
//! ```text
//!          python3  9278/9281  13701.703410: cpu/mem-loads,ldlat=30/P:     7f034f943110   68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A
//! ```
//! i.e. `[comm] [pid/]tid [[cpu]] SECONDS.FRACTION: EVENT: ADDR [DATA_SRC |decoded...|] ...`.
//! Load/store comes from the data source's `OP` (the hex value when present, else the
//! `|OP LOAD|` text), else from the event name (`...load...` / `...store...`). DRAM or not
//! comes from the hex data source (classified like live samples, see [`crate::hw::datasrc`]),
//! else from the decoded text (`RAM`/`PMEM` hit: DRAM; L1/L2/L3/LFB/cache hit: not DRAM;
//! otherwise unknown).
//!
//! **CSV**: `tid,time_ns,addr,kind[,dram]`, an optional header line starting with `tid`,
//! `#` comments; `addr` decimal or `0x` hex; `kind` `load`/`store`/`unknown`; `dram`
//! `true`/`false`/`1`/`0` or empty for unknown.
//!
//! **Thread creation order**: from `PERF_RECORD_FORK` lines when the perf script output has
//! them (`--show-task-events`): a parent is numbered before the threads it creates, threads in
//! the order their fork records appear. Otherwise (and always for CSV) threads are numbered in
//! order of their first sample. Names come from `PERF_RECORD_COMM` lines or the comm column.
//!
//! Errors name the file and line. Samples are returned sorted by time (stable), as the
//! analysis expects.

use crate::analysis::ThreadSpec;
use crate::error::{ProfileError, Result};
use crate::hw::datasrc::DataSrc;
use crate::sample::{AccessKind, Sample};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

/// How the thread order of an import was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadOrder {
    /// From fork records in the trace.
    ForkRecords,
    /// Order of each thread's first sample.
    FirstAppearance,
}

/// An imported trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Samples in time order.
    pub samples: Vec<Sample>,
    /// Threads in creation order (see [`ThreadOrder`]).
    pub threads: Vec<ThreadSpec>,
    pub thread_order: ThreadOrder,
    /// Sample lines without a data address (or address 0), which the analysis cannot use.
    pub skipped_no_addr: u64,
    /// Non-sample lines that were skipped (MMAP, EXIT, ... records; headers).
    pub skipped_other: u64,
}

/// Thread bookkeeping shared by the parsers.
#[derive(Default)]
struct Threads {
    order: Vec<ThreadSpec>,
    index: HashMap<i32, usize>,
    saw_fork: bool,
}

impl Threads {
    fn see(&mut self, tid: i32, name: Option<&str>) {
        match self.index.get(&tid) {
            Some(&i) => {
                if self.order[i].name.is_empty() {
                    if let Some(n) = name {
                        self.order[i].name = n.to_string();
                    }
                }
            }
            None => {
                self.index.insert(tid, self.order.len());
                self.order
                    .push(ThreadSpec::new(tid, name.unwrap_or_default().to_string()));
            }
        }
    }
    fn rename(&mut self, tid: i32, name: &str) {
        match self.index.get(&tid) {
            Some(&i) => self.order[i].name = name.to_string(),
            None => self.see(tid, Some(name)),
        }
    }
}

fn read_lines(path: &Path) -> Result<impl Iterator<Item = (usize, std::io::Result<String>)>> {
    let f = std::fs::File::open(path).map_err(|e| ProfileError::io(path, e))?;
    Ok(std::io::BufReader::new(f)
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l)))
}

fn finish(
    path: &Path,
    mut samples: Vec<Sample>,
    threads: Threads,
    skipped_no_addr: u64,
    skipped_other: u64,
) -> Result<Trace> {
    if samples.is_empty() {
        return Err(ProfileError::ImportFile {
            path: path.to_path_buf(),
            msg: if skipped_no_addr > 0 {
                format!(
                    "no usable samples: {skipped_no_addr} sample lines have no data address \
                     (record with `perf mem record` or `perf record -d`, print with `-F ...,addr`)"
                )
            } else {
                "no samples found".to_string()
            },
        });
    }
    samples.sort_by_key(|s| s.time_ns);
    Ok(Trace {
        samples,
        thread_order: if threads.saw_fork {
            ThreadOrder::ForkRecords
        } else {
            ThreadOrder::FirstAppearance
        },
        threads: threads.order,
        skipped_no_addr,
        skipped_other,
    })
}

/// Parse `SECONDS.FRACTION` (up to 9 decimals) into nanoseconds, exactly.
fn parse_seconds(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    if sec.is_empty() || frac.len() > 9 || !sec.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns: u64 = 0;
    for b in frac.bytes().chain(std::iter::repeat(b'0')).take(9) {
        ns = ns * 10 + u64::from(b - b'0');
    }
    sec.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(ns)
}

fn parse_hex(s: &str) -> Option<u64> {
    let h = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if h.is_empty() || h.len() > 16 {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

/// Load/store and DRAM from perf's decoded data-source text (`|OP LOAD|LVL L3 miss|...`,
/// `LVL Local RAM hit`, `Remote RAM (1 hop) hit`, ...).
fn classify_text(text: &str) -> (AccessKind, Option<bool>) {
    let mut kind = AccessKind::Unknown;
    let mut dram = None;
    for part in text.split('|').map(str::trim) {
        if let Some(op) = part.strip_prefix("OP ") {
            let op = op.to_ascii_uppercase();
            kind = match (op.contains("LOAD"), op.contains("STORE")) {
                (true, false) => AccessKind::Load,
                (false, true) => AccessKind::Store,
                _ => AccessKind::Unknown,
            };
        } else if let Some(lvl) = part.strip_prefix("LVL ") {
            dram = classify_level_text(lvl);
        }
    }
    (kind, dram)
}

/// `Some(true)` for a memory hit, `Some(false)` for a cache/IO hit, `None` otherwise.
fn classify_level_text(lvl: &str) -> Option<bool> {
    let l = lvl.to_ascii_lowercase();
    if !l.contains("hit") {
        return None;
    }
    if l.contains("ram") || l.contains("pmem") || l.contains("cxl") {
        return Some(true);
    }
    let cache_words = [
        "l1", "l2", "l3", "l4", "lfb", "cache", "i/o", "uncached", "io ",
    ];
    if cache_words.iter().any(|w| l.contains(w)) {
        return Some(false);
    }
    None
}

fn kind_from_event(event: &str) -> AccessKind {
    let e = event.to_ascii_lowercase();
    match (e.contains("load"), e.contains("store")) {
        (true, false) => AccessKind::Load,
        (false, true) => AccessKind::Store,
        _ => AccessKind::Unknown,
    }
}

/// `pid/tid` or `tid`.
fn parse_pid_tid(tok: &str) -> Option<(Option<i32>, i32)> {
    match tok.split_once('/') {
        Some((p, t)) => Some((Some(p.parse().ok()?), t.parse().ok()?)),
        None => Some((None, tok.parse().ok()?)),
    }
}

/// `PERF_RECORD_FORK(child_pid:child_tid):(parent_pid:parent_tid)`.
fn parse_fork(s: &str) -> Option<(i32, i32)> {
    let rest = s.split_once("PERF_RECORD_FORK(")?.1;
    let (child, rest) = rest.split_once(')')?;
    let parent = rest.split_once('(')?.1.split_once(')')?.0;
    let tid = |pt: &str| pt.split_once(':').and_then(|(_, t)| t.trim().parse().ok());
    Some((tid(child)?, tid(parent)?))
}

/// `PERF_RECORD_COMM[ exec]: NAME:PID/TID`.
fn parse_comm(s: &str) -> Option<(i32, String)> {
    let rest = s.split_once("PERF_RECORD_COMM")?.1;
    let rest = rest.split_once(": ")?.1.trim();
    let (name, pt) = rest.rsplit_once(':')?;
    let (_, tid) = parse_pid_tid(pt.trim())?;
    Some((tid, name.to_string()))
}

/// Read `perf script` output (see the module doc).
pub fn read_perf_script(path: &Path) -> Result<Trace> {
    let mut threads = Threads::default();
    let mut samples = Vec::new();
    let (mut no_addr, mut other) = (0u64, 0u64);
    for (ln, line) in read_lines(path)? {
        let line = line.map_err(|e| ProfileError::io(path, e))?;
        // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first field.
        let t = line.trim_start_matches('\u{feff}').trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.contains("PERF_RECORD_") {
            if let Some((child, parent)) = parse_fork(t) {
                threads.saw_fork = true;
                threads.see(parent, None);
                threads.see(child, None);
            } else if let Some((tid, name)) = parse_comm(t) {
                threads.rename(tid, &name);
            }
            other += 1;
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        let bad = |msg: String| ProfileError::import(path, ln, msg);
        // The timestamp: the first token of the form DIGITS.DIGITS: (or DIGITS: with --ns off).
        let ti = toks
            .iter()
            .position(|tok| {
                tok.strip_suffix(':')
                    .is_some_and(|s| s.contains('.') && parse_seconds(s).is_some())
            })
            .ok_or_else(|| {
                bad(format!(
                    "no timestamp (SECONDS.FRACTION:) found; is this `perf script` output \
                     with the time field? Line: '{}'",
                    truncate(t)
                ))
            })?;
        let time_ns = parse_seconds(toks[ti].trim_end_matches(':')).expect("checked above");
        // tid: the token before the time, skipping a [cpu] column.
        let mut k = ti;
        if k > 0 && toks[k - 1].starts_with('[') && toks[k - 1].ends_with(']') {
            k -= 1;
        }
        if k == 0 {
            return Err(bad(
                "no thread id before the timestamp (print with -F tid,...)".into(),
            ));
        }
        let (_pid, tid) = parse_pid_tid(toks[k - 1]).ok_or_else(|| {
            bad(format!(
                "'{}' before the timestamp is not a thread id (TID or PID/TID)",
                toks[k - 1]
            ))
        })?;
        let comm = (k >= 2).then(|| toks[..k - 1].join(" "));
        // Event name: the token after the time, ending with ':'.
        let (event, rest) = match toks.get(ti + 1) {
            Some(e) if e.ends_with(':') => (e.trim_end_matches(':'), &toks[ti + 2..]),
            _ => ("", &toks[ti + 1..]),
        };
        threads.see(tid, comm.as_deref());
        let Some(addr_tok) = rest.first() else {
            no_addr += 1;
            continue;
        };
        let addr = parse_hex(addr_tok).ok_or_else(|| {
            bad(format!(
                "'{addr_tok}' after the event is not a hex data address (print with -F ...,addr)"
            ))
        })?;
        if addr == 0 {
            no_addr += 1;
            continue;
        }
        // Optional data_src: a hex value followed by the decoded |...| text.
        let text_start = t.find('|');
        let hex_src = rest
            .get(1)
            .filter(|tok| !tok.starts_with('|'))
            .and_then(|tok| parse_hex(tok))
            .filter(|_| text_start.is_some());
        let (mut kind, dram) = match (hex_src, text_start) {
            (Some(v), _) => {
                let ds = DataSrc(v);
                (ds.kind(), ds.dram())
            }
            (None, Some(i)) => classify_text(&t[i..]),
            (None, None) => (AccessKind::Unknown, None),
        };
        if kind == AccessKind::Unknown {
            kind = kind_from_event(event);
        }
        samples.push(Sample {
            tid,
            time_ns,
            addr,
            kind,
            dram,
        });
    }
    finish(path, samples, threads, no_addr, other)
}

fn truncate(s: &str) -> String {
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Read the simple CSV `tid,time_ns,addr,kind[,dram]` (see the module doc).
pub fn read_csv(path: &Path) -> Result<Trace> {
    let mut threads = Threads::default();
    let mut samples = Vec::new();
    let mut other = 0u64;
    let mut no_addr = 0u64;
    let mut first = true;
    for (ln, line) in read_lines(path)? {
        let line = line.map_err(|e| ProfileError::io(path, e))?;
        // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first field.
        let t = line.trim_start_matches('\u{feff}').trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = t.split(',').map(str::trim).collect();
        if first && cols[0].eq_ignore_ascii_case("tid") {
            first = false;
            other += 1;
            continue;
        }
        first = false;
        let bad = |msg: String| ProfileError::import(path, ln, msg);
        if cols.len() != 4 && cols.len() != 5 {
            return Err(bad(format!(
                "expected 4 or 5 columns (tid,time_ns,addr,kind[,dram]), found {}",
                cols.len()
            )));
        }
        let tid: i32 = cols[0]
            .parse()
            .map_err(|_| bad(format!("column 1 (tid): '{}' is not a thread id", cols[0])))?;
        let time_ns: u64 = cols[1].parse().map_err(|_| {
            bad(format!(
                "column 2 (time_ns): '{}' is not a non-negative integer",
                cols[1]
            ))
        })?;
        let addr = if cols[2].starts_with("0x") || cols[2].starts_with("0X") {
            parse_hex(cols[2])
        } else {
            cols[2].parse().ok()
        }
        .ok_or_else(|| {
            bad(format!(
                "column 3 (addr): '{}' is not an address (decimal or 0x hex)",
                cols[2]
            ))
        })?;
        let kind = match cols[3].to_ascii_lowercase().as_str() {
            "load" | "l" | "r" | "read" => AccessKind::Load,
            "store" | "s" | "w" | "write" => AccessKind::Store,
            "unknown" | "u" | "" => AccessKind::Unknown,
            other => {
                return Err(bad(format!(
                    "column 4 (kind): '{other}' is not load, store or unknown"
                )))
            }
        };
        let dram = match cols.get(4).map(|s| s.to_ascii_lowercase()) {
            None => None,
            Some(s) => match s.as_str() {
                "" | "unknown" | "-" => None,
                "true" | "1" | "yes" | "dram" => Some(true),
                "false" | "0" | "no" | "cache" => Some(false),
                _ => {
                    return Err(bad(format!(
                        "column 5 (dram): '{}' is not true, false or empty",
                        cols[4]
                    )))
                }
            },
        };
        threads.see(tid, None);
        if addr == 0 {
            no_addr += 1;
            continue;
        }
        samples.push(Sample {
            tid,
            time_ns,
            addr,
            kind,
            dram,
        });
    }
    finish(path, samples, threads, no_addr, other)
}

/// Import formats `cmlb profile --import FORMAT FILE` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    PerfScript,
    Csv,
}

impl ImportFormat {
    pub const NAMES: &'static [&'static str] = &["perf-script", "csv"];

    pub fn parse(s: &str) -> Option<ImportFormat> {
        match s {
            "perf-script" => Some(ImportFormat::PerfScript),
            "csv" => Some(ImportFormat::Csv),
            _ => None,
        }
    }
}

/// Read a trace in the given format.
pub fn read_trace(format: ImportFormat, path: &Path) -> Result<Trace> {
    match format {
        ImportFormat::PerfScript => read_perf_script(path),
        ImportFormat::Csv => read_csv(path),
    }
}

/// Import a trace and analyse it into a profile: `meta.backend` is `import:FORMAT`,
/// `meta.command` names the file, and the import's thread order and skipped lines are
/// recorded under `params` (`import.*`). Fills what the trace knows; host/topology stay empty.
pub fn profile_trace(
    format: ImportFormat,
    path: &Path,
    params: &crate::analysis::AnalysisParams,
) -> Result<profile::Profile> {
    let trace = read_trace(format, path)?;
    let mut p = crate::analysis::analyze(&trace.samples, &trace.threads, params)?;
    let name = match format {
        ImportFormat::PerfScript => "perf-script",
        ImportFormat::Csv => "csv",
    };
    p.meta.backend = format!("import:{name}");
    p.meta.command = vec![path.display().to_string()];
    let mut put = |k: &str, v: String| {
        p.meta.params.insert(k.to_string(), v);
    };
    put("import.file", path.display().to_string());
    put(
        "import.thread_order",
        match trace.thread_order {
            ThreadOrder::ForkRecords => "fork records".to_string(),
            ThreadOrder::FirstAppearance => "first appearance".to_string(),
        },
    );
    put("import.skipped_no_addr", trace.skipped_no_addr.to_string());
    put(
        "import.skipped_other_lines",
        trace.skipped_other.to_string(),
    );
    Ok(p)
}

#[cfg(test)]
mod tests;
