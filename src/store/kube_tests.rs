//! Tests of the watch state on recorded watch events: when snapshots are
//! published, and what a broken watch or relist keeps.

use super::*;
use serde_json::json;
use std::sync::Mutex;

/// A VPA as a list page or watch event carries it: no `apiVersion` or
/// `kind`, which the watch they came from gives.
fn vpa_named(name: &str, cpu: &str) -> ObjectText {
    ObjectText::from_value(&json!({
        "metadata": {"name": name, "namespace": "monitoring", "resourceVersion": "10"},
        "spec": {"scope": "node", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter"}},
        "status": {"recommendationGroups": [{"scopeValue": "node-a-1", "containerRecommendations": [
            {"containerName": "node-exporter", "target": {"cpu": cpu, "memory": "256Mi"}}]}]}
    }))
    .unwrap()
}

fn vpa(cpu: &str) -> ObjectText {
    vpa_named("node-exporter", cpu)
}

fn namespace(name: &str) -> ObjectText {
    ObjectText::from_value(&json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}
    }))
    .unwrap()
}

fn kinds() -> Vec<WatchedKind> {
    default_kinds(None, &[])
}

fn tagged(index: usize, event: Result<Event<ObjectText>, watcher::Error>) -> TaggedEvent {
    (index, kinds()[index].clone(), event)
}

/// The first full list of every kind: a VPA and a namespace.
fn initial_sync() -> Vec<TaggedEvent> {
    let mut events = Vec::new();
    for index in 0..kinds().len() {
        events.push(tagged(index, Ok(Event::Init)));
        match index {
            0 => events.push(tagged(0, Ok(Event::InitApply(vpa("150m"))))),
            2 => events.push(tagged(2, Ok(Event::InitApply(namespace("monitoring"))))),
            _ => {}
        }
        events.push(tagged(index, Ok(Event::InitDone)));
    }
    events
}

fn target_cpu(snapshot: &Snapshot) -> Option<String> {
    let vpa = snapshot.vpa_for("monitoring", "node-exporter")?;
    let recs = vpa.recommendations.group("node-a-1")?;
    let container = "node-exporter";
    let (_, cpu) = recs.target(container).find(|(r, _)| *r == "cpu")?;
    Some(cpu.to_string())
}

/// Runs the recorded `events`; returns every published snapshot's cpu
/// target and whether `on_synced` ran.
async fn replay(events: Vec<TaggedEvent>, metrics: &StoreMetrics) -> (Vec<Option<String>>, bool) {
    let published = Mutex::new(Vec::new());
    let synced = std::cell::Cell::new(false);
    apply_events(
        stream::iter(events),
        WatchState::new(kinds().len()),
        metrics.clone(),
        |s| published.lock().unwrap().push(target_cpu(&s)),
        || synced.set(true),
    )
    .await;
    (published.into_inner().unwrap(), synced.get())
}

#[tokio::test]
async fn publishes_only_after_every_kind_finished_its_first_list() {
    let metrics = StoreMetrics::new("kube");
    let mut partial = initial_sync();
    partial.pop();
    let (published, synced) = replay(partial, &metrics).await;
    assert!(published.is_empty());
    assert!(!synced);
    let (published, synced) = replay(initial_sync(), &metrics).await;
    assert_eq!(published, vec![Some("150m".to_owned())]);
    assert!(synced);
}

#[tokio::test]
async fn watch_errors_keep_the_last_snapshot_and_new_data_is_served_after_recovery() {
    let metrics = StoreMetrics::new("kube");
    let mut events = initial_sync();
    // The watch breaks (410 Gone, then a failed reconnect) ...
    events.push(tagged(0, Err(watcher::Error::NoResourceVersion)));
    events.push(tagged(
        0,
        Err(watcher::Error::WatchError(Box::new(
            kube::core::Status::failure("too old resource version", "Expired").with_code(410),
        ))),
    ));
    // ... and the watcher relists with new data.
    events.push(tagged(0, Ok(Event::Init)));
    events.push(tagged(0, Ok(Event::InitApply(vpa("175m")))));
    events.push(tagged(0, Ok(Event::InitDone)));
    let (published, synced) = replay(events, &metrics).await;
    // One rebuild for the burst; the errors alone never publish an empty store.
    assert_eq!(published.last(), Some(&Some("175m".to_owned())));
    assert!(published.iter().all(Option::is_some), "{published:?}");
    assert!(synced);
    assert_eq!(metrics.errors("kube"), 2);
}

