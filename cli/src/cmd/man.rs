//! `cmlb man --out DIR` (hidden; for packagers): the man pages, generated from the definitions
//! `--help` prints, so they cannot drift: `cmlb(1)` and `cmlb-SUBCOMMAND(1)` from the clap
//! command tree, `cmlb_spank(8)` from `cmlb_slurm::options` (the same tables the plugin's
//! `--help` text and its error messages use).

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use clap_mangen::roff::{bold, italic, roman, Roff};
use cmlb_slurm::options::{KEY_DOCS, MODE_DOCS, SITE_DOCS};
use std::path::{Path, PathBuf};

#[derive(ClapArgs)]
pub struct Args {
    /// Directory to write the pages into (created if missing; pages are replaced atomically).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(a: Args, cli: clap::Command) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut written = Vec::new();
    write_tree(&cli, &a.out, &mut written)?;
    let spank = a.out.join("cmlb_spank.8");
    mapper::write_atomic(&spank, spank_page().as_bytes())?;
    written.push(spank);
    for p in &written {
        println!("{}", p.display());
    }
    Ok(())
}

fn write_tree(cmd: &clap::Command, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, dir, out)?;
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    let path = dir.join(man.get_filename());
    mapper::write_atomic(&path, &buf)?;
    out.push(path);
    Ok(())
}

/// `cmlb_spank(8)`: the plugstack.conf arguments and the `--cmlb-map` grammar.
fn spank_page() -> String {
    let mut r = Roff::new();
    r.control(
        "TH",
        [
            "CMLB_SPANK",
            "8",
            "",
            concat!("cmlb ", env!("CARGO_PKG_VERSION")),
        ],
    );
    r.control("SH", ["NAME"]);
    r.text([roman(
        "cmlb_spank.so \\- Slurm SPANK plugin: communication-aware, memory-load-balanced thread mapping",
    )]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([
        roman("In "),
        italic("plugstack.conf"),
        roman(": "),
        bold("optional"),
        roman(" /usr/lib/x86_64-linux-gnu/slurm-wlm/cmlb_spank.so ["),
        italic("key=value"),
        roman(" ...]"),
    ]);
    r.control("br", []);
    r.text([
        bold("srun --cmlb-map="),
        italic("MODE"),
        roman("[:"),
        italic("key=value"),
        roman(",...] "),
        italic("program"),
    ]);
    r.control("SH", ["DESCRIPTION"]);
    r.text([roman(
        "The plugin adds --cmlb-map to srun, sbatch and salloc. In profile mode each task runs \
under cmlb profile and its profile is saved in the scratch directory; in apply mode every \
task's threads are pinned from the plan cmlb computes from that profile (thread k, in creation \
order, on the k-th PU of the plan). A problem never fails a job unless the site sets strict=1: \
the plugin logs one line and the step runs unpinned. CMLB_MAP in the environment is read like \
the option; --cmlb-map wins, then CMLB_MAP, then the site's default=.",
    )]);
    r.control("SH", ["PLUGSTACK ARGUMENTS"]);
    for (k, d) in SITE_DOCS {
        r.control("TP", []);
        r.text([bold(k)]);
        r.text([roman(d)]);
    }
    r.control("SH", ["OPTION"]);
    r.text([
        bold("--cmlb-map="),
        italic("MODE"),
        roman("[:"),
        italic("item"),
        roman(",...] where MODE is one of:"),
    ]);
    for (m, d) in MODE_DOCS {
        r.control("TP", []);
        r.text([bold(m)]);
        r.text([roman(d)]);
    }
    r.text([roman("and the items are:")]);
    for (k, d) in KEY_DOCS {
        r.control("TP", []);
        r.text([bold(k)]);
        r.text([roman(d)]);
    }
    r.control("SH", ["EXAMPLES"]);
    for ex in [
        "srun --cmlb-map=profile ./app",
        "srun --cmlb-map=apply ./app",
        "srun --cmlb-map=apply:strategy=spectral:k=8,scheme=first-fit,time=2 ./app",
        "sbatch --cmlb-map=apply job.sh",
    ] {
        r.control("IP", []);
        r.text([roman(ex)]);
    }
    r.control("SH", ["SEE ALSO"]);
    r.text([
        bold("cmlb"),
        roman("(1), "),
        bold("cmlb-doctor"),
        roman("(1), "),
        bold("spank"),
        roman("(8), "),
        bold("srun"),
        roman("(1)"),
    ]);
    r.render()
}

#[cfg(test)]
mod tests {
    #[test]
    fn spank_page_lists_every_key() {
        let page = super::spank_page();
        for (k, _) in super::SITE_DOCS.iter().chain(super::KEY_DOCS.iter()) {
            let key = k.split(['=', '[']).next().unwrap();
            assert!(page.contains(key), "{key} missing from cmlb_spank(8)");
        }
        assert!(page.contains("\n.TH CMLB_SPANK 8"), "{page}");
    }
}
