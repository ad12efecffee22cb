use super::*;
use crate::recommend::model::ContainerHistory;
use std::sync::Arc;

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/upstream-checkpoints/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn names_are_upstreams_fnv32a_of_the_persisted_value_in_unpadded_hex() {
    assert_eq!(fnv32a(""), 0x811c_9dc5);
    assert_eq!(fnv32a("a"), 0xe40c_292c);
    assert_eq!(fnv32a("foobar"), 0xbf9c_f968);
    assert_eq!(checkpoint_name("vpa-1", "agent", None), "vpa-1-agent");
    assert_eq!(
        checkpoint_name("vpa-1", "agent", Some("worker")),
        "vpa-1-agent-95ce3757"
    );
    assert_eq!(
        checkpoint_name("vpa-1", "agent", Some("__absent__")),
        "vpa-1-agent-9da3c68"
    );
    assert_eq!(
        checkpoint_name("vpa-1", "agent", Some(persisted_value(""))),
        "vpa-1-agent-f51041a6"
    );
    assert_eq!(runtime_value(EMPTY), "");
    assert_eq!(runtime_value("__absent__"), "__absent__");
}

#[test]
fn a_scoped_checkpoint_as_go_writes_it_reads_and_writes_back_the_same_object() {
    let original = fixture("scoped.json");
    let c = parse(&original).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (c.namespace.as_str(), c.vpa.as_str(), c.container.as_str()),
        ("monitoring", "agent", "agent")
    );
    assert_eq!(c.value.as_deref(), Some("node-a-1"));
    assert_eq!(c.status.total_samples_count, 10_080);
    assert_eq!(c.status.cpu_histogram.bucket_weights.get(&9), Some(&12));
    assert_eq!(c.status.cpu_histogram.total_weight, 47.261_281_25);
    let written = object(
        "monitoring",
        "agent",
        "agent",
        c.value.as_deref(),
        &c.status,
        at("2026-11-20T10:00:00Z"),
    );
    assert_eq!(written, original);
    assert_eq!(
        written["status"]["cpuHistogram"]["totalWeight"].to_string(),
        "47.26128125"
    );
}

#[test]
fn a_global_checkpoint_has_no_scope_value_and_the_historical_name() {
    let original = fixture("global.json");
    let c = parse(&original).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.value, None);
    let written = object(
        "monitoring",
        "agent",
        "agent",
        None,
        &c.status,
        at("2026-11-20T10:00:00Z"),
    );
    assert_eq!(written, original);
    assert_eq!(written["metadata"]["name"], "agent-agent");
    assert!(written["spec"].get("scopeValue").is_none());
    assert_eq!(
        written["status"]["memoryHistogram"]["totalWeight"].to_string(),
        "12"
    );
}

#[test]
fn the_empty_scope_value_is_stored_as_the_sentinel_and_go_zero_times_as_null() {
    let original = fixture("empty-scope.json");
    let c = parse(&original).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.value.as_deref(), Some(""));
    let zero = crate::recommend::gomath::nanos_timestamp(crate::recommend::gomath::GO_ZERO_NANOS);
    assert_eq!(c.status.first_sample_start, zero);
    let written = object("monitoring", "agent", "agent", Some(""), &c.status, zero);
    assert_eq!(written, original);
}

#[test]
fn a_checkpoint_loaded_into_the_model_and_saved_again_is_the_same() {
    let config = HistoryConfig::default();
    for file in ["scoped.json", "global.json"] {
        let original = fixture(file);
        let c = parse(&original).unwrap_or_else(|e| panic!("{e}"));
        let mut state = AggregateContainerState::default();
        state
            .load_vpa_checkpoint(&config, &c.status)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(state.to_vpa_checkpoint(), c.status, "{file}");
    }
}

#[test]
fn a_bad_field_is_named() {
    let mut bad = fixture("scoped.json");
    bad["status"]["cpuHistogram"]["bucketWeights"]["x"] = json!(1);
    let error = parse(&bad).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "checkpoint VerticalPodAutoscalerCheckpoint/monitoring/agent-agent-e95e31b1: \
         status.cpuHistogram.bucketWeights: key \"x\" is not a bucket index"
    );
    let mut bad = fixture("global.json");
    bad["status"]["memoryHistogram"]["bucketWeights"]["14"] = json!(-1);
    let error = parse(&bad).map(|_| ()).unwrap_err().to_string();
    assert!(
        error.ends_with("status.memoryHistogram.bucketWeights[14]: -1 is not a uint32"),
        "{error}"
    );
}

