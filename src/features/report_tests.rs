use super::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn feature(state: &str, generation: i64) -> Value {
    json!({"metadata": {"namespace": "kube-system", "name": "vpa-node-scope", "generation": generation},
           "status": {"state": state}})
}

fn report(instance: &str, state: Option<State>, generation: i64, time: i64) -> Report {
    Report {
        component: "webhook".to_owned(),
        instance: instance.to_owned(),
        observed_state: state,
        observed_generation: generation,
        last_report_time: Some(at(time)),
        expiry: Some(Duration::from_secs(180)),
        enabled: Some(!matches!(state, Some(State::TurningOff | State::Off))),
    }
}

#[test]
fn an_observation_is_written_as_the_entry_the_crd_keys_by_component_and_instance() {
    let observed = Report::observe(
        "webhook",
        "nodescope-7f9c-a",
        &feature("TurningOff", 2),
        at(0),
        Duration::from_secs(180),
    );
    assert_eq!(
        apply_body("kube-system", "vpa-node-scope", &observed),
        json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
               "metadata": {"namespace": "kube-system", "name": "vpa-node-scope"},
               "status": {"uses": [{"component": "webhook", "instance": "nodescope-7f9c-a",
                                    "observedState": "TurningOff", "observedGeneration": 2,
                                    "lastReportTime": "2023-11-14T22:13:20Z",
                                    "expirySeconds": 180, "enabled": false}]}})
    );
    assert_eq!(
        field_manager("webhook", "nodescope-7f9c-a"),
        "nodescope-webhook-nodescope-7f9c-a"
    );
}

#[test]
fn entries_read_back_what_was_written_and_old_entries_keep_their_enabled() {
    let written = report("a", Some(State::On), 1, 0);
    let feature = json!({"status": {"uses": [
        written.to_value(),
        {"component": "kube-controller-manager", "enabled": true},
        {"instance": "no-component"}
    ]}});
    assert_eq!(
        reports(&feature),
        vec![
            written,
            Report {
                component: "kube-controller-manager".to_owned(),
                instance: String::new(),
                observed_state: None,
                observed_generation: 0,
                last_report_time: None,
                expiry: None,
                enabled: Some(true),
            }
        ]
    );
    assert_eq!(reports(&json!({"status": {"uses": "nonsense"}})), vec![]);
}

#[test]
fn merging_replaces_only_the_entry_of_the_same_component_and_instance() {
    let a = report("a", Some(State::On), 1, 0);
    let b = report("b", Some(State::On), 1, 0);
    let a2 = report("a", Some(State::TurningOff), 2, 30);
    let recommender = Report {
        component: "recommender".to_owned(),
        ..report("a", Some(State::On), 1, 0)
    };
    assert_eq!(
        merge(&[a.clone(), b.clone()], &a2),
        vec![a2.clone(), b.clone()]
    );
    // Same instance name, another component: a separate entry.
    assert_eq!(
        merge(&[a2.clone(), b.clone()], &recommender),
        vec![a2, b, recommender]
    );
}

#[test]
fn a_report_is_due_when_absent_changed_or_a_heartbeat_old() {
    let heartbeat = Duration::from_secs(60);
    let written = report("a", Some(State::On), 1, 0);
    let existing = [written.clone()];
    // Nothing changed, 59 s later: not due.
    assert!(!due(
        &existing,
        &report("a", Some(State::On), 1, 59),
        heartbeat
    ));
    // The heartbeat: due.
    assert!(due(
        &existing,
        &report("a", Some(State::On), 1, 60),
        heartbeat
    ));
    // A new state or generation: due at once.
    assert!(due(
        &existing,
        &report("a", Some(State::TurningOff), 1, 1),
        heartbeat
    ));
    assert!(due(
        &existing,
        &report("a", Some(State::On), 2, 1),
        heartbeat
    ));
    // Its entry removed (expired by the controller): due.
    assert!(due(&[], &report("a", Some(State::On), 1, 1), heartbeat));
    // A clock that went back: due, rather than never again.
    assert!(due(
        &existing,
        &report("a", Some(State::On), 1, -5),
        heartbeat
    ));
}

#[test]
fn entries_expire_after_their_own_expiry_or_the_default() {
    let live = report("a", Some(State::On), 1, 0);
    assert!(!live.expired(at(180)));
    assert!(live.expired(at(181)));
    let without = Report {
        expiry: None,
        ..live.clone()
    };
    assert!(!without.expired(at(DEFAULT_EXPIRY.as_secs() as i64)));
    assert!(without.expired(at(DEFAULT_EXPIRY.as_secs() as i64 + 1)));
    let untimed = Report {
        last_report_time: None,
        ..live.clone()
    };
    assert!(untimed.expired(at(0)));
    let entries = [live, report("b", Some(State::On), 1, 100), untimed];
    assert_eq!(expired(&entries, at(200)), vec![0, 2]);
    assert_eq!(
        expiry_patch("812", &[0, 2]),
        json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "812"},
               {"op": "remove", "path": "/status/uses/2"},
               {"op": "remove", "path": "/status/uses/0"}])
    );
}

#[test]
fn only_live_instances_that_saw_turning_off_at_the_current_generation_confirm() {
    let entries = [
        report("a", Some(State::TurningOff), 2, 100),
        report("b", Some(State::Off), 3, 100),
        report("c", Some(State::On), 2, 100),
        report("d", Some(State::TurningOff), 1, 100),
        report("e", None, 2, 100),
        // Silent for longer than its expiry: ignored.
        report("f", Some(State::On), 2, 0),
    ];
    assert_eq!(
        unconfirmed(&entries, 2, at(200)),
        vec!["webhook/c", "webhook/d", "webhook/e"]
    );
    assert_eq!(unconfirmed(&entries[..2], 2, at(200)), Vec::<String>::new());
}
