//! `nodescope balloon`: node resizing by balloon (KEP-5620). `status` shows
//! every node with a balloon (from the cluster, or offline from
//! `--store file:DIR`); `set` writes a Node's usable size; `controller`
//! resizes the balloons to match.

pub mod controller;
pub mod set;
pub mod status;

pub use status::{gather, render, run_status_cluster, run_status_offline, StatusArgs};

use clap::{Args, Subcommand};
use std::process::ExitCode;

/// `nodescope balloon`.
#[derive(Debug, Args, Clone)]
pub struct BalloonArgs {
    #[command(subcommand)]
    pub command: BalloonCommand,
}

/// What `nodescope balloon` does.
#[derive(Debug, Subcommand, Clone)]
pub enum BalloonCommand {
    /// NODE, ALLOCATABLE, BALLOON, USABLE, REQUESTED (by other pods), FREE,
    /// STATE and REASON of every node with a balloon or a usable size; each
    /// value is cpu/memory. With --exit-code, exit 1 when a node is
    /// Refused, Infeasible or Invalid.
    Status(StatusArgs),
    /// Set a Node's usable size (its annotations); the balloon controller
    /// resizes its balloon to match.
    Set(set::SetArgs),
    /// Resize every node's balloon to its usable size, as the leader of
    /// its replicas.
    Controller(Box<controller::ControllerArgs>),
}

/// Runs a `balloon` command against the cluster.
///
/// # Errors
/// As the command says.
pub async fn run_cluster(args: &BalloonArgs) -> Result<ExitCode, String> {
    match &args.command {
        BalloonCommand::Status(status) => run_status_cluster(status).await,
        BalloonCommand::Set(set) => set::run_set(set).await,
        BalloonCommand::Controller(controller) => controller::run(controller).await,
    }
}
