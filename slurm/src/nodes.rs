//! Slurm's node text, read for rank mapping: hostlists (`node[01-04,7],big1`), the
//! `NAMES:SLOTS` / `MxS` machine list of `cmlb ranks --nodes`, and the switch tree of a
//! `topology.conf`. The rank mapper (`mapper::ranks`) takes the resulting [`Cluster`] and knows
//! no Slurm syntax.

use mapper::ranks::{Cluster, Machine};
use mapper::{MapError, Result};

/// The most hosts a hostlist may name: the ranges' sum is bounded before it is allocated.
pub const MAX_HOSTS: usize = 1 << 20;

/// Expand one Slurm hostlist (`node[01-04,7],big1`) into names, keeping zero padding.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    let mut items = Vec::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let bad = || MapError::input("hostlist", format!("'{item}' is not NAME or NAME[a-b,c]"));
        let too_many = || {
            MapError::input(
                "hostlist",
                format!("'{item}' takes the list past {MAX_HOSTS} hosts"),
            )
        };
        match item.split_once('[') {
            None if out.len() >= MAX_HOSTS => return Err(too_many()),
            None => out.push(item.to_string()),
            Some((pre, rest)) => {
                let (ranges, post) = rest.split_once(']').ok_or_else(bad)?;
                for r in ranges.split(',') {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let width = a.len();
                    let (x, y): (u64, u64) =
                        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                    if x > y {
                        return Err(bad());
                    }
                    if y - x >= MAX_HOSTS.saturating_sub(out.len()) as u64 {
                        return Err(too_many());
                    }
                    for k in x..=y {
                        out.push(format!("{pre}{k:0width$}{post}"));
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(MapError::input("hostlist", "empty"));
    }
    Ok(out)
}

/// `NAMES:SLOTS[,NAMES:SLOTS...]` with Slurm hostlists (`node[1-4]:16,big1:32`), or `MxS` for
/// M machines `node0..` of S slots.
pub fn parse_nodes(spec: &str) -> Result<Cluster> {
    let bad = |m: String| MapError::input(format!("--nodes '{spec}'"), m);
    let mut machines = Vec::new();
    if let Some((m, s)) = spec
        .split_once('x')
        .filter(|(m, _)| m.parse::<usize>().is_ok())
    {
        let (m, s): (usize, usize) = (
            m.parse().map_err(|_| bad("bad machine count".into()))?,
            s.parse()
                .map_err(|_| bad(format!("'{s}' is not a slot count")))?,
        );
        if m == 0 || s == 0 || m > 1 << 16 {
            return Err(bad("expected 1..65536 machines of >= 1 slot".into()));
        }
        for k in 0..m {
            machines.push(Machine {
                name: format!("node{k}"),
                slots: s,
            });
        }
    } else {
        // Split on the commas outside brackets, then NAME:SLOTS.
        let mut depth = 0;
        let mut parts = vec![String::new()];
        for c in spec.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(String::new());
                    continue;
                }
                _ => {}
            }
            parts.last_mut().expect("non-empty").push(c);
        }
        for p in parts.iter().filter(|p| !p.trim().is_empty()) {
            let (names, slots) = p
                .rsplit_once(':')
                .ok_or_else(|| bad(format!("'{p}' has no :SLOTS")))?;
            let slots: usize = slots
                .trim()
                .parse()
                .ok()
                .filter(|&s| s > 0)
                .ok_or_else(|| bad(format!("'{slots}' is not a slot count >= 1")))?;
            for name in expand_hostlist(names).map_err(|e| bad(e.to_string()))? {
                machines.push(Machine { name, slots });
            }
        }
    }
    if machines.is_empty() {
        return Err(bad("no machines".into()));
    }
    Ok(Cluster {
        machines,
        switches: Vec::new(),
    })
}

