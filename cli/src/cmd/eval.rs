//! `cmlb eval`: every strategy and Scotch on known-pattern matrices, EagerMap's matrices and
//! profiles, on synthetic machines of several NUMA sizes (thin layer over the `eval` crate,
//! plots drawn by `report::eval_plots`).

use anyhow::Context;
use clap::Args as ClapArgs;
// `::eval`: the crate, not this module.
use ::eval;
use std::path::PathBuf;

#[derive(ClapArgs)]
#[command(
    after_help = "Writes the Markdown document (--out) and RemoteComm plots (--plots) and \
prints the summary table. tests/eval/run regenerates docs/eval.md with the repository's inputs.

Example:
  cmlb eval --eagermap mapper/tests/data/eagermap-examples --numa 2,4,8 --out docs/eval.md"
)]
pub struct Args {
    /// Thread count of the synthetic known-pattern matrices (pairs, cliques, ring, stencil,
    /// all-to-all, master-worker, cliques with uneven load); 0 leaves them out.
    #[arg(long, default_value_t = 32)]
    pub patterns: usize,
    /// Directory of EagerMap-format matrices (*.csv, rows in reverse task order); repeatable.
    #[arg(long, value_name = "DIR")]
    pub eagermap: Vec<PathBuf>,
    /// Profile directory written by `cmlb profile`; repeatable.
    #[arg(long, value_name = "DIR")]
    pub profile: Vec<PathBuf>,
    /// NUMA node counts of the synthetic machines (2 PUs per core, enough cores for the threads).
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    pub numa: Vec<usize>,
    /// Scotch's gmap: `auto` (scotch_gmap or gmap on PATH, skipped with a warning if absent),
    /// `off`, or a path.
    #[arg(long, default_value = "auto")]
    pub scotch: String,
    /// Seed for randomised strategies.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Markdown output (written atomically).
    #[arg(long, default_value = "docs/eval.md")]
    pub out: PathBuf,
    /// Directory for the plots. Default: `eval/` next to --out.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
}

/// Largest `--patterns` size: the benchmark's largest job. Each pattern is a dense n×n
/// matrix, and every strategy runs on it, so far larger sizes only exhaust memory.
const MAX_PATTERN_THREADS: usize = 4096;

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.numa.is_empty() || a.numa.contains(&0) {
        anyhow::bail!("--numa: give NUMA node counts >= 1, e.g. 2,4,8");
    }
    let mut inputs = Vec::new();
    if a.patterns > 0 {
        if a.patterns < 8 || !a.patterns.is_multiple_of(8) || a.patterns > MAX_PATTERN_THREADS {
            anyhow::bail!(
                "--patterns {}: use a multiple of 8 up to {MAX_PATTERN_THREADS} (or 0 for none)",
                a.patterns
            );
        }
        inputs.extend(eval::patterns(a.patterns));
    }
    for d in &a.eagermap {
        inputs.extend(eval::read_eagermap_dir(d)?);
    }
    for d in &a.profile {
        inputs.push(eval::read_profile(d)?);
    }
    if inputs.is_empty() {
        anyhow::bail!("no inputs: give --patterns N, --eagermap DIR or --profile DIR");
    }
    // Rows and the summary are keyed by name: two inputs with one name would merge.
    let mut seen = std::collections::HashSet::new();
    for i in inputs.iter_mut() {
        let base = i.name.clone();
        let mut k = 1;
        while !seen.insert(i.name.clone()) {
            k += 1;
            i.name = format!("{base}-{k}");
        }
        if k > 1 {
            log::warn!(
                "two inputs are named '{base}': {} is listed as '{}'",
                i.source,
                i.name
            );
        }
    }
    let gmap = match a.scotch.as_str() {
        "off" => None,
        "auto" => {
            let g = eval::scotch::find();
            if g.is_none() {
                log::warn!(
                    "Scotch's gmap not found on PATH (Debian package scotch): no Scotch rows"
                );
            }
            g
        }
        p => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                anyhow::bail!("--scotch {}: no such program", p.display());
            }
            if nix::unistd::access(&p, nix::unistd::AccessFlags::X_OK).is_err() {
                anyhow::bail!("--scotch {}: not executable", p.display());
            }
            Some(p)
        }
    };
    let rows = eval::run(&inputs, &a.numa, gmap.as_deref(), a.seed)?;
    let plots = a.plots.clone().unwrap_or_else(|| {
        a.out
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("eval")
    });
    report::eval_plots(&rows, &plots)
        .with_context(|| format!("writing plots to {}", plots.display()))?;
    // The document links the plots relative to its own directory when they are below it.
    let out_dir = a.out.parent().unwrap_or(std::path::Path::new(""));
    let plots_link = match plots.strip_prefix(out_dir) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => std::path::absolute(&plots).unwrap_or_else(|_| plots.clone()),
    };
    let notes = format!(
        "Generated by `cmlb eval` ({}) on {} with {} inputs on synthetic machines of {:?} NUMA \
nodes; Scotch: {}. Mapping times are each mapper's own time on this machine (Scotch: the \
`Mapping` time `gmap -vt` reports, I/O excluded; cmlb strategies: a debug or release build as \
run). Metrics of every row, Scotch's included, are computed by `mapper::metrics_of`. \
`dagtm` maps from a profile's raw samples, so it appears only for inputs profiled here. \
Scotch balances loads, not thread counts, and may stack threads on one PU; such a mapping is \
repaired before it is measured (the excess threads of an overfull PU move to free PUs, same \
NUMA node first, then the nearest, least hop-bytes lost first; capacity 1 thread per PU, or \
ceil(threads/PUs) when threads outnumber PUs), its row reads `scotch (repaired: N moved)`, \
its mapping time includes the repair, and the summary counts it under `scotch`. \
Regenerate with `tests/eval/run`.\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        inputs.len(),
        a.numa,
        gmap.as_ref()
            .map_or("not run".to_string(), |g| format!("`{}`", g.display())),
    );
    let md = eval::markdown(&rows, &inputs, &notes, &plots_link.display().to_string());
    if let Some(dir) = a.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    mapper::write_atomic(&a.out, md.as_bytes())?;
    print!("{}", eval::summary_markdown(&rows));
    if let Some(note) = eval::repair_note(&rows) {
        print!("\n{note}");
    }
    Ok(())
}
