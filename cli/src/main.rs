//! `cmlb`: thin command-line layer over the `mapper` and `profiler` crates.

use clap::{CommandFactory, Parser, Subcommand};

/// A line on stderr that can never panic: `run` and `profile` supervise a command and must
/// carry on (and write the profile) when their stderr reader has gone away. The line is written
/// in one write(2): the ranks of an MPI job share one stderr, and `writeln!` on unbuffered
/// stderr writes piece by piece, so their lines came out interleaved mid-line.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut line = format!($($arg)*);
        line.push('\n');
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

mod cmd;
mod stats;

#[derive(Parser)]
#[command(
    name = "cmlb",
    version,
    about = "Communication-aware, memory-load-balanced thread mapping for NUMA machines",
    long_about = "cmlb profiles which threads of a program share memory and how much memory \
bandwidth each uses, then pins threads so that sharing threads sit on the same NUMA node while \
every node's memory load stays balanced.\n\nTypical use:\n  cmlb profile --out prof -- ./app\n  \
cmlb map --profile prof --topology live\n  cmlb run -- ./app"
)]
struct Cli {
    /// More log output (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the topology cmlb sees (live, XML or synthetic, optionally restricted), with its
    /// GPUs and NICs and the NUMA nodes they hang from.
    Topology(cmd::topology::Args),
    /// Compute a thread-to-PU plan from a profile or matrix.
    Map(cmd::map::Args),
    /// Profile if needed, map, and run a program with its threads pinned (no Slurm needed).
    Run(cmd::run::Args),
    /// Time a program under several placements, interleaved: is cmlb's plan faster?
    Bench(cmd::bench::Args),
    /// Compare every strategy and Scotch on known patterns and EagerMap's matrices.
    Eval(cmd::eval::Args),
    /// Write an HTML page with heat maps, timeline, load bars and the plan on the topology.
    Report(cmd::report::Args),
    /// Run a command (or follow a process) under the sampling profiler, write a profile dir.
    Profile(cmd::profile::Args),
    /// Map the ranks of a multi-node job onto machines (and switches), then onto cores.
    Ranks(cmd::ranks::Args),
    /// Check this node before enabling the Slurm plugin (Slurm release, plugstack.conf,
    /// scratch, sampling as the job user, topology, companion files).
    Doctor(cmd::doctor::Args),
    /// Write the man pages (for packagers).
    #[command(hide = true)]
    Man(cmd::man::Args),
}

fn main() {
    // cmlb reports topology errors itself; keep hwloc's parser chatter off stderr.
    mapper::quiet_hwloc();
    let cli = Cli::parse();
    // A reader that goes away (`cmlb map --list | head`) ends cmlb quietly by SIGPIPE, as it
    // does any Unix tool, instead of a "failed printing" panic. Not while cmlb supervises a
    // command: then a vanished reader must not end cmlb and orphan the command (its messages
    // go through `say!`, and its own pipes handle EPIPE). Launched commands get the default
    // disposition either way (std resets it for them).
    let supervises = match &cli.command {
        Command::Run(_) | Command::Bench(_) => true,
        Command::Profile(a) => !a.probe_only(),
        _ => false,
    };
    if !supervises {
        // SAFETY: setting a signal disposition while no other thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(None)
        .init();
    let result = match cli.command {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Map(a) => cmd::map::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Eval(a) => cmd::eval::run(a),
        Command::Profile(a) => cmd::profile::run(a).map(|code| std::process::exit(code)),
        Command::Ranks(a) => cmd::ranks::run(a),
        Command::Doctor(a) => cmd::doctor::run(a).map(|code| std::process::exit(code)),
        Command::Man(a) => cmd::man::run(a, Cli::command()),
    };
    if let Err(e) = result {
        say!("cmlb: error: {}", one_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line, skipping causes the message already quotes
/// (library errors such as "FILE: No such file" carry their source in their own text).
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use step::{TaskAction, WrapOpts};

    fn opts() -> WrapOpts {
        WrapOpts {
            cmlb: "/usr/bin/cmlb".into(),
            backend: Some("watch".into()),
            period: Some(7),
            duration: Some(2.5),
            prerun_secs: 4.0,
            run_anyway: true,
            max_runs: Some(9),
            bind: contract::BindMode::Preload,
            topology: "pack:1 numa:2 core:2 pu:1".into(),
            strategy: mapper::StrategySpec::parse("spectral:k=2").unwrap(),
        }
    }

    /// The words the SPANK plugin and `cmlb run` exec (`cmlb-step`'s `words.rs`) are written
    /// apart from the flags they name: parsed back here with the real command line, every
    /// option must land where it was meant, so a renamed flag fails this test, not a job.
    #[test]
    fn the_words_that_cross_exec_parse_back_to_what_they_carry() {
        let o = opts();
        let app = ["./app".to_string(), "-n".to_string()];
        let profile = TaskAction::Profile {
            dir: "/scratch/k".into(),
            ranks: None,
        };
        let words = profile.wrap_argv(&o).unwrap();
        let cli = Cli::try_parse_from(words.iter().chain(&app)).unwrap();
        let Command::Profile(a) = cli.command else {
            panic!("{words:?} is not `cmlb profile`")
        };
        assert_eq!(
            a.wrapped_for_test(),
            ("/scratch/k".into(), 7, 2.5, 9, true, true)
        );
        assert_eq!(a.backend_for_test(), "watch");

        let prerun = TaskAction::Prerun {
            dir: "/scratch/k".into(),
        };
        let words = prerun.wrap_argv(&o).unwrap();
        let cli = Cli::try_parse_from(words.iter().chain(&app)).unwrap();
        let Command::Run(a) = cli.command else {
            panic!("{words:?} is not `cmlb run`")
        };
        assert_eq!(a.placing.time, 4.0);
        assert_eq!(a.save_profile, Some("/scratch/k".into()));
        assert_eq!(a.placing.strategy, o.strategy);
        assert_eq!(a.placing.bind, contract::BindMode::Preload);
        assert_eq!(a.placing.topology, o.topology);
        assert_eq!(a.backend.as_deref(), Some("watch"));
        assert_eq!(a.period, Some(7));
        assert_eq!(a.command, app);
    }
}
