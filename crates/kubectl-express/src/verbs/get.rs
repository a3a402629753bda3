//! `kubectl express get CLUSTER [-w]`: the ExpressCluster, then every node in upgrade order
//! with its pod, as a tree; `-w` redraws on every change (watch-driven) and exits when the
//! cluster has settled: 0 done, 1 failed.

use std::process::ExitCode;

use express_api::Objects;

use crate::show::cluster::{self};
use crate::show::status::Outcome;
use crate::text::Style;
use express_client::connect::{ConnectArgs, Connection};
use express_client::exit::{Code, Exit};
use express_client::read::live;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The Express cluster (its clusterName).
    cluster: String,
    /// Redraw on every change; exit when the cluster has settled (0 done, 1 failed).
    #[arg(short = 'w', long)]
    watch: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(args: Args, style: Style) -> ExitCode {
    super::live("get", &args.connect, |c| async move {
        get(&c, &args.cluster, args.watch, style).await
    })
}

/// The tree once, or (`-w`) redrawn on every change until the cluster settles.
async fn get(c: &Connection, cluster: &str, watch: bool, style: Style) -> Result<ExitCode, Exit> {
    let namespace = c.namespace.as_str();
    let missing = || Exit::usage(live::no_cluster(namespace, cluster));
    let found = |objects: &Objects| {
        objects.express_cluster(namespace, cluster).is_some()
            || !objects.nodes_of(namespace, cluster).is_empty()
    };
    if !watch {
        let objects = live::load(&c.client, Some(namespace), "", live::Reading::Everything)
            .await
            .map_err(Exit::failure)?;
        if !found(&objects) {
            return Err(missing());
        }
        print!(
            "{}",
            cluster::render_tree(&objects, namespace, cluster, style)
        );
        return Ok(Code::Done.into());
    }
    let mut watched = live::Watched::start(&c.client, namespace);
    watched.ready().await.map_err(Exit::failure)?;
    let mut last = String::new();
    loop {
        let objects = watched.objects();
        if !found(&objects) {
            return Err(missing());
        }
        let tree = cluster::render_tree(&objects, namespace, cluster, style);
        if tree != last {
            if style.color {
                // Redraw in place on a terminal; plain output appends each drawing.
                print!("\x1b[2J\x1b[H");
            } else if !last.is_empty() {
                println!();
            }
            print!("{tree}");
            last = tree;
        }
        match cluster::settled(&objects, namespace, cluster) {
            Some(Outcome::Done) => return Ok(Code::Done.into()),
            Some(_) => return Ok(Code::Failed.into()),
            None => {}
        }
        watched.changed().await.map_err(Exit::failure)?;
    }
}
