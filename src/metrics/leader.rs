//! `nodescope_leader{lease}`: whether this replica leads, for every
//! controller that is elected on a Lease.

use super::Families;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabel {
    lease: String,
}

/// The leader gauge. The Lease label comes from the process's own flags,
/// one per controller, so it cannot grow.
#[derive(Clone, Default)]
pub struct LeaderMetrics {
    leader: Family<LeaseLabel, Gauge>,
}

impl LeaderMetrics {
    /// The gauge for `lease` (`namespace/name`), at 0 until the election
    /// says otherwise.
    #[must_use]
    pub fn new(lease: &str) -> Self {
        let metrics = Self::default();
        metrics.leader(lease, false);
        metrics
    }

    /// Sets whether this replica leads on `lease` (`namespace/name`): a sum
    /// over the replicas other than 1 is an election gone wrong.
    pub fn leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabel {
                lease: lease.to_owned(),
            })
            .set(i64::from(leading));
    }
}

impl Families for LeaderMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_leader",
            "1 while this replica leads on the Lease (namespace/name), else 0",
            self.leader.clone(),
        );
    }
}
