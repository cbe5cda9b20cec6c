//! `cmlb report`: an HTML page with pictures of a profile and a plan (thin layer over the
//! `report` crate).

use anyhow::Context;
use clap::Args as ClapArgs;
use mapper::compare;
use mapper::MapInput;
use mapper::Plan;
use profile::Profile;
use std::path::PathBuf;

#[derive(ClapArgs)]
#[command(
    after_help = "Writes OUT/index.html (opens offline, no network) and every figure as \
PNG and SVG: heatmap, heatmap-plan, timeline, load, topology. Given the directory of a \
`cmlb bench` run (bench.csv) instead, the page shows its table, verdict and runs (bench.svg).

Examples:
  cmlb report prof                                   # plan computed with the default strategy
  cmlb report prof --plan plan.yaml --out prof-report
  cmlb report prof --topology \"pack:2 numa:4 core:4 pu:2\" --strategy spectral"
)]
pub struct Args {
    /// Profile directory written by `cmlb profile` (profile.yaml, comm.csv, load.csv,
    /// timeline.csv), or a `cmlb bench --out` directory (bench.csv, bench.txt).
    #[arg(value_name = "PROFILE_DIR|BENCH_DIR")]
    pub profile: PathBuf,
    /// Plan to draw (plan.yaml from `cmlb map --out`); without it the plan is computed with
    /// --strategy.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Strategy for the plan when no --plan is given.
    #[arg(long, default_value = mapper::DEFAULT_STRATEGY, conflicts_with = "plan",
          value_parser = super::parse_strategy, value_name = "NAME[:key=value,...]")]
    pub strategy: mapper::StrategySpec,
    /// `live`, a path to an hwloc XML file, or an hwloc synthetic description
    /// such as "pack:2 numa:2 l3:1 core:8 pu:2".
    #[arg(long, default_value = "live")]
    pub topology: String,
    /// Only use these PUs (OS indexes, Linux list format), or `self`.
    #[arg(long, value_name = "LIST|self")]
    pub cpuset: Option<String>,
    /// Seed for randomised strategies (same as `cmlb map --seed`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (replaced atomically). Default: PROFILE_DIR/report.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let csv = a.profile.join("bench.csv");
    if csv.is_file() && !a.profile.join(profile::PROFILE_FILE).exists() {
        return bench_page(&a, &csv);
    }
    if !a.profile.is_dir() {
        anyhow::bail!(
            "{}: not a profile directory (expected a directory with profile.yaml, comm.csv and load.csv)",
            a.profile.display()
        );
    }
    let out = a.out.clone().unwrap_or_else(|| a.profile.join("report"));
    // Before any work: the output must not replace the inputs or unrelated files.
    let mut inputs = vec![a.profile.as_path()];
    inputs.extend(a.plan.as_deref());
    mapper::check_output_dir(&out, "index.html", &inputs)?;
    let profile = Profile::read_dir(&a.profile)?;
    let topo = super::topology::load(&a.topology, a.cpuset.as_deref())?;
    let input = MapInput {
        comm: &profile.comm,
        load: &profile.load,
        topology: &topo,
        seed: a.seed,
    };
    // dagtm (and any strategy using the raw sample log) sees the profile's samples.csv.
    let samples = step::read_profile_samples(&a.profile, profile.comm.n())?;
    let (plan, source) = match &a.plan {
        Some(path) => {
            let plan = Plan::read_yaml(path)?;
            let source = format!("{} (strategy '{}')", path.display(), plan.strategy);
            (plan, source)
        }
        None => {
            let plan = mapper::plan(&a.strategy, &input, samples.as_ref())?;
            let source = format!("computed with strategy '{}'", plan.strategy);
            (plan, source)
        }
    };
    let compare = compare(&input, samples.as_ref(), None);
    let written = report::write_report(
        &report::ReportInput {
            profile: &profile,
            profile_dir: &a.profile,
            topology: &topo,
            plan: &plan,
            plan_source: &source,
            compare: &compare,
        },
        &out,
    )
    // Name the plan too: most failures here are a plan that does not fit the topology.
    .with_context(|| format!("report to {} of the plan {source}", out.display()))?;
    println!("{}", out.join("index.html").display());
    log::info!("wrote {} files", written.len());
    Ok(())
}

/// The page of a `cmlb bench` directory: its summary as printed and the runs as dots.
fn bench_page(a: &Args, csv: &std::path::Path) -> anyhow::Result<()> {
    use super::bench;
    let samples = bench::read_csv(csv)?;
    if samples.is_empty() {
        anyhow::bail!("{}: no runs", csv.display());
    }
    let mut placements: Vec<String> = Vec::new();
    for s in &samples {
        if !placements.contains(&s.placement) {
            placements.push(s.placement.clone());
        }
    }
    let text = std::fs::read_to_string(a.profile.join(bench::SUMMARY)).unwrap_or_default();
    let (title, summary) = match text.split_once('\n') {
        Some((first, rest)) if first.starts_with("command: ") => (
            bench::title(&[first["command: ".len()..].to_string()]),
            rest.to_string(),
        ),
        // A bench stopped by a failing run wrote no summary: the runs alone.
        _ => (
            csv.display().to_string(),
            format!(
                "{} runs, no summary (the bench did not finish)",
                samples.len()
            ),
        ),
    };
    let out = a.out.clone().unwrap_or_else(|| a.profile.join("report"));
    report::write_bench_report(
        &bench::bench_runs(&samples),
        &placements,
        &title,
        &summary,
        &[csv],
        &out,
    )
    .with_context(|| format!("report to {}", out.display()))?;
    println!("{}", out.join("index.html").display());
    Ok(())
}
