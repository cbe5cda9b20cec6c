//! The HTML page: one file, inline CSS, images referenced relatively, no network access.

use crate::figures::{phase_spans, short_num};
use crate::layout::PlanView;
use crate::ReportInput;
use mapper::num;
use mapper::Plan;
use std::fmt::Write;

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A metric cell: readable text, and the exact value in `data-value` for tools and tests.
/// `num` is the formatting `cmlb map --compare` uses, so the page shows the same strings.
fn metric_cell(v: f64, text: String) -> String {
    format!("<td class=\"num\" data-value=\"{v:e}\">{text}</td>")
}

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 1.5em auto; max-width: 1440px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.chosen td { background: #fff6d5; font-weight: bold; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 0.15em 1em; }
dl.meta dt { font-weight: bold; }
dl.meta dd { margin: 0; font-family: monospace; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
.pair { display: flex; flex-wrap: wrap; gap: 1em; }
.pair figure { flex: 1 1 600px; }
.note { color: #666; font-size: 0.9em; }
tr.nodata td { color: #a33; }
"#;

/// Sets `data-images` on <html> once every image has loaded: `ok:N`, or `failed:NAMES`.
const CHECK_SCRIPT: &str = r#"
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var bad = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; })
                .map(function (i) { return i.getAttribute('src'); });
  document.documentElement.setAttribute('data-images',
    bad.length === 0 ? 'ok:' + imgs.length : 'failed:' + bad.join(','));
});
"#;

fn figure(out: &mut String, name: &str, alt: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure id=\"fig-{name}\"><img src=\"{name}.svg\" alt=\"{alt}\">\
<figcaption>{caption} (<a href=\"{name}.png\">PNG</a>, <a href=\"{name}.svg\">SVG</a>)</figcaption></figure>",
        alt = escape(alt)
    );
}

