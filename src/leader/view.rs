//! What a replica last saw of the Lease through its own watch, and the
//! decisions made from that alone, so that they are tested without a
//! cluster.

use k8s_openapi::api::coordination::v1::Lease;
use std::time::{Duration, SystemTime};

/// One version of the Lease, as far as the election cares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Seen {
    /// `holderIdentity`; empty counts as none, as in client-go.
    pub holder: Option<String>,
    /// `renewTime` + `leaseDurationSeconds`, when both are set: until then
    /// no follower takes the Lease.
    pub expiry: Option<SystemTime>,
}

impl Seen {
    #[must_use]
    pub fn of(lease: &Lease) -> Self {
        let Some(spec) = &lease.spec else {
            return Seen::default();
        };
        let expiry = match (&spec.renew_time, spec.lease_duration_seconds) {
            (Some(renewed), Some(seconds)) => u64::try_from(seconds)
                .ok()
                .and_then(|s| SystemTime::from(renewed.0).checked_add(Duration::from_secs(s))),
            _ => None,
        };
        Seen {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            expiry,
        }
    }

    /// Nobody holds it: released, cleared after expiry, or never taken. A
    /// follower takes it now rather than at the expiry it read before.
    #[must_use]
    pub fn is_free(&self) -> bool {
        self.holder.is_none()
    }

    /// Held by `identity` and not expired at `now`.
    #[must_use]
    pub fn held_by(&self, identity: &str, now: SystemTime) -> bool {
        self.holder.as_deref() == Some(identity) && self.expiry.is_some_and(|e| now < e)
    }
}

/// Whether `identity` leads at `now`: the crate holds the Lease for it
/// (`holding`) and the newest version seen agrees and has not expired. The
/// crate alone can be wrong for as long as a renewal hangs; the watch alone
/// is ahead of the crate for the moment between its lock and its reply.
#[must_use]
pub fn leads(holding: bool, seen: Option<&Seen>, identity: &str, now: SystemTime) -> bool {
    holding && seen.is_some_and(|s| s.held_by(identity, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: Option<&str>, seconds: Option<i32>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed.and_then(|r| r.parse().ok()).map(MicroTime),
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    fn at(text: &str) -> SystemTime {
        text.parse::<k8s_openapi::jiff::Timestamp>()
            .map(SystemTime::from)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    #[test]
    fn a_held_lease_expires_its_duration_after_the_last_renewal() {
        let seen = Seen::of(&lease(
            Some("b"),
            Some("2026-05-01T10:00:00.250000Z"),
            Some(3),
        ));
        assert_eq!(
            seen,
            Seen {
                holder: Some("b".to_owned()),
                expiry: Some(at("2026-05-01T10:00:03.250000Z")),
            }
        );
        assert!(!seen.is_free());
        assert!(seen.held_by("b", at("2026-05-01T10:00:03.249999Z")));
        assert!(!seen.held_by("b", at("2026-05-01T10:00:03.250000Z")));
        assert!(!seen.held_by("c", at("2026-05-01T10:00:01Z")));
    }

    #[test]
    fn a_released_or_empty_lease_is_free_and_held_by_nobody() {
        for released in [
            lease(None, None, None),
            lease(Some(""), Some("2026-05-01T10:00:00Z"), Some(3)),
            Lease::default(),
        ] {
            let seen = Seen::of(&released);
            assert!(seen.is_free(), "{released:?}");
            assert!(
                !seen.held_by("", at("2026-05-01T10:00:01Z")),
                "{released:?}"
            );
        }
        // A holder without a renewal time never counts as held.
        let odd = Seen::of(&lease(Some("b"), None, Some(3)));
        assert_eq!(odd.expiry, None);
        assert!(!odd.is_free());
        assert!(!odd.held_by("b", at("2026-05-01T10:00:01Z")));
    }

    #[test]
    fn a_replica_leads_only_while_the_crate_and_the_newest_lease_agree() {
        let now = at("2026-05-01T10:00:01Z");
        let mine = Seen::of(&lease(Some("b"), Some("2026-05-01T10:00:00Z"), Some(3)));
        let theirs = Seen::of(&lease(Some("c"), Some("2026-05-01T10:00:00Z"), Some(3)));
        assert!(leads(true, Some(&mine), "b", now));
        // The crate has not locked yet, or lost the Lease.
        assert!(!leads(false, Some(&mine), "b", now));
        // The crate still believes it holds what another now holds, or
        // what was cleared, or nothing was seen yet.
        assert!(!leads(true, Some(&theirs), "b", now));
        assert!(!leads(true, Some(&Seen::default()), "b", now));
        assert!(!leads(true, None, "b", now));
        // The last renewal seen has expired: a follower may take over.
        assert!(!leads(true, Some(&mine), "b", at("2026-05-01T10:00:03Z")));
    }
}
