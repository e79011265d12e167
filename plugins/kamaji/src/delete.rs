//! `kubectl kamaji delete CONTROL_PLANE [--yes] [--wait]`: the KamajiControlPlane and the
//! cluster of the same name (`common::tenant_delete` says how, and what `--wait` waits for).

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{KubeFlags, parse_duration};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kclient::teardown;

use crate::common::tenant_delete::Deletion;

#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    /// The KamajiControlPlane (the cluster of the same name goes with it)
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// Do not ask (needed without a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Wait until everything is gone and the DataStore is cleaned
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    if !args.yes {
        render::require_terminal(
            "delete",
            format!(
                "pass --yes (kubectl kamaji status {} shows what goes)",
                args.name
            ),
        )?;
    }
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let d = Deletion::plan(&conn, &apis, &args.name).await?;
    if d.resuming() {
        // An interrupted delete (Ctrl-C during --wait): what it confirmed is under way; this
        // run deletes again what is not deleting yet and follows the rest.
        render::info(&format!(
            "KamajiControlPlane {} is gone already; its teardown is under way, left: {}",
            d.t.name,
            teardown::remaining(&conn, &d.td).await?.join(", ")
        ));
    } else {
        d.show();
        if !args.yes && !render::confirm(&format!("Delete {} and its cluster?", d.t.name))? {
            return Err(Error::other("aborted: nothing was deleted"));
        }
    }
    d.delete(&conn).await?;
    if !args.wait {
        return Ok(());
    }
    render::line(&d.wait(&conn, &apis, args.timeout).await?);
    Ok(())
}
