//! A period's findings do not depend on how the objects were paged, and a
//! list cut short fails exactly the Features that needed it.

use super::*;
use crate::features::fake_apiserver::{client, pods, Apiserver};
use crate::features::transition_tasks;
use crate::params::NoInputs;
use std::sync::Arc;

fn shipped(name: &str) -> Value {
    crate::features::owned::features()
        .into_iter()
        .find(|f| str_at(f, "/metadata/name") == name)
        .unwrap_or_else(|| panic!("no shipped Feature {name}"))
}

fn bundle() -> PolicySet {
    crate::policy::bundle::policy_set().unwrap_or_else(|e| panic!("the bundle loads: {e}"))
}

/// Eleven VPAs, from `vpa-10` down to `vpa-00`: those whose number is not
/// a multiple of 3 are scoped (7 uses), the even ones carry groups.
fn vpas() -> Listed {
    let objects = (0..11)
        .rev()
        .map(|i| {
            let mut object = json!({
                "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
                "metadata": {"namespace": "monitoring", "name": format!("vpa-{i:02}"),
                             "resourceVersion": format!("{}", 40 + i), "uid": format!("uid-{i}")},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}},
            });
            if i % 3 != 0 {
                object["spec"]["scope"] = json!("node");
            }
            if i % 2 == 0 {
                object["status"] = json!({"recommendationGroups": [{"scopeValue": "node-a"}]});
            }
            object
        })
        .collect();
    Listed {
        group: "autoscaling.k8s.io".to_owned(),
        version: "v1".to_owned(),
        resource: "verticalpodautoscalers".to_owned(),
        namespaced: true,
        objects,
    }
}

#[test]
fn pages_of_four_find_the_uses_and_patches_one_whole_list_finds() {
    let policies = bundle();
    let scope = shipped("vpa-node-scope");
    let balloons = shipped("balloon-pods");
    let rules = cleanup::rules(&scope).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rules.len(), 2, "{rules:?}");
    let jobs = [
        Job {
            feature: &scope,
            cleanup: rules.clone(),
        },
        Job {
            feature: &balloons,
            cleanup: Vec::new(),
        },
    ];
    let whole = vpas();
    let mut once = vec![Found::default(); 2];
    evaluate_page(&policies, &jobs, &whole, &NoInputs, &mut once).expect("evaluated");
    let mut paged = vec![Found::default(); 2];
    for chunk in whole.objects.chunks(4) {
        let page = Listed {
            objects: chunk.to_vec(),
            ..whole.clone()
        };
        evaluate_page(&policies, &jobs, &page, &NoInputs, &mut paged).expect("evaluated");
    }
    for found in once.iter_mut().chain(paged.iter_mut()) {
        found.finish();
    }
    assert_eq!(paged, once);

    // And both are what the whole-list functions say.
    let all = std::slice::from_ref(&whole);
    let uses = find_uses(&policies, &scope, all, &NoInputs).expect("uses");
    assert_eq!(paged[0].uses.total(), 7);
    assert_eq!(paged[0].uses.tasks(), transition_tasks(&uses));
    assert_eq!(
        paged[0].uses.tasks()[0].description,
        "VerticalPodAutoscaler monitoring/vpa-01, VerticalPodAutoscaler monitoring/vpa-02, \
         VerticalPodAutoscaler monitoring/vpa-04 and 4 more"
    );
    assert_eq!(paged[0].patches, cleanup::plan(&rules, &uses, all));
    // 7 scopes and the groups of the 3 even scoped ones (2, 4, 8, 10: 4).
    assert_eq!(paged[0].patches.len(), 11);
    assert_eq!(paged[1], Found::default());
}

#[test]
fn tallies_of_two_resources_merge_into_the_tally_of_both() {
    let policies = bundle();
    let scope = shipped("vpa-node-scope");
    let whole = vpas();
    let (first, second) = whole.objects.split_at(5);
    let uses = |objects: &[Value]| {
        let page = Listed {
            objects: objects.to_vec(),
            ..whole.clone()
        };
        find_uses(&policies, &scope, &[page], &NoInputs).expect("uses")
    };
    let mut merged = UseTally::default();
    for part in [first, second] {
        let mut one = UseTally::default();
        one.add(uses(part));
        merged.merge(one);
    }
    let mut both = UseTally::default();
    both.add(uses(&whole.objects));
    assert_eq!(merged, both);
    assert_eq!(merged.total(), 7);
}

#[tokio::test]
async fn a_second_expired_token_fails_the_features_that_list_pods_and_only_them() {
    let balloons = shipped("balloon-pods");
    let scope = shipped("vpa-node-scope");
    let jobs = [
        Job {
            feature: &balloons,
            cleanup: Vec::new(),
        },
        Job {
            feature: &scope,
            cleanup: Vec::new(),
        },
    ];
    let paged = Arc::new(Apiserver::new(pods(1_200, 3)));
    let period = read(&client(&paged), &jobs).await.expect("read");
    let found: Vec<Found> = period
        .found
        .into_iter()
        .map(|f| f.expect("read whole"))
        .collect();
    assert_eq!(found[0].uses.total(), 3);
    assert_eq!(
        found[0].uses.tasks()[0].description,
        "Pod default/pod-01197, Pod default/pod-01198, Pod default/pod-01199"
    );
    assert_eq!(paged.pod_lists().len(), 3);
    let whole = Arc::new(Apiserver {
        one_page: true,
        ..Apiserver::new(pods(1_200, 3))
    });
    let once = read(&client(&whole), &jobs).await.expect("read");
    let once: Vec<Found> = once
        .found
        .into_iter()
        .map(|f| f.expect("read whole"))
        .collect();
    assert_eq!(once, found);

    let cut = Arc::new(Apiserver {
        expire: [1, 3].into(),
        ..Apiserver::new(pods(1_200, 3))
    });
    let period = read(&client(&cut), &jobs).await.expect("read");
    match &period.found[0] {
        Err(reason) => assert!(
            reason.contains("pods (v1)") && reason.contains("410"),
            "{reason}"
        ),
        Ok(found) => panic!("a list cut short was taken for {} uses", found.uses.total()),
    }
    // vpa-node-scope lists VPAs, which this apiserver does not serve.
    assert_eq!(period.found[1].as_ref().ok(), Some(&Found::default()));
}
