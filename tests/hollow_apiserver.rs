//! The scale bench's hollow apiserver pages and selects as
//! kube-apiserver does, and refuses what it cannot evaluate (a selector
//! ignored would serve more than a component asked for, and measure that).

#[path = "../benches/support/hollow/selector.rs"]
#[allow(dead_code)]
mod selector;
#[path = "../benches/support/hollow/store.rs"]
#[allow(dead_code)]
mod store;

use selector::*;
use serde_json::json;
use store::{Collection, Hollow, Query};

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn label_selectors_evaluate_as_the_apiserver_does() {
    let s = labels("app in (a, b),tier!=db,!gone,zone").unwrap();
    assert_eq!(s.len(), 4);
    assert!(matches_labels(&s, &pairs(&[("app", "a"), ("zone", "z1")])));
    assert!(!matches_labels(&s, &pairs(&[("app", "c"), ("zone", "z1")])));
    assert!(!matches_labels(
        &s,
        &pairs(&[("app", "a"), ("zone", "z"), ("gone", "")])
    ));
    assert!(!matches_labels(&s, &pairs(&[("app", "a")])));
    assert!(labels("a b c").is_err());
}

#[test]
fn field_selectors_refuse_fields_not_indexed() {
    let s = fields("spec.nodeName=n1,status.phase!=Succeeded").unwrap();
    let pod = |p: &str| match p {
        "spec.nodeName" => "n1".to_owned(),
        "status.phase" => "Running".to_owned(),
        _ => String::new(),
    };
    assert!(matches_fields(&s, pod));
    assert!(!matches_fields(&fields("spec.nodeName=n2").unwrap(), pod));
    assert!(fields("spec.schedulerName=x").is_err());
}

fn pod(namespace: &str, name: &str, node: &str, app: &str) -> Hollow {
    Hollow::of(
        &json!({"metadata": {"namespace": namespace, "name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}),
    )
}

/// Pages as kube-apiserver's: `limit` items, then a `continue` where the
/// next match is; the node index gives the same pages as a scan.
#[test]
fn lists_page_over_the_matches_only() {
    let pods = Collection::new(vec![
        pod("b", "p1", "n1", "web"),
        pod("a", "p2", "n2", "web"),
        pod("a", "p3", "n1", "db"),
        pod("a", "p1", "n1", "web"),
    ]);
    let names = |idx: &[usize]| -> Vec<String> {
        idx.iter()
            .map(|&i| format!("{}/{}", pods.items[i].namespace, pods.items[i].name))
            .collect()
    };
    let all = Query::default();
    let (first, next) = pods.page(&all, 0, 3);
    assert_eq!(names(&first), ["a/p1", "a/p2", "a/p3"]);
    assert_eq!(next, Some(3));
    assert_eq!(pods.page(&all, 3, 3), (vec![3], None));
    let on_n1 = Query {
        fields: fields("spec.nodeName=n1").unwrap(),
        labels: labels("app=web").unwrap(),
        ..Query::default()
    };
    let (first, next) = pods.page(&on_n1, 0, 1);
    assert_eq!(names(&first), ["a/p1"]);
    let (second, last) = pods.page(&on_n1, next.unwrap(), 1);
    assert_eq!(names(&second), ["b/p1"]);
    assert_eq!(last, None);
    let in_a = Query {
        namespace: Some("a".to_owned()),
        ..Query::default()
    };
    assert_eq!(pods.page(&in_a, 0, 0).0.len(), 3);
}
