//! The evaluation: every strategy (and Scotch's `gmap` as an external baseline) on the same
//! inputs and synthetic machines of several NUMA sizes, as rows, a summary and a Markdown
//! document. `cmlb eval` is a thin layer over this crate.
//!
//! * [`inputs`]: what is mapped — synthetic known patterns, EagerMap's published matrices,
//!   profile directories — and the synthetic machines;
//! * [`scotch`]: the `gmap` adapter (graph and target writers, mapping parser, running gmap);
//! * [`capacity`]: one thread per PU, checked and repaired for plans made outside cmlb;
//! * [`run`](mod@run): strategies × NUMA sizes → [`EvalRow`]s;
//! * [`tables`]: summary, Markdown text, and the numbers the plots show.
//!
//! Metrics of every plan — Scotch's included — come from [`mapper::metrics_of`], so all
//! rows are measured the same way.
//!
//! **This crate computes, `report` draws.** `report` depends on `eval` (its `eval_plots`
//! draws [`EvalRow`]s, taking the plotted ratios from [`tables::remote_vs_random`]); `eval`
//! never depends on `report`, so there is no cycle and the computing code builds and tests
//! without plotters or fonts.

pub mod capacity;
mod error;
pub mod inputs;
pub mod run;
pub mod scotch;
pub mod tables;

pub use capacity::Repair;
pub use error::{EvalError, Result};
pub use inputs::{patterns, read_eagermap_dir, read_profile, synthetic_topology, EvalInput};
pub use run::{run, EvalRow};
pub use tables::{markdown, repair_note, summary, summary_markdown, SummaryRow};
