use clap::Args as ClapArgs;

#[derive(ClapArgs)]
pub struct Args {
    /// `live`, a path to an hwloc XML file, or an hwloc synthetic string ("pack:2 numa:2 core:8 pu:2").
    #[arg(long, default_value = "live")]
    pub topology: String,
    /// Restrict to these PU OS indexes (e.g. "0-3,8").
    #[arg(long)]
    pub cpuset: Option<String>,
}

pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("topology loading is not implemented yet")
}
