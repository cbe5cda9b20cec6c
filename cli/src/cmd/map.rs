use clap::Args as ClapArgs;

#[derive(ClapArgs)]
pub struct Args {}

pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("map is not implemented yet")
}