pub fn page(input: &ReportInput, view: &PlanView, figures: &[&str]) -> String {
    let p = input.profile;
    let meta = &p.meta;
    let n = p.comm.n();
    let mut h = String::new();
    let title = format!(
        "cmlb report: {}",
        if meta.command.is_empty() {
            input.profile_dir.display().to_string()
        } else {
            meta.command.join(" ")
        }
    );
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n\
<style>{STYLE}</style>\n<script>{CHECK_SCRIPT}</script>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    h.push_str("<dl class=\"meta\">\n");
    let mut item = |k: &str, v: String| {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    };
    item("profile", input.profile_dir.display().to_string());
    item("command", meta.command.join(" "));
    if !meta.host.is_empty() {
        item("host", meta.host.clone());
    }
    item("backend", meta.backend.clone());
    if meta.sample_period > 0 {
        item("sample period", meta.sample_period.to_string());
    }
    item("duration", format!("{:.3} s", meta.duration_s));
    item(
        "samples",
        format!("{} ({} lost)", meta.samples, meta.lost_samples),
    );
    item("threads", n.to_string());
    if !meta.topology.is_empty() {
        item("profiled on", meta.topology.clone());
    }
    item(
        "mapped onto",
        format!(
            "{} ({} NUMA nodes, {} PUs)",
            input.topology.source,
            input.topology.numa.len(),
            input.topology.num_pus()
        ),
    );
    item("plan", input.plan_source.to_string());
    item(
        "evidence",
        match &meta.evidence {
            Some(e) => e.summary_line(),
            None => "not recorded (profile of an older cmlb)".into(),
        },
    );
    h.push_str("</dl>\n");
    if let Some(e) = &meta.evidence {
        evidence_table(&mut h, e);
    }

    h.push_str("<h2>Strategies compared</h2>\n");
    compare_table(&mut h, input.compare, &input.plan.strategy);
    h.push_str(
        "<p class=\"note\">RemoteComm: communication between threads on different NUMA nodes \
(lower is better). Load_std: standard deviation of the per-NUMA-node memory load (lower is \
better). Quality: EagerMap's Σ A[i][j] / distance (higher is better). Hop-bytes: Σ A[i][j] · hops \
(lower is better). MRAM cost: predicted memory cost of the shared accesses (lower is better). Mapping time is the strategy's own run time on this machine.</p>\n",
    );

    h.push_str("<h2>Communication matrix</h2>\n<div class=\"pair\">\n");
    figure(
        &mut h,
        "heatmap",
        "communication matrix heat map, creation order",
        "Threads in creation order. Colour strips: NUMA node the plan gives each thread.",
    );
    figure(
        &mut h,
        "heatmap-plan",
        "communication matrix heat map, reordered by the plan",
        "Reordered by the plan: threads grouped by NUMA node, blocks outlined.",
    );
    h.push_str("</div>\n");

    h.push_str("<h2>Memory-access timeline and phases</h2>\n");
    if figures.contains(&"timeline") {
        figure(
            &mut h,
            "timeline",
            "memory-access timeline with phases",
            "Samples per timeslice; shaded spans are the detected phases, lines their weights \
(mean samples per slice, Eq. 3-2).",
        );
        let spans = phase_spans(p);
        if !spans.is_empty() {
            h.push_str(
                "<table id=\"phases\"><tr><th>phase</th><th>start (ms)</th><th>end (ms)</th><th>weight</th></tr>\n",
            );
            for (i, (a, b, w)) in spans.iter().enumerate() {
                let _ = writeln!(
                    h,
                    "<tr><td>P{i}</td><td class=\"num\">{a:.1}</td><td class=\"num\">{b:.1}</td><td class=\"num\">{}</td></tr>",
                    short_num(*w)
                );
            }
            h.push_str("</table>\n");
        }
    } else {
        h.push_str("<p class=\"note\">This profile has no timeline (timeline.csv is absent or empty).</p>\n");
    }

    h.push_str("<h2>Memory load per thread</h2>\n");
    figure(
        &mut h,
        "load",
        "load vector bars coloured by NUMA node",
        "The load vector V (Eq. 3-3), one bar per thread, coloured by the plan's NUMA node.",
    );

    h.push_str("<h2>Plan on the topology</h2>\n");
    figure(
        &mut h,
        "topology",
        "plan drawn on the topology",
        "NUMA nodes → cores → PUs; each PU shows the thread the plan pins there.",
    );
    if let Some(pu) = &view.pu {
        h.push_str("<table id=\"assignment\"><tr><th>thread</th><th>tid</th><th>name</th><th>PU</th><th>core</th><th>NUMA</th><th>load</th></tr>\n");
        for (t, &pi) in pu.iter().enumerate() {
            let pu = &input.topology.pus[pi];
            let info = meta.threads.get(t);
            let _ = writeln!(
                h,
                "<tr><td class=\"num\">{t}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                info.map_or(String::new(), |i| i.tid.to_string()),
                escape(info.map_or("", |i| i.name.as_str())),
                pu.os_index,
                pu.core,
                pu.numa,
                short_num(p.load[t])
            );
        }
        h.push_str("</table>\n");
    }
    let _ = write!(
        h,
        "<p class=\"note\">Generated by cmlb {}.</p>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
    h
}

/// Per-thread evidence: samples and sharing events, threads without data marked. Collapsed:
/// it is long for many threads and read only when the summary line raises a question.
fn evidence_table(h: &mut String, e: &profile::Evidence) {
    h.push_str(
        "<details><summary>Evidence per thread</summary>\n<table class=\"evidence\">\n\
<tr><th>thread</th><th>samples</th><th>sharing events</th></tr>\n",
    );
    for t in &e.per_thread {
        let none = t.sharing_events == 0.0;
        let _ = writeln!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td></tr>",
            if none { " class=\"nodata\"" } else { "" },
            t.thread,
            t.samples,
            if none {
                "none".to_string()
            } else {
                format!("{:.0}", t.sharing_events)
            }
        );
    }
    h.push_str("</table></details>\n");
}

fn compare_table(h: &mut String, rows: &[(String, Result<Plan, String>)], chosen: &str) {
    h.push_str(
        "<table id=\"compare\"><tr><th>strategy</th><th>RemoteComm</th><th>Load_std</th>\
<th>quality</th><th>hop-bytes</th><th>MRAM cost</th><th>mapping time (ms)</th></tr>\n",
    );
    for (strategy, result) in rows {
        let class = if strategy == chosen {
            " class=\"chosen\""
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr{class} data-strategy=\"{s}\"><td>{s}</td>",
            s = escape(strategy)
        );
        match result {
            Ok(p) if p.assignment.is_empty() => {
                h.push_str("<td colspan=\"6\" class=\"note\">(no binding)</td>")
            }
            Ok(p) => {
                let m = &p.metrics;
                for v in [
                    m.remote_comm,
                    m.load_std,
                    m.quality,
                    m.hop_bytes,
                    m.mram_cost,
                ] {
                    h.push_str(&metric_cell(v, num(v)));
                }
                h.push_str(&metric_cell(m.mapping_ms, format!("{:.3}", m.mapping_ms)));
            }
            Err(e) => {
                let _ = write!(
                    h,
                    "<td colspan=\"6\" class=\"note\">error: {}</td>",
                    escape(e)
                );
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}
