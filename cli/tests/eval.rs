//! `cmlb eval` through the real binary, with Scotch's gmap (Debian `scotch`, installed by
//! slurm-conf/install-deps): the table has every strategy and Scotch, Scotch finds the known
//! best grouping (so the graph/target conversion is right), and bad arguments fail clearly.

mod common;

use common::{cmlb, fails};

use std::path::Path;
use std::process::Command;

/// The cells of the table row `| input | strategy | ...` in the section for `numa` nodes; a
/// repaired plan's strategy cell reads `strategy (repaired: N moved)`.
fn row(md: &str, numa: usize, input: &str, strategy: &str) -> Vec<String> {
    let section = md
        .split(&format!("## {numa} NUMA nodes"))
        .nth(1)
        .unwrap_or_else(|| panic!("no section for {numa} NUMA nodes"));
    let line = section
        .lines()
        .find(|l| {
            l.starts_with(&format!("| {input} | {strategy} |"))
                || l.starts_with(&format!("| {input} | {strategy} (repaired: "))
        })
        .unwrap_or_else(|| panic!("no row for {input}/{strategy}"));
    line.split('|')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn scotch_and_every_strategy_on_known_patterns() {
    let gmap = ["scotch_gmap", "gmap"]
        .into_iter()
        .find(|g| {
            Command::new("which")
                .arg(g)
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("Scotch's gmap is needed: run slurm-conf/install-deps (Debian package scotch)");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("doc/eval.md");
    let o = cmlb(&[
        "eval",
        "--patterns",
        "16",
        "--numa",
        "2",
        "--scotch",
        "auto",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("| 2 | scotch |"), "{summary}");
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains(gmap), "the document names the gmap used");
    for s in ["compact", "scatter", "random", "scotch"] {
        row(&md, 2, "pairs", s);
    }
    // Matrix-only inputs carry no sample log: dagtm is left out, not listed as an error.
    assert!(
        !md.contains("| pairs | dagtm |"),
        "dagtm row on a bare matrix"
    );
    assert!(!md.contains("error:"), "no failed rows:\n{md}");
    // 4 interleaved cliques of 4 (t mod 4, weight 100) with weight-1 noise: the best 2-node
    // split keeps cliques whole, two per node, leaving only the 8×8 noise pairs remote.
    let scotch = row(&md, 2, "cliques-interleaved", "scotch");
    assert_eq!(scotch[2], "64", "Scotch's RemoteComm: {scotch:?}");
    // Pairs (2k, 2k+1) fit inside a node: nothing remote for compact or Scotch.
    assert_eq!(row(&md, 2, "pairs", "compact")[2], "0");
    assert_eq!(row(&md, 2, "pairs", "scotch")[2], "0");
    // gmap balances the uneven loads by stacking threads: those plans are repaired, labelled,
    // and counted in the note under the summary (document and stdout alike).
    let repaired = md.matches("| scotch (repaired: ").count();
    let note = format!("scotch on 2 NUMA nodes: {repaired} of 7 plans");
    assert_eq!(
        md.contains(&note) && summary.contains(&note),
        repaired > 0,
        "{note}:\n{md}"
    );
    for ext in ["png", "svg"] {
        assert!(Path::new(&tmp.path().join(format!("doc/eval/remote-2numa.{ext}"))).is_file());
    }
}

#[test]
fn bad_eval_arguments_fail_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("eval.md");
    let o = out.to_str().unwrap();
    fails(&["eval", "--numa", "0", "--out", o], &["--numa"]);
    fails(
        &["eval", "--patterns", "12", "--out", o],
        &["multiple of 8"],
    );
    fails(
        &["eval", "--patterns", "99999992", "--out", o],
        &["up to 4096"],
    );
    fails(
        &["eval", "--scotch", "/nonexistent/gmap", "--out", o],
        &["/nonexistent/gmap"],
    );
    let not_exec = tmp.path().join("gmap.txt");
    std::fs::write(&not_exec, "x").unwrap();
    fails(
        &["eval", "--scotch", not_exec.to_str().unwrap(), "--out", o],
        &["gmap.txt", "not executable"],
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails(
        &[
            "eval",
            "--patterns",
            "0",
            "--eagermap",
            empty.to_str().unwrap(),
            "--out",
            o,
        ],
        &["no .csv matrices"],
    );
    assert!(!out.exists(), "no output on error");
}

#[test]
fn plots_are_linked_where_they_are_written_and_names_stay_apart() {
    let tmp = tempfile::tempdir().unwrap();
    // A profile directory named like one of the built-in patterns.
    let prof = tmp.path().join("pairs");
    common::pairs_profile(&prof, 8);
    let out = tmp.path().join("doc/eval.md");
    let figs = tmp.path().join("doc/figs");
    let o = cmlb(&[
        "eval",
        "--patterns",
        "8",
        "--numa",
        "2",
        "--scotch",
        "off",
        "--profile",
        prof.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--plots",
        figs.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("two inputs are named 'pairs'"), "{err}");
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("](figs/remote-2numa.svg)"), "{md}");
    assert!(figs.join("remote-2numa.svg").is_file());
    row(&md, 2, "pairs", "compact");
    row(&md, 2, "pairs-2", "compact");
}
