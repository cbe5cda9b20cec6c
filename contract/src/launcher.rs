//! MPI launchers (`mpirun`, `mpiexec`) inside a Slurm job, and the ranks they fork.
//!
//! Under Slurm, `mpirun`/`mpiexec` start one launcher daemon per node with `srun` (Open MPI's
//! `orted`/`prted`, MPICH's `hydra_pmi_proxy`, MVAPICH's `mpispawn`) and fork the ranks from
//! it (or, on the first node, from `mpirun` itself). The plugin then sees a step of daemons,
//! not of ranks: it must leave that step exactly as it is ([`is_daemon`]). The ranks are
//! reached from the batch script instead: the plugin adds the preload library to the script's
//! `LD_PRELOAD` with [`env::RANK_WRAP`](crate::env::RANK_WRAP); in a process whose parent is a
//! launcher ([`parent_forks_ranks`]) and whose environment names its rank ([`rank_ids`]), the
//! preload re-executes the rank under those words (`cmlb profile` or `cmlb run --job-rank`).
//!
//! Also here: where the ranks of a job run ([`encode_hosts`]/[`decode_hosts`], one host per
//! rank, run-length encoded) and the check that a rank runs where that list says
//! ([`placement_agrees`]), so that a launcher that placed ranks otherwise (`--map-by node`, a
//! hostfile of the user's) is left alone rather than pinned by a plan made for other ranks.

/// Launcher daemons: the program of a Slurm step that is a launcher's, not the application.
pub const DAEMONS: &[&str] = &[
    "orted",
    "prted",
    "prte",
    "hydra_pmi_proxy",
    "hydra_bstrap_proxy",
    "pmi_proxy",
    "mpispawn",
];

/// Processes that fork MPI ranks: the daemons, and the launchers that start the ranks of their
/// own node themselves (Open MPI's `mpirun` does).
pub const RANK_PARENTS: &[&str] = &["mpirun", "mpiexec", "orterun", "prterun", "mpiexec.hydra"];

/// The file name of a program path, without directories.
fn base(prog: &str) -> &str {
    prog.rsplit('/').next().unwrap_or(prog)
}

/// `prog` (a path or a name) is a launcher daemon.
pub fn is_daemon(prog: &str) -> bool {
    DAEMONS.contains(&base(prog))
}

/// A process named `comm` (as `/proc/PID/comm` gives it: at most 15 bytes) forks MPI ranks.
pub fn forks_ranks(comm: &str) -> bool {
    let comm = comm.trim();
    // comm is cut to 15 bytes: compare with the names cut the same way.
    let cut = |n: &str| n.get(..15).unwrap_or(n).to_string();
    DAEMONS.iter().chain(RANK_PARENTS).any(|n| cut(n) == comm)
}

/// The calling process's parent forks MPI ranks (read from `/proc`).
pub fn parent_forks_ranks() -> bool {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    std::fs::read_to_string(format!("/proc/{ppid}/comm")).is_ok_and(|c| forks_ranks(&c))
}

/// The rank variables of Open MPI, MPICH/Intel MPI (hydra) and MVAPICH: rank, size, local
/// rank, local size. The first of each set makes a process a rank.
const RANK_VARS: &[[&str; 4]] = &[
    [
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ],
    ["PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"],
    [
        "MV2_COMM_WORLD_RANK",
        "MV2_COMM_WORLD_SIZE",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "MV2_COMM_WORLD_LOCAL_SIZE",
    ],
];

/// An environment block (`/proc/PID/environ`: `K=V` entries separated by NUL) that names a
/// rank: a rank's own children and shells inherit it; a launcher's does not hold it.
pub fn environ_names_a_rank(environ: &[u8]) -> bool {
    environ.split(|&b| b == 0).any(|kv| {
        RANK_VARS
            .iter()
            .map(|set| set[0])
            .any(|m| kv.len() > m.len() && kv.starts_with(m.as_bytes()) && kv[m.len()] == b'=')
    })
}

/// The calling process was started as an MPI rank by its launcher: its parent is a known
/// launcher or daemon, or — for launchers known by other names (`mpirun.openmpi`, `oshrun`, a
/// site's wrapper) — its parent's environment names no rank while its own does. Every rank of
/// a job must be recognised alike: in profile mode the MPI tracer's collective at
/// `MPI_Finalize` needs all of them. A rank's own children (their parent is a rank) are not.
pub fn started_as_rank() -> bool {
    if parent_forks_ranks() {
        return true;
    }
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    std::fs::read(format!("/proc/{ppid}/environ")).is_ok_and(|e| !environ_names_a_rank(&e))
}

