//! A Feature's status as the controller reads and writes it: `spec.desired`,
//! the recorded `status` (unreadable fields count as absent) and the
//! server-side apply body of the controller's own fields. Pure: the
//! controller's edge ([`super::controller`]) sends what these build.

use super::lifecycle::{Desired, FeatureStatus, State};
use crate::json::str_at;
use serde_json::{json, Value};

/// `metadata.generation` (0 when absent).
#[must_use]
pub fn generation(feature: &Value) -> i64 {
    feature
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The server-side apply body of the controller's status fields. A field
/// that is `None` is left out, so the apply removes it (the controller owns
/// it), as the merge patch's `null` did.
#[must_use]
pub fn status_apply(namespace: &str, name: &str, status: &FeatureStatus) -> Value {
    let mut fields = serde_json::Map::new();
    if let Some(state) = status.state {
        fields.insert("state".to_owned(), json!(state.as_str()));
    }
    if let Some(time) = status.last_transition_time {
        fields.insert("lastTransitionTime".to_owned(), json!(time.to_string()));
    }
    fields.insert("transitionTasks".to_owned(), json!(status.transition_tasks));
    json!({
        "apiVersion": "featureflags.nodescope.dev/v1alpha1",
        "kind": "Feature",
        "metadata": {"namespace": namespace, "name": name},
        "status": fields,
    })
}

/// `spec.desired`, when it is one of the CRD's values.
#[must_use]
pub fn desired(feature: &Value) -> Option<Desired> {
    match str_at(feature, "/spec/desired") {
        "Enabled" => Some(Desired::Enabled),
        "Disabled" => Some(Desired::Disabled),
        _ => None,
    }
}

/// The status the Feature records; unreadable fields count as absent.
#[must_use]
pub fn recorded(feature: &Value) -> FeatureStatus {
    let state = match str_at(feature, "/status/state") {
        "On" => Some(State::On),
        "Off" => Some(State::Off),
        "TurningOn" => Some(State::TurningOn),
        "TurningOff" => Some(State::TurningOff),
        _ => None,
    };
    FeatureStatus {
        state,
        last_transition_time: str_at(feature, "/status/lastTransitionTime").parse().ok(),
        transition_tasks: feature
            .pointer("/status/transitionTasks")
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::TransitionTask;

    #[test]
    fn the_status_apply_names_the_feature_and_carries_only_the_controllers_fields() {
        let status = FeatureStatus {
            state: Some(State::TurningOff),
            last_transition_time: "2026-11-25T13:00:00Z".parse().ok(),
            transition_tasks: vec![TransitionTask {
                name: "p".to_owned(),
                count: 1,
                description: "VerticalPodAutoscaler a/b".to_owned(),
            }],
        };
        assert_eq!(
            status_apply("kube-system", "vpa-node-scope", &status),
            json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                   "metadata": {"namespace": "kube-system", "name": "vpa-node-scope"},
                   "status": {"state": "TurningOff", "lastTransitionTime": "2026-11-25T13:00:00Z",
                              "transitionTasks": [{"name": "p", "count": 1, "description": "VerticalPodAutoscaler a/b"}]}})
        );
        assert_eq!(
            status_apply("kube-system", "f", &FeatureStatus::default()),
            json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
                   "metadata": {"namespace": "kube-system", "name": "f"},
                   "status": {"transitionTasks": []}}),
            "an absent field is left out, so the apply removes what the controller owned"
        );
    }

    #[test]
    fn a_recorded_status_reads_back_what_the_patch_wrote_and_ignores_the_unknown() {
        let feature = json!({"spec": {"desired": "Disabled"},
            "status": {"state": "TurningOff", "lastTransitionTime": "2026-11-25T13:00:00Z",
                       "transitionTasks": [{"name": "p", "description": "d"}]}});
        assert_eq!(desired(&feature), Some(Desired::Disabled));
        assert_eq!(
            recorded(&feature),
            FeatureStatus {
                state: Some(State::TurningOff),
                last_transition_time: "2026-11-25T13:00:00Z".parse().ok(),
                transition_tasks: vec![TransitionTask {
                    name: "p".to_owned(),
                    count: 0,
                    description: "d".to_owned()
                }],
            }
        );
        let odd = json!({"spec": {"desired": "Maybe"}, "status": {"state": "Sideways", "lastTransitionTime": "soon"}});
        assert_eq!(desired(&odd), None);
        assert_eq!(recorded(&odd), FeatureStatus::default());
    }
}