/// A cheap deterministic noise in [-1, 1).
fn noise(seed: u64) -> f64 {
    let x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

fn minute(m: i64) -> Timestamp {
    Timestamp::from_second(1_795_000_000 + m * 60).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[test]
fn the_scoped_and_global_checkpoints_of_a_vpa_are_written_and_imported_per_group() {
    let config = HistoryConfig::default();
    let mut history = History::default();
    let vpa: VpaKey = Arc::from("monitoring/agent");
    let mut c = ContainerHistory::default();
    for (value, level) in [("node-a-1", 0.1), ("", 0.3), ("__absent__", 0.7)] {
        let mut a = AggregateContainerState::default();
        for m in 0..600 {
            a.add_cpu_sample(
                &config,
                level * (1.0 + 0.2 * noise(m as u64)),
                0.1,
                minute(m),
            );
        }
        a.add_memory_peak(&config, 3e8, minute(600));
        c.groups.insert(Arc::from(value), a);
    }
    history
        .vpas
        .insert(vpa.clone(), [(Arc::from("agent"), c)].into());
    let objects = of_vpa(&config, &history, &vpa, minute(601));
    let names: Vec<&str> = objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "agent-agent-f51041a6",
            "agent-agent-9da3c68",
            "agent-agent-e95e31b1",
            "agent-agent"
        ]
    );
    let (restored, errors) = restore(&config, &objects);
    assert!(errors.is_empty(), "{errors:?}");
    let groups = &restored.vpas[&vpa][&Arc::from("agent")].groups;
    let mut values: Vec<&str> = groups.keys().map(|v| &**v).collect();
    values.sort_unstable();
    assert_eq!(values, ["", "__absent__", "node-a-1"]);
    for (value, state) in groups {
        assert_eq!(
            state.total_samples(),
            history.vpas[&vpa][&Arc::from("agent")].groups[value].total_samples()
        );
    }
    // A VPA nodescope already has history for keeps it.
    let mut own = History::default();
    own.vpas.insert(vpa.clone(), BTreeMap::new());
    assert!(import(&mut own, restored.clone()).is_empty());
    let mut fresh = History::default();
    assert_eq!(import(&mut fresh, restored), [vpa]);
}

#[test]
fn through_upstreams_format_a_percentile_moves_at_most_one_bucket() {
    use crate::recommend::estimate::{cpu_percentile, memory_percentile};
    let config = HistoryConfig::default();
    let (mut same, mut moved) = (0, 0);
    for seed in 0..64u64 {
        // A week at a level of its own, ±30% noise, a CPU sample every 5
        // minutes and a memory peak a day.
        let level = 0.05 + 0.02 * seed as f64;
        let mut a = AggregateContainerState::default();
        for m in (0..7 * 1440).step_by(5) {
            let n = noise(seed * 1_000_003 + m as u64);
            a.add_cpu_sample(&config, level * (1.0 + 0.3 * n), 0.1, minute(m));
        }
        for day in 1..=7 {
            let n = noise(seed * 31 + day as u64);
            a.add_memory_peak(&config, 2e8 * (1.0 + 0.3 * n), minute(day * 1440 - 1));
        }
        let mut b = AggregateContainerState::default();
        b.load_vpa_checkpoint(&config, &a.to_vpa_checkpoint())
            .unwrap_or_else(|e| panic!("{e}"));
        for p in [0.5, 0.9, 0.95] {
            for (x, y) in [
                (cpu_percentile(&a, p), cpu_percentile(&b, p)),
                (memory_percentile(&a, p), memory_percentile(&b, p)),
            ] {
                let ratio = x.max(y) as f64 / x.min(y).max(1) as f64;
                assert!(ratio <= 1.05 + 1e-9, "seed {seed} p{p}: {x} vs {y}");
                if x == y {
                    same += 1;
                } else {
                    moved += 1;
                }
            }
        }
    }
    // What the bound costs in practice: over these 64 weeks no percentile
    // moves at all.
    assert_eq!((same, moved), (64 * 6, 0));
}
