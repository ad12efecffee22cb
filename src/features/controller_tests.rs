//! One pass against an in-memory apiserver that pages pods: a Feature
//! turning off with no use left goes `Off` only when every page was read.

use super::*;
use crate::features::fake_apiserver::{client, pods, Apiserver};
use serde_json::json;
use std::sync::Arc;

fn config() -> ControllerConfig {
    ControllerConfig {
        settle: Duration::from_secs(30),
        period: Duration::from_secs(10),
        min_interval: Duration::from_secs(5),
        instance: "test".to_owned(),
        lease: LeaseConfig {
            namespace: "nodescope-system".to_owned(),
            name: "nodescope-features".to_owned(),
            duration: Duration::from_secs(15),
        },
        announce: false,
    }
}

/// Feature balloon-pods, turning off since long past its settle time.
fn turning_off() -> Value {
    json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
           "metadata": {"namespace": "kube-system", "name": "balloon-pods", "generation": 1,
                        "resourceVersion": "5"},
           "spec": {"desired": "Disabled"},
           "status": {"state": "TurningOff", "lastTransitionTime": "2020-01-01T00:00:00Z"}})
}

/// Runs one pass; the Feature as the apiserver holds it after.
async fn pass_over(server: &Arc<Apiserver>) -> Value {
    server.features.lock().expect("lock").push(turning_off());
    let client = client(server);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "nodescope-features".to_owned(),
            instance: Some("test".to_owned()),
        },
    );
    let metrics = FeatureFamilies::new();
    let result = pass(&client, &recorder, &config(), &metrics, &|| true).await;
    assert!(result.is_ok(), "{:?}", result.err());
    let feature = server.features.lock().expect("lock")[0].clone();
    feature
}

fn status_writes(server: &Apiserver) -> usize {
    server
        .calls()
        .iter()
        .filter(|c| c.starts_with("PATCH ") && c.contains("/features/balloon-pods/status"))
        .count()
}

#[tokio::test]
async fn no_use_on_any_page_turns_the_feature_off_after_one_restart() {
    let server = Arc::new(Apiserver {
        expire: [1].into(),
        ..Apiserver::new(pods(1_200, 0))
    });
    let feature = pass_over(&server).await;
    assert_eq!(feature["status"]["state"], "Off");
    assert_eq!(status_writes(&server), 1);
    assert_eq!(server.pod_lists().len(), 5, "{:?}", server.pod_lists());
}

#[tokio::test]
async fn uses_on_the_last_page_keep_it_turning_off_and_are_counted() {
    let server = Arc::new(Apiserver::new(pods(1_200, 3)));
    let feature = pass_over(&server).await;
    assert_eq!(feature["status"]["state"], "TurningOff");
    assert_eq!(
        feature["status"]["transitionTasks"],
        json!([{"name": "nodescope-feature-balloon-pods", "count": 3,
                "description": "Pod default/pod-01197, Pod default/pod-01198, Pod default/pod-01199"}])
    );
}

#[tokio::test]
async fn a_list_cut_short_twice_writes_nothing_and_the_state_does_not_move() {
    let server = Arc::new(Apiserver {
        expire: [1, 3].into(),
        ..Apiserver::new(pods(1_200, 0))
    });
    let feature = pass_over(&server).await;
    assert_eq!(feature, turning_off());
    assert_eq!(status_writes(&server), 0, "{:?}", server.calls());
    assert_eq!(server.pod_lists().len(), 4);
}
