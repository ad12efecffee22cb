//! Optional kinds: a kind defined by a CRD that a cluster may not have
//! installed. A component that finds one missing treats it as "none of
//! them", says so once, and says so again when the kind appears; it never
//! stalls or warns once a pass.

use std::collections::HashSet;
use std::sync::Mutex;

/// Whether `error` says the apiserver does not serve the resource (404):
/// for a CRD kind, its CRD is not installed.
#[must_use]
pub fn is_not_served(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// The kinds found missing so far. Process-wide on purpose: it only
/// decides whether a log line is news, and every call site of a process
/// asks about the same cluster.
static ABSENT: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// Records whether `kind` (a resource, as `features.featureflags.nodescope.dev`)
/// was served by the last call that used it, logging each change once.
pub fn note(kind: &'static str, served: bool) {
    let mut absent = ABSENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let absent = absent.get_or_insert_with(HashSet::new);
    if served {
        if absent.remove(kind) {
            tracing::info!(%kind, "the kind is served now (its CRD was installed)");
        }
    } else if absent.insert(kind) {
        tracing::info!(%kind, "the kind is not served (no CRD): none of them until it is installed");
    }
}