/// A rank as its launcher's environment names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankIds {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: usize,
    /// Ranks in `MPI_COMM_WORLD`.
    pub size: usize,
    /// Index among the ranks of this node.
    pub local_rank: usize,
    /// Ranks on this node.
    pub local_size: usize,
}

/// The rank as [`RANK_VARS`] name it (Open MPI, MPICH/Intel MPI, MVAPICH, in that order);
/// `None` when no launcher set a complete, consistent set.
pub fn rank_ids(get: impl Fn(&str) -> Option<String>) -> Option<RankIds> {
    let num = |k: &str| get(k).and_then(|v| v.trim().parse::<usize>().ok());
    RANK_VARS.iter().find_map(|s| {
        let ids = RankIds {
            rank: num(s[0])?,
            size: num(s[1])?,
            local_rank: num(s[2])?,
            local_size: num(s[3])?,
        };
        (ids.rank < ids.size && ids.local_rank < ids.local_size && ids.local_size <= ids.size)
            .then_some(ids)
    })
}

/// Placeholder in [`env::RANK_WRAP`](crate::env::RANK_WRAP) words for the rank.
pub const RANK_WORD: &str = "{rank}";
/// Placeholder for the node the rank runs on (a node-local scratch directory names it).
pub const NODE_WORD: &str = "{node}";

/// The rank-wrap words with the placeholders filled in.
pub fn fill_words(words: &[String], rank: usize, node: &str) -> Vec<String> {
    words
        .iter()
        .map(|w| {
            w.replace(RANK_WORD, &rank.to_string())
                .replace(NODE_WORD, node)
        })
        .collect()
}

/// This node's names, most trusted first: the host name's first label (what Slurm's node
/// names usually are), the whole host name, then `SLURMD_NODENAME`. The host name comes first
/// because launchers forward their own
/// environment to the ranks (MPICH's hydra does), so `SLURMD_NODENAME` in a rank may name the
/// node `mpiexec` runs on.
pub fn node_names(slurmd_nodename: Option<String>) -> Vec<String> {
    let mut names = Vec::new();
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        if let Ok(h) = std::str::from_utf8(&buf[..end]) {
            names.push(h.split('.').next().unwrap_or(h).to_string());
            names.push(h.to_string());
        }
    }
    names.extend(slurmd_nodename);
    names.retain(|n| !n.is_empty());
    names.dedup();
    names
}

/// The name of this node in `hosts` (the first of [`node_names`] listed there), else its first
/// name (`None` only when it has none).
pub fn this_node(hosts: &[String], slurmd_nodename: Option<String>) -> Option<String> {
    let names = node_names(slurmd_nodename);
    names
        .iter()
        .find(|n| hosts.contains(n))
        .or(names.first())
        .cloned()
}

/// One host per rank, run-length encoded: `node1*4,node2*4` (a count of 1 is left out).
pub fn encode_hosts(hosts: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < hosts.len() {
        let n = hosts[i..].iter().take_while(|h| **h == hosts[i]).count();
        out.push(if n == 1 {
            hosts[i].clone()
        } else {
            format!("{}*{n}", hosts[i])
        });
        i += n;
    }
    out.join(",")
}

/// The inverse of [`encode_hosts`]; `None` on a malformed item or an empty list.
pub fn decode_hosts(text: &str) -> Option<Vec<String>> {
    let mut hosts = Vec::new();
    for item in text.split(',') {
        let (name, n) = match item.rsplit_once('*') {
            Some((name, n)) => (name, n.parse::<usize>().ok().filter(|&n| n > 0)?),
            None => (item, 1),
        };
        if name.is_empty() || hosts.len() + n > 1 << 24 {
            return None;
        }
        hosts.extend(std::iter::repeat_n(name.to_string(), n));
    }
    (!hosts.is_empty()).then_some(hosts)
}

/// The ranks `hosts` puts on `host`, ascending.
pub fn ranks_on(hosts: &[String], host: &str) -> Vec<usize> {
    (0..hosts.len()).filter(|&r| hosts[r] == host).collect()
}

