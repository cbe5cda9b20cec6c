//! `cmlb report` through the real binary: the page renders in headless Chromium with every
//! image loaded, its table holds the numbers `cmlb map --compare` prints, and bad input gives
//! one clear error line and no output directory.

mod common;

use common::{fails, ok, usage_error};

use mapper::CommMatrix;
use profile::{Phase, Profile, ProfileMeta, ThreadInfo, TimelineRow};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOPO: &str = "pack:2 numa:2 core:4 pu:2";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// 12 threads in 3 interleaved cliques (t talks to t±3, t±6, ...), uneven loads, two phases.
fn write_profile(dir: &Path) {
    let n = 12;
    let mut comm = CommMatrix::zeros(n);
    for i in 0..n {
        for j in (i + 1)..n {
            let v = if i % 3 == j % 3 {
                500.0 + (i + j) as f64
            } else {
                2.0
            };
            comm.add_sym(i, j, v);
        }
    }
    let timeline = (0..400)
        .map(|k| {
            let phase = if k < 180 {
                0
            } else if k >= 220 {
                1
            } else {
                -1
            };
            let base = [30.0, 70.0, 4.0][if phase < 0 { 2 } else { phase as usize }];
            TimelineRow {
                t_ms: k as f64,
                samples: base + (k % 7) as f64,
                smoothed: base + 3.0,
                phase,
            }
        })
        .collect();
    Profile {
        meta: ProfileMeta {
            host: "test".into(),
            topology: TOPO.into(),
            sample_period: 2000,
            duration_s: 0.4,
            samples: 20000,
            phases: vec![
                Phase {
                    start_ms: 0.0,
                    end_ms: 179.0,
                    weight: 33.0,
                },
                Phase {
                    start_ms: 220.0,
                    end_ms: 399.0,
                    weight: 73.0,
                },
            ],
            ..ProfileMeta::new(
                &["./cliques"],
                "synthetic",
                n,
                ThreadInfo::new(4000, "cliques", 100, 50),
            )
        },
        comm,
        load: (0..n).map(|t| 10.0 + (t * 7 % 5) as f64 * 4.5).collect(),
        timeline,
        halves: None,
        lines: None,
        cpu: None,
    }
    .write_dir(dir)
    .unwrap();
}

fn chromium() -> PathBuf {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(o) = Command::new("which").arg(c).output() {
            if o.status.success() {
                return PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            }
        }
    }
    panic!("headless Chromium is needed for this test: run slurm-conf/install-deps (Debian package chromium)");
}

/// Run headless Chromium on `page` with a fresh profile dir; `extra` selects the action.
fn run_chromium(page: &Path, extra: &[String], tmp: &Path) -> Output {
    let user_dir = tempfile::tempdir_in(tmp).unwrap();
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--virtual-time-budget=10000",
    ])
    .arg(format!("--user-data-dir={}", user_dir.path().display()))
    .args(extra)
    .arg(format!("file://{}", page.canonicalize().unwrap().display()));
    let o = cmd.output().expect("run chromium");
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `strategy -> [(exact value, text)]` for the metric cells of the page's #compare table.
fn page_table(dom: &str) -> Vec<(String, Vec<(f64, String)>)> {
    let start = dom
        .find("id=\"compare\"")
        .expect("compare table in the DOM");
    let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
    let mut rows = Vec::new();
    for tr in table.split("<tr").skip(1) {
        let Some(k) = tr.find("data-strategy=\"") else {
            continue;
        };
        let name = tr[k + 15..].split('"').next().unwrap().to_string();
        let mut cells = Vec::new();
        for part in tr.split("data-value=\"").skip(1) {
            let value: f64 = part.split('"').next().unwrap().parse().unwrap();
            let text = part.split('>').nth(1).unwrap().split('<').next().unwrap();
            cells.push((value, text.to_string()));
        }
        rows.push((name, cells));
    }
    rows
}

#[test]
fn page_renders_in_chromium_with_the_numbers_map_compare_prints() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = tmp.path().join("prof");
    write_profile(&prof);
    let out = tmp.path().join("rep");
    let printed = ok(&["report", s(&prof), "--topology", TOPO, "--out", s(&out)]);
    assert_eq!(printed.trim(), out.join("index.html").display().to_string());

    let o = run_chromium(&out.join("index.html"), &["--dump-dom".into()], tmp.path());
    let dom = String::from_utf8_lossy(&o.stdout);
    let imgs = dom.matches("<img ").count();
    assert_eq!(imgs, 5, "heat map ×2, timeline, load, topology");
    assert!(
        dom.contains(&format!("data-images=\"ok:{imgs}\"")),
        "not every image loaded: {}",
        dom.lines()
            .find(|l| l.contains("data-images"))
            .unwrap_or("no data-images attribute")
    );

    // The table equals `map --compare`: same strings in the text table, same values in JSON.
    let table = ok(&[
        "map",
        "--profile",
        s(&prof),
        "--topology",
        TOPO,
        "--compare",
    ]);
    let json: Value = serde_json::from_str(&ok(&[
        "map",
        "--profile",
        s(&prof),
        "--topology",
        TOPO,
        "--compare",
        "--format",
        "json",
    ]))
    .unwrap();
    let page = page_table(&dom);
    let entries = json.as_array().unwrap();
    assert_eq!(page.len(), entries.len(), "one row per strategy");
    let mut compared = 0;
    for (name, cells) in &page {
        let e = entries
            .iter()
            .find(|e| e["strategy"] == name.as_str())
            .unwrap();
        if e["binds"] != true {
            // No binding, or the strategy cannot run on this input (e.g. dagtm without a
            // sample log): no metric cells, as `map --compare` prints none.
            assert!(cells.is_empty(), "{name}: {e}");
            continue;
        }
        let m = &e["metrics"];
        let line = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in map --compare output:\n{table}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        for (c, key) in [
            "remote_comm",
            "load_std",
            "quality",
            "hop_bytes",
            "mram_cost",
        ]
        .iter()
        .enumerate()
        {
            let want = m[key].as_f64().unwrap();
            let (got, text) = &cells[c];
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{name} {key}: page {got}, map --compare {want}"
            );
            assert_eq!(text, words[c + 1], "{name} {key} as printed");
            compared += 1;
        }
    }
    assert!(compared >= 20, "compared only {compared} numbers");

    let shot = tmp.path().join("shot.png");
    run_chromium(
        &out.join("index.html"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1440,4200".into(),
        ],
        tmp.path(),
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "screenshot too small"
    );
    if let Ok(keep) = std::env::var("CMLB_KEEP_REPORT") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&shot, Path::new(&keep).join("screenshot.png")).unwrap();
        let _ = std::fs::remove_dir_all(Path::new(&keep).join("rep"));
        std::fs::rename(&out, Path::new(&keep).join("rep")).unwrap();
    }
}

