//! The webhook's status Lease renewal: how each tick went, so that an
//! updater that stopped evicting can be traced to replicas that stopped
//! renewing, and why.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// What one tick of the renewal did.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum StatusLeaseRenewal {
    /// Written: created or replaced.
    Success,
    /// Another replica wrote between the read and the write; the Lease is
    /// fresh anyway.
    Conflict,
    /// The apiserver refused or did not answer in time.
    Failure,
    /// This replica is not ready (`/readyz`), so nothing was written.
    NotReady,
}

impl StatusLeaseRenewal {
    const ALL: [Self; 4] = [Self::Success, Self::Conflict, Self::Failure, Self::NotReady];

    /// The label value this result is exported as.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Conflict => "conflict",
            Self::Failure => "failure",
            Self::NotReady => "not_ready",
        }
    }
}

impl EncodeLabelValue for StatusLeaseRenewal {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        encoder.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RenewalLabel {
    result: StatusLeaseRenewal,
}

/// Part of the webhook's registry ([`super::WebhookMetrics`]).
#[derive(Clone, Default)]
pub struct StatusLeaseMetrics {
    renewals: Family<RenewalLabel, Counter>,
}

impl super::Families for StatusLeaseMetrics {
    fn register(&self, registry: &mut super::RegistryBuilder) {
        registry.register(
            "nodescope_status_lease_renewals",
            "Ticks of the webhook's status Lease renewal, by result; the updater evicts only while some replica renews",
            self.renewals.clone(),
        );
    }
}

impl StatusLeaseMetrics {
    /// Every result's series, at 0 until counted.
    pub fn start(&self) {
        for result in StatusLeaseRenewal::ALL {
            let _ = self.renewals.get_or_create(&RenewalLabel { result });
        }
    }

    /// Counts one tick.
    pub fn renewal(&self, result: StatusLeaseRenewal) {
        self.renewals.get_or_create(&RenewalLabel { result }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::super::WebhookMetrics;
    use super::*;

    #[test]
    fn the_renewals_are_absent_until_the_renewal_starts_then_all_start_at_zero() {
        let m = WebhookMetrics::new("kube");
        assert!(
            !m.registry()
                .render()
                .contains("nodescope_status_lease_renewals_total{"),
            "{}",
            m.registry().render()
        );
        m.status_lease.start();
        m.status_lease.renewal(StatusLeaseRenewal::Success);
        let text = m.registry().render();
        for (result, count) in [
            ("success", 1),
            ("conflict", 0),
            ("failure", 0),
            ("not_ready", 0),
        ] {
            assert!(
                text.contains(&format!(
                    "nodescope_status_lease_renewals_total{{result=\"{result}\"}} {count}\n"
                )),
                "{text}"
            );
        }
    }
}