/// The rank runs where `hosts` says: as many ranks as listed, its node holds as many as the
/// list gives it, and it is the `local_rank`-th of them.
pub fn placement_agrees(hosts: &[String], host: &str, ids: &RankIds) -> bool {
    let here = ranks_on(hosts, host);
    hosts.len() == ids.size
        && here.len() == ids.local_size
        && here.get(ids.local_rank) == Some(&ids.rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_is_told_from_its_children_by_the_parents_environment() {
        assert!(environ_names_a_rank(b"PATH=/bin\0OMPI_COMM_WORLD_RANK=3\0"));
        assert!(environ_names_a_rank(b"PMI_RANK=0"));
        assert!(environ_names_a_rank(b"A=1\0MV2_COMM_WORLD_RANK=7\0"));
        // A launcher's environment: no rank, even with look-alike names.
        assert!(!environ_names_a_rank(
            b"PATH=/bin\0OMPI_COMM_WORLD_RANKS=3\0"
        ));
        assert!(!environ_names_a_rank(b"X=PMI_RANK=1\0OMPI_MCA_x=1\0"));
        assert!(!environ_names_a_rank(b""));
        // This test's parent (cargo) names no rank, and its name is no launcher's.
        assert!(!parent_forks_ranks());
        assert!(started_as_rank(), "a parent without rank variables");
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn daemons_and_rank_parents_by_name() {
        assert!(is_daemon("/usr/bin/orted"));
        assert!(is_daemon("hydra_pmi_proxy"));
        assert!(!is_daemon("/home/u/orted-like-app"));
        assert!(!is_daemon("./app"));
        assert!(forks_ranks("orted\n"));
        assert!(forks_ranks("hydra_pmi_proxy"));
        assert!(forks_ranks("mpirun"));
        // "mpiexec.hydra" fits in comm; a 16-byte name is seen cut to 15.
        assert!(forks_ranks("mpiexec.hydra"));
        assert!(!forks_ranks("bash"));
        assert!(!forks_ranks("slurmstepd"));
    }

    #[test]
    fn rank_ids_of_each_launcher() {
        let ompi = [
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ];
        assert_eq!(
            rank_ids(env(&ompi)),
            Some(RankIds {
                rank: 5,
                size: 8,
                local_rank: 1,
                local_size: 4
            })
        );
        let hydra = [
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "1"),
        ];
        assert_eq!(rank_ids(env(&hydra)).map(|r| r.rank), Some(1));
        // Incomplete or inconsistent sets name no rank.
        assert_eq!(rank_ids(env(&hydra[..3])), None);
        let bad = [
            ("PMI_RANK", "2"),
            ("PMI_SIZE", "2"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "1"),
        ];
        assert_eq!(rank_ids(env(&bad)), None);
        assert_eq!(rank_ids(env(&[])), None);
    }

    #[test]
    fn hosts_round_trip_and_reject_garbage() {
        let h: Vec<String> = ["a", "a", "b", "a", "c", "c", "c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(encode_hosts(&h), "a*2,b,a,c*3");
        assert_eq!(decode_hosts(&encode_hosts(&h)), Some(h));
        for bad in ["", "a*0", "a*x", "*3", "a,,b", "a*99999999999"] {
            assert_eq!(decode_hosts(bad), None, "{bad}");
        }
    }

    #[test]
    fn placement_is_checked_against_the_launchers_own_ids() {
        let hosts = decode_hosts("n1*4,n2*4").unwrap();
        assert_eq!(ranks_on(&hosts, "n2"), vec![4, 5, 6, 7]);
        let id = |rank, local_rank| RankIds {
            rank,
            size: 8,
            local_rank,
            local_size: 4,
        };
        assert!(placement_agrees(&hosts, "n2", &id(5, 1)));
        // --map-by node put rank 2 second on n1: not where the list says.
        assert!(!placement_agrees(&hosts, "n1", &id(2, 1)));
        assert!(!placement_agrees(&hosts, "n3", &id(0, 0)));
        let mut short = id(5, 1);
        short.size = 6;
        assert!(!placement_agrees(&hosts, "n2", &short));
    }

    #[test]
    fn this_node_is_named_as_the_host_list_names_it() {
        let own = node_names(None);
        assert!(!own.is_empty(), "the host has a name");
        let short = own[0].clone();
        let hosts = vec!["elsewhere".to_string(), short.clone()];
        // A forwarded SLURMD_NODENAME of another node does not win over the host's own name.
        assert_eq!(
            this_node(&hosts, Some("elsewhere".into())),
            Some(short.clone())
        );
        // Where the host name is not listed, Slurm's name for the node is used.
        let slurm = vec!["n001".to_string()];
        assert_eq!(this_node(&slurm, Some("n001".into())), Some("n001".into()));
    }

    #[test]
    fn placeholders_are_filled() {
        let w: Vec<String> = ["cmlb", "--out", "/s/{node}/u/job/task{rank}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            fill_words(&w, 3, "node2")[2],
            "/s/node2/u/job/task3".to_string()
        );
    }
}
