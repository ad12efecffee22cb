//! `--missing-node-recommendation`, one value for `serve`, `dry-run` and
//! `update`, so that the webhook, its offline replay and the updater give
//! a pod whose node has no recommendation group the same resources.

use clap::ValueEnum;

/// `--missing-node-recommendation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MissingNode {
    /// Use the VPA's DaemonSet-wide `status.recommendation`, as AEP-10031
    /// does (and warn); unchanged when there is none.
    Aggregate,
    /// Leave the pod's resources unchanged (and warn): KEP-4943's reading.
    None,
}

impl From<MissingNode> for crate::mutate::MissingNodeRecommendation {
    fn from(m: MissingNode) -> Self {
        match m {
            MissingNode::None => Self::LeaveUnchanged,
            MissingNode::Aggregate => Self::Aggregate,
        }
    }
}