#[test]
fn a_given_plan_is_drawn_and_checked_against_the_topology() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = tmp.path().join("prof");
    write_profile(&prof);
    let plan = tmp.path().join("plan.yaml");
    ok(&[
        "map",
        "--profile",
        s(&prof),
        "--topology",
        TOPO,
        "--strategy",
        "scatter",
        "--out",
        s(&plan),
    ]);
    let out = tmp.path().join("rep");
    ok(&[
        "report",
        s(&prof),
        "--topology",
        TOPO,
        "--plan",
        s(&plan),
        "--out",
        s(&out),
    ]);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<tr class=\"chosen\" data-strategy=\"scatter\">"));
    // The page's assignment table agrees with the plan file, thread by thread.
    let p = mapper::Plan::read_yaml(&plan).unwrap();
    for a in &p.assignment {
        let row = format!(
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td>cliques</td><td class=\"num\">{}</td>",
            a.thread,
            4000 + a.thread,
            a.pu
        );
        assert!(html.contains(&row), "missing {row}");
    }

    // The same plan on a smaller machine does not fit: one error line, no output.
    let out2 = tmp.path().join("rep2");
    fails(
        &[
            "report",
            s(&prof),
            "--topology",
            "numa:1 core:4 pu:1",
            "--plan",
            s(&plan),
            "--out",
            s(&out2),
        ],
        &["plan", "which the topology", "does not have"],
    );
    assert!(!out2.exists());
}

#[test]
fn bad_profile_dirs_fail_with_one_clear_line_and_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rep");
    let missing = tmp.path().join("nope");
    fails(
        &["report", s(&missing), "--topology", TOPO, "--out", s(&out)],
        &["nope", "not a profile directory"],
    );
    let prof = tmp.path().join("prof");
    write_profile(&prof);
    std::fs::write(prof.join("comm.csv"), "0,1\n1,0,3\n").unwrap();
    fails(
        &["report", s(&prof), "--topology", TOPO, "--out", s(&out)],
        &["comm.csv", "not square"],
    );
    write_profile(&prof);
    std::fs::write(
        prof.join("timeline.csv"),
        "t_ms,samples,smoothed,phase\n0,1,1,0\n5,NaN,1,0\n",
    )
    .unwrap();
    fails(
        &["report", s(&prof), "--topology", TOPO, "--out", s(&out)],
        &["timeline.csv", "line 3", "finite and >= 0"],
    );
    write_profile(&prof);
    std::fs::remove_file(prof.join("load.csv")).unwrap();
    fails(
        &["report", s(&prof), "--topology", TOPO, "--out", s(&out)],
        &["load.csv"],
    );
    write_profile(&prof);
    usage_error(
        &[
            "report",
            s(&prof),
            "--topology",
            TOPO,
            "--strategy",
            "nosuch",
            "--out",
            s(&out),
        ],
        &["unknown strategy 'nosuch'"],
    );
    assert!(!out.exists(), "no partial report");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".cmlb-report-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary dirs left: {leftovers:?}");
}

#[test]
fn a_font_the_user_names_is_used_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = tmp.path().join("prof");
    write_profile(&prof);
    let out = tmp.path().join("rep");
    let o = Command::new(env!("CARGO_BIN_EXE_cmlb"))
        .args(["report", s(&prof), "--topology", TOPO, "--out", s(&out)])
        .env("CMLB_FONT", "/nonexistent/font.ttf")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("CMLB_FONT=/nonexistent/font.ttf"), "{err}");
    assert!(!out.exists(), "no report with another font");
}

#[test]
fn the_report_never_replaces_its_inputs_or_unrelated_files() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = tmp.path().join("prof");
    write_profile(&prof);
    let other = tmp.path().join("photos");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("precious.jpg"), "x").unwrap();
    fails(
        &["report", s(&prof), "--topology", TOPO, "--out", s(&other)],
        &["not an earlier cmlb output (no index.html)"],
    );
    assert!(other.join("precious.jpg").is_file());
    for out in [&prof, tmp.path()] {
        fails(
            &["report", s(&prof), "--topology", TOPO, "--out", s(out)],
            &["contains the input", "replacing it would delete it"],
        );
    }
    assert!(prof.join("profile.yaml").is_file());
    // An earlier report is replaced.
    let rep = tmp.path().join("rep");
    ok(&["report", s(&prof), "--topology", TOPO, "--out", s(&rep)]);
    ok(&["report", s(&prof), "--topology", TOPO, "--out", s(&rep)]);
}
