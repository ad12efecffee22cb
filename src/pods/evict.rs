//! An eviction as the updater decided it. The eviction is preconditioned
//! on the pod's UID and the resourceVersion the decision read, as a resize
//! is ([`super::resize::resize_patch`]). A decision taken on a snapshot
//! older than the pod (a watch that fell behind or broke) is then refused
//! by the apiserver with 409, counted `Stale`, and made again on the next
//! pass from what the watch says then.

use kube::api::{DeleteParams, EvictParams, Preconditions};

/// The eviction of the pod with `uid` at `resource_version`, and no other.
#[must_use]
pub fn params(uid: &str, resource_version: &str) -> EvictParams {
    EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: Some(resource_version.to_owned()),
            }),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_eviction_holds_only_for_the_pod_version_the_pass_decided_on() {
        let params = super::params("0b5e-uid", "4711");
        let options = serde_json::to_value(params.delete_options).unwrap();
        assert_eq!(
            options["preconditions"],
            serde_json::json!({"uid": "0b5e-uid", "resourceVersion": "4711"})
        );
    }
}