#[test]
fn a_relist_broken_midway_keeps_the_old_view_and_its_partial_objects_never_leak() {
    let metrics = StoreMetrics::new("kube");
    let ghost = vpa_named("ghost", "999m");
    let mut events = initial_sync();
    let synced_at = events.len();
    // A relist starts, delivers part of the list, and the connection drops.
    events.push(tagged(0, Ok(Event::Init)));
    events.push(tagged(0, Ok(Event::InitApply(ghost))));
    events.push(tagged(0, Ok(Event::InitApply(vpa("160m")))));
    events.push(tagged(
        0,
        Err(watcher::Error::WatchFailed(kube::Error::Service(
            "connection reset by peer".into(),
        ))),
    ));
    // The other kinds keep changing meanwhile.
    events.push(tagged(2, Ok(Event::Apply(namespace("other")))));
    // The watcher starts the relist over; this time it completes.
    events.push(tagged(0, Ok(Event::Init)));
    events.push(tagged(0, Ok(Event::InitApply(vpa("170m")))));
    events.push(tagged(0, Ok(Event::InitDone)));

    // Applied one at a time, so every intermediate view is checked.
    let mut state = WatchState::new(kinds().len());
    let mut seen = Vec::new();
    for (i, (index, kind, event)) in events.into_iter().enumerate() {
        handle(&mut state, index, &kind, event, &metrics);
        if i + 1 >= synced_at {
            assert!(state.synced());
            let snapshot = state.snapshot();
            // Never the half list, never the ghost, never empty.
            assert_eq!(snapshot.vpa_count(), 1, "after event {i}");
            seen.push(target_cpu(&snapshot).unwrap_or_default());
        }
    }
    let last = seen.len() - 1;
    assert!(seen[..last].iter().all(|cpu| cpu == "150m"), "{seen:?}");
    assert_eq!(seen[last], "170m");
    assert_eq!(metrics.errors("kube"), 1);
}

#[test]
fn relist_drops_objects_deleted_while_disconnected() {
    let mut state = WatchState::new(1);
    state.apply(0, &kinds()[0], Event::Init);
    state.apply(0, &kinds()[0], Event::InitApply(vpa("150m")));
    state.apply(0, &kinds()[0], Event::InitDone);
    assert_eq!(state.snapshot().vpa_count(), 1);
    state.apply(0, &kinds()[0], Event::Init);
    // Until the relist is done, the old view stays in service.
    assert_eq!(state.snapshot().vpa_count(), 1);
    state.apply(0, &kinds()[0], Event::InitDone);
    assert_eq!(state.snapshot().vpa_count(), 0);
}

#[test]
fn apply_and_delete_update_the_view() {
    let mut state = WatchState::new(1);
    state.apply(0, &kinds()[0], Event::InitDone);
    let object = vpa("150m");
    assert!(state.apply(0, &kinds()[0], Event::Apply(object.clone())));
    assert_eq!(target_cpu(&state.snapshot()).as_deref(), Some("150m"));
    assert!(state.apply(0, &kinds()[0], Event::Delete(object)));
    assert_eq!(state.snapshot().vpa_count(), 0);
}

fn not_found() -> watcher::Error {
    watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
        kube::core::Status::failure(
            "the server could not find the requested resource",
            "NotFound",
        )
        .with_code(404),
    )))
}

#[tokio::test]
async fn a_kind_whose_crd_is_absent_is_none_of_them_and_the_store_still_syncs() {
    let metrics = StoreMetrics::new("kube");
    let feature = kinds()
        .iter()
        .position(|k| k.kind == "Feature")
        .expect("Features are watched");
    let mut events: Vec<TaggedEvent> = initial_sync()
        .into_iter()
        .filter(|(index, _, _)| *index != feature)
        .collect();
    // The watcher retries with backoff: every retry is the same 404.
    for _ in 0..3 {
        events.push(tagged(feature, Err(not_found())));
    }
    let (published, synced) = replay(events, &metrics).await;
    assert!(synced, "a store missing only an optional CRD is synced");
    assert_eq!(published, [Some("150m".to_owned())]);
    assert_eq!(metrics.errors("kube"), 0, "an absent CRD is no store error");
}

#[tokio::test]
async fn a_core_kind_that_answers_404_is_never_taken_as_empty() {
    let metrics = StoreMetrics::new("kube");
    let namespaces = kinds()
        .iter()
        .position(|k| k.kind == "Namespace")
        .expect("Namespaces are watched");
    let mut events: Vec<TaggedEvent> = initial_sync()
        .into_iter()
        .filter(|(index, _, _)| *index != namespaces)
        .collect();
    events.push(tagged(namespaces, Err(not_found())));
    let (published, synced) = replay(events, &metrics).await;
    assert!(!synced);
    assert!(published.is_empty());
}

#[test]
fn a_crd_installed_later_is_listed_again_and_its_objects_appear() {
    let mut state = WatchState::new(1);
    assert!(state.absent(0), "the first 404 is news");
    assert!(!state.absent(0), "the retries are not");
    assert!(state.synced());
    assert!(state.present(0));
    assert!(!state.present(0));
    state.apply(0, &kinds()[0], Event::Init);
    state.apply(0, &kinds()[0], Event::InitApply(vpa("150m")));
    assert!(state.apply(0, &kinds()[0], Event::InitDone));
    assert_eq!(target_cpu(&state.snapshot()), Some("150m".to_owned()));
}
