//! `cmlb report`: pictures of a profile and a plan.
//!
//! [`write_report`] turns a [`Profile`], the [`Topology`] it is mapped onto, a [`Plan`] and the
//! metrics of every strategy ([`mapper::compare`]) into a directory holding a self-contained
//! `index.html` (no network access needed, images referenced relatively) plus every figure as
//! PNG and SVG, drawn with `plotters`:
//!
//! * `heatmap`: the communication matrix, threads in creation order;
//! * `heatmap-plan`: the same matrix reordered by the plan, so NUMA groups show as blocks;
//! * `timeline`: memory-access samples per timeslice with the detected phases and their weights;
//! * `load`: the load vector as bars coloured by the NUMA node the plan gives each thread;
//! * `topology`: the plan drawn on the topology (NUMA nodes → cores → PUs → threads).
//!
//! The output directory is written atomically: a temporary sibling is filled, then renamed.
//!
//! [`bench_plot`] draws `cmlb bench`'s runs (a dot per run, a column per placement).
//!
//! [`eval_plots`] draws the evaluation's RemoteComm bars from `eval`'s rows. This crate only
//! draws: the evaluation itself (inputs, runs, Scotch, tables) is the `eval` crate, which
//! `report` depends on and which never depends on `report`.

mod bench_plot;
mod error;
mod eval_plots;
mod figures;
mod fonts;
mod html;
mod layout;

pub use bench_plot::{bench_plot, write_bench_report, BenchRun};
pub use error::{ReportError, Result};
pub use eval_plots::eval_plots;
pub use layout::PlanView;

use mapper::{Plan, Topology};
use profile::Profile;
use std::path::{Path, PathBuf};

/// Everything a report shows.
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    pub profile: &'a Profile,
    /// Where the profile was read from (shown on the page).
    pub profile_dir: &'a Path,
    pub topology: &'a Topology,
    pub plan: &'a Plan,
    /// Where the plan came from ("plan.yaml path" or "computed with strategy X").
    pub plan_source: &'a str,
    /// Every strategy's plan on the same input ([`mapper::compare`]).
    pub compare: &'a [(String, std::result::Result<Plan, String>)],
}

/// A temporary sibling of `out` to fill before it replaces `out` atomically
/// ([`mapper::replace_dir`]).
fn staging_dir(out: &Path) -> Result<tempfile::TempDir> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| ReportError::io(parent, e))?;
    // 0777 minus the umask, as mkdir would give (tempfile's default is 0700).
    tempfile::Builder::new()
        .prefix(".cmlb-report-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .tempdir_in(parent)
        .map_err(|e| ReportError::io(parent, e))
}

/// The files a report consists of, relative to its directory.
pub const FIGURES: [&str; 5] = ["heatmap", "heatmap-plan", "timeline", "load", "topology"];

/// Render the report into `out` (replaced atomically if it exists). Returns the paths written.
pub fn write_report(input: &ReportInput, out: &Path) -> Result<Vec<PathBuf>> {
    mapper::check_output_dir(out, "index.html", &[input.profile_dir])?;
    let view = PlanView::new(input.plan, input.topology, input.profile.comm.n())?;
    fonts::ensure()?;
    let tmp = staging_dir(out)?;
    let dir = tmp.path();
    let mut names = Vec::new();
    let n = input.profile.comm.n();
    let creation: Vec<usize> = (0..n).collect();
    figures::render(
        dir,
        "heatmap",
        figures::HEATMAP_SIZE,
        &figures::Heatmap {
            comm: &input.profile.comm,
            order: &creation,
            view: None,
            title: "Communication matrix (threads in creation order)",
        },
    )?;
    names.push("heatmap");
    let order = view.thread_order();
    figures::render(
        dir,
        "heatmap-plan",
        figures::HEATMAP_SIZE,
        &figures::Heatmap {
            comm: &input.profile.comm,
            order: &order,
            view: Some(&view),
            title: "Communication matrix reordered by the plan (blocks = NUMA groups)",
        },
    )?;
    names.push("heatmap-plan");
    let has_timeline = !input.profile.timeline.is_empty();
    if has_timeline {
        figures::render(
            dir,
            "timeline",
            (960, 420),
            &figures::Timeline {
                profile: input.profile,
            },
        )?;
        names.push("timeline");
    }
    figures::render(
        dir,
        "load",
        (960, 420),
        &figures::LoadBars {
            load: &input.profile.load,
            view: &view,
            topology: input.topology,
        },
    )?;
    names.push("load");
    let topo_fig = figures::TopologyFigure::new(input.topology, &view, &input.profile.load);
    figures::render(dir, "topology", topo_fig.size(), &topo_fig)?;
    names.push("topology");
    let page = html::page(input, &view, &names);
    let index = dir.join("index.html");
    std::fs::write(&index, page).map_err(|e| ReportError::io(&index, e))?;
    mapper::replace_dir(tmp.keep(), out)?;
    let mut written = vec![out.join("index.html")];
    for name in names {
        written.push(out.join(format!("{name}.png")));
        written.push(out.join(format!("{name}.svg")));
    }
    Ok(written)
}
