use super::*;
use crate::recommend::aggregate::HistoryConfig;
use crate::recommend::replay::Replay;
use k8s_openapi::jiff::Timestamp;

fn at(minute: i64) -> Timestamp {
    Timestamp::from_second(1_795_000_000 + minute * 60).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `nodes` node groups of VPA `monitoring/agent`, each fed a day of
/// per-minute CPU and a memory peak, and one pod per node with a window.
fn history(nodes: usize) -> History {
    let config = HistoryConfig::default();
    let mut template = AggregateContainerState::default();
    for m in 0..1440 {
        template.add_cpu_sample(&config, 0.05 + (m % 17) as f64 * 0.003, 0.0, at(m));
    }
    template.add_memory_peak(&config, 3e8, at(1440));
    let mut h = History::default();
    let vpa: VpaKey = Arc::from("monitoring/agent");
    for n in 0..nodes {
        let value = format!("node-{n:05}");
        let v = h.intern_value(&value);
        h.container_entry(&vpa, "agent")
            .groups
            .insert(v, template.clone());
        let state = ContainerState {
            last_cpu_ms: at(1439).as_millisecond(),
            last_memory_ms: at(1439).as_millisecond(),
            window_end_ms: at(1440).as_millisecond(),
            memory_peak: 300_000_000,
            oom_peak: 0,
            last_oom_ms: 0,
        };
        h.restore_pod(
            &vpa,
            &format!("monitoring/agent-{n}"),
            &value,
            vec![("agent".into(), 1 << 30, state)],
        );
    }
    h
}

fn spec(o: &Value, field: &str) -> Value {
    o["spec"][field].clone()
}

#[test]
fn a_history_restores_exactly_from_its_checkpoints() {
    let h = history(3);
    let objects = checkpoints(&h, "2026-11-25T10:00:00Z").unwrap_or_default();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["name"], "agent-0-of-1");
    assert_eq!(objects[0]["metadata"]["namespace"], "monitoring");
    let restored = restore(&Replay::defaults().model, &objects).unwrap_or_default();
    assert!(restored == h, "restored history differs");
}

#[test]
fn five_thousand_node_groups_are_a_few_objects_each_under_the_limit() {
    let h = history(5000);
    let objects = checkpoints(&h, "2026-11-25T10:00:00Z").unwrap_or_default();
    let sizes: Vec<usize> = objects
        .iter()
        .map(|o| spec(o, "data").as_str().map_or(0, str::len))
        .collect();
    assert!(objects.len() <= 8, "{} objects: {sizes:?}", objects.len());
    assert!(objects.len() >= 2, "{sizes:?}");
    assert!(sizes.iter().all(|s| *s <= SHARD_LIMIT), "{sizes:?}");
    let n = objects.len();
    for (i, o) in objects.iter().enumerate() {
        assert_eq!(spec(o, "shard"), i);
        assert_eq!(spec(o, "shards"), n);
        assert_eq!(o["metadata"]["name"], format!("agent-{i}-of-{n}"));
    }
    let restored = restore(&Replay::defaults().model, &objects).unwrap_or_default();
    assert!(restored == h, "restored history differs");
}

#[test]
fn the_newest_complete_set_wins_and_a_half_written_one_is_ignored() {
    let old = checkpoints(&history(2), "2026-11-25T10:00:00Z").unwrap_or_default();
    let new = checkpoints(&history(3), "2026-11-25T10:10:00Z").unwrap_or_default();
    let mut both = old.clone();
    both.extend(new.clone());
    let model = Replay::defaults().model;
    assert!(restore(&model, &both).unwrap_or_default() == history(3));
    // A newer set of two shards of which only one was written.
    let mut partial = new[0].clone();
    partial["spec"]["shards"] = 2.into();
    partial["spec"]["writtenAt"] = "2026-11-25T10:20:00Z".into();
    let mut with_partial = both;
    with_partial.push(partial);
    assert!(restore(&model, &with_partial).unwrap_or_default() == history(3));
}

#[test]
fn an_unreadable_checkpoint_is_named_with_its_field() {
    let mut objects = checkpoints(&history(1), "2026-11-25T10:00:00Z").unwrap_or_default();
    objects[0]["kind"] = KIND.into();
    objects[0]["spec"]["data"] = "{\"version\": 7}".into();
    let error = restore(&Replay::defaults().model, &objects)
        .map(|_| ())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("checkpoint RecommendationCheckpoint/monitoring/agent-0-of-1: spec.data: version 7 (this recommender reads 1)")
    );
    objects[0]["spec"] = serde_json::json!({"vpaName": "agent"});
    let error = restore(&Replay::defaults().model, &objects)
        .map(|_| ())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some("checkpoint RecommendationCheckpoint/monitoring/agent-0-of-1: missing field `shard`")
    );
}

#[test]
fn a_long_vpa_name_still_makes_a_valid_object_name() {
    let long = "a".repeat(253);
    let name = object_name(&long, 3, 16);
    assert!(name.len() <= 253, "{}", name.len());
    assert!(name.ends_with("-3-of-16"), "{name}");
    assert_ne!(
        object_name(&long, 3, 16),
        object_name(&format!("{long}b"), 3, 16)
    );
    assert_eq!(object_name("agent", 0, 1), "agent-0-of-1");
}

#[test]
fn a_running_recommender_loses_only_the_vpa_whose_checkpoint_is_bad() {
    let good = checkpoints(&history(2), "2026-11-25T10:00:00Z").unwrap_or_default();
    let mut bad = good[0].clone();
    bad["metadata"]["name"] = "other-0-of-1".into();
    bad["spec"]["vpaName"] = "other".into();
    bad["spec"]["data"] = "{not json".into();
    let mut objects = good;
    objects.push(bad);
    let (restored, errors) = restore_each(&Replay::defaults().model, &objects);
    assert!(restored == history(2), "the good VPA's history is restored");
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "checkpoint RecommendationCheckpoint/monitoring/other-0-of-1: spec.data: "
        ),
        "{errors:?}"
    );
    // Offline, the same bad file is an error.
    assert!(restore(&Replay::defaults().model, &objects).is_err());
}

#[test]
fn a_vpa_no_longer_scoped_is_forgotten_and_gets_no_checkpoints() {
    let mut h = history(3);
    let other: VpaKey = Arc::from("monitoring/other");
    let v = h.intern_value("node-00000");
    let kept = h.vpas[&Arc::from("monitoring/agent") as &VpaKey]["agent"].groups[&v].clone();
    h.container_entry(&other, "agent").groups.insert(v, kept);
    assert_eq!(vpas(&h), vec![Arc::from("monitoring/agent"), other.clone()]);
    forget_unscoped(&mut h, |key| key == "monitoring/other");
    assert_eq!(vpas(&h), vec![other.clone()]);
    let at = "2026-11-27T00:00:00Z";
    assert!(of_vpa(&h, &Arc::from("monitoring/agent"), at)
        .unwrap_or_else(|e| panic!("{e}"))
        .is_empty());
    assert!(!of_vpa(&h, &other, at)
        .unwrap_or_else(|e| panic!("{e}"))
        .is_empty());
}