/// Add the switch tree of a Slurm `topology.conf` (`SwitchName=s1 Nodes=node[1-4]`,
/// `SwitchName=top Switches=s[1-2]`) to `cluster`. Nodes of the job that no switch names are
/// an error; `what` (the file) and the line number name the place of a malformed line.
pub fn with_topology_conf(cluster: Cluster, text: &str, what: &str) -> Result<Cluster> {
    let mut sw: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut name = None;
        let (mut nodes, mut subs) = (Vec::new(), Vec::new());
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                MapError::input(
                    format!("{what}:{}", i + 1),
                    format!("'{kv}' is not Key=Value"),
                )
            })?;
            match k.to_ascii_lowercase().as_str() {
                "switchname" => name = Some(v.to_string()),
                "nodes" => nodes = expand_hostlist(v)?,
                "switches" => subs = expand_hostlist(v)?,
                _ => {} // LinkSpeed and the like do not change the tree.
            }
        }
        let name = name.ok_or_else(|| {
            MapError::input(format!("{what}:{}", i + 1), "line has no SwitchName=")
        })?;
        sw.push((name, nodes, subs));
    }
    cluster.with_switches(&sw, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_adding_up_past_the_limit_are_refused_before_allocating() {
        // Found writing the slurm_layout fuzz target: each range was bounded, their sum not.
        let list = ["n[0-1048575]"; 2].join(",");
        let e = expand_hostlist(&list).unwrap_err().to_string();
        assert_eq!(
            e,
            "hostlist: 'n[0-1048575]' takes the list past 1048576 hosts"
        );
        assert_eq!(expand_hostlist("n[1-1048576]").unwrap().len(), MAX_HOSTS);
        let e = expand_hostlist("n[1-1048576],big").unwrap_err().to_string();
        assert_eq!(e, "hostlist: 'big' takes the list past 1048576 hosts");
    }

    #[test]
    fn hostlists_expand_with_padding() {
        assert_eq!(
            expand_hostlist("n[08-10,3],big").unwrap(),
            ["n08", "n09", "n10", "n3", "big"]
        );
        let c = parse_nodes("node[1-2]:4,fat:8").unwrap();
        assert_eq!(c.slots(), 16);
        assert_eq!(c.machines[1].name, "node2");
        assert_eq!(parse_nodes("3x2").unwrap().machines[2].name, "node2");
        assert!(parse_nodes("node1")
            .unwrap_err()
            .to_string()
            .contains("no :SLOTS"));
        assert!(expand_hostlist("n[3-1]").is_err());
    }

    #[test]
    fn topology_conf_gives_the_switch_tree() {
        let conf = "# site tree\nSwitchName=s1 Nodes=node[0-1] LinkSpeed=100\n\
                    SwitchName=s2 Nodes=node[2-3]\nswitchname=top Switches=s[1-2]\n";
        let c = with_topology_conf(parse_nodes("4x8").unwrap(), conf, "t").unwrap();
        assert_eq!(c.switches.len(), 3);
        assert_eq!(c.switches[0].machines, [0, 1]);
        assert_eq!(c.switches[2].switches, [0, 1]);
        assert_eq!(c.paths(), [vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]]);
        let e = with_topology_conf(
            parse_nodes("4x8").unwrap(),
            "SwitchName=s1 Nodes=node[0-1]\n",
            "t.conf",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "t.conf: node node2 of the job is under no switch");
        let e = with_topology_conf(
            parse_nodes("1x8").unwrap(),
            "\nSwitchName=s1 Nodes\n",
            "t.conf",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "t.conf:2: 'Nodes' is not Key=Value");
        let e = with_topology_conf(parse_nodes("1x8").unwrap(), "Nodes=node0\n", "t.conf")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.conf:1: line has no SwitchName=");
    }

    #[test]
    fn machine_counts_are_bounded() {
        for bad in ["0x4", "4x0", "70000x1", "a:0", "a:x", ""] {
            assert!(parse_nodes(bad).is_err(), "{bad}");
        }
    }
}
