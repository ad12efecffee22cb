use super::*;

const SETTLE: Duration = Duration::from_secs(30);

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn task() -> TransitionTask {
    TransitionTask {
        name: "nodescope-feature-vpa-node-scope".to_owned(),
        count: 1,
        description: "VerticalPodAutoscaler monitoring/node-exporter".to_owned(),
    }
}

fn recorded(state: Option<State>) -> FeatureStatus {
    FeatureStatus {
        state,
        last_transition_time: state.map(|_| at(0)),
        transition_tasks: Vec::new(),
    }
}

/// What a row expects: the state written (None: no write), whether the
/// transition time is now (else kept), whether tasks are written, the event
/// reason, the re-check in seconds.
type Expected = (Option<State>, bool, bool, Option<&'static str>, Option<u64>);

/// (desired, recorded state, uses found, settle time passed) and what it expects.
type Row = (Option<Desired>, Option<State>, bool, bool, Expected);

#[test]
fn every_desired_state_uses_and_settle_combination_has_the_exact_next_status() {
    use Desired::{Disabled, Enabled};
    use State::{Off, On, TurningOff, TurningOn};
    // (desired, recorded state, uses found, settle time passed) -> expected
    let rows: Vec<Row> = {
        let mut rows = Vec::new();
        // Without desired, nothing is ever touched.
        for state in [None, Some(On), Some(Off), Some(TurningOn), Some(TurningOff)] {
            for uses in [false, true] {
                for settled in [false, true] {
                    rows.push((None, state, uses, settled, (None, false, false, None, None)));
                }
            }
        }
        for settled in [false, true] {
            for state in [None, Some(On), Some(TurningOn)] {
                let off = (Some(TurningOff), true, false, Some("TurningOff"), Some(30));
                rows.push((Some(Disabled), state, false, settled, off));
                let off = (Some(TurningOff), true, true, Some("TurningOff"), Some(30));
                rows.push((Some(Disabled), state, true, settled, off));
            }
            for uses in [false, true] {
                rows.push((
                    Some(Disabled),
                    Some(Off),
                    uses,
                    settled,
                    (None, false, false, None, None),
                ));
                rows.push((
                    Some(Enabled),
                    Some(On),
                    uses,
                    settled,
                    (None, false, false, None, None),
                ));
                let on = (Some(On), true, false, Some("On"), None);
                rows.push((Some(Enabled), Some(TurningOn), uses, settled, on));
                for state in [None, Some(Off), Some(TurningOff)] {
                    let on = (Some(TurningOn), true, false, Some("TurningOn"), Some(0));
                    rows.push((Some(Enabled), state, uses, settled, on));
                }
            }
        }
        let t = Some(TurningOff);
        rows.push((
            Some(Disabled),
            t,
            false,
            false,
            (None, false, false, None, Some(20)),
        ));
        rows.push((
            Some(Disabled),
            t,
            false,
            true,
            (Some(Off), true, false, Some("Off"), None),
        ));
        rows.push((
            Some(Disabled),
            t,
            true,
            false,
            (t, false, true, None, Some(20)),
        ));
        rows.push((Some(Disabled), t, true, true, (t, false, true, None, None)));
        rows
    };
    assert_eq!(rows.len(), 60, "3 desired x 5 states x uses x settle");
    for (desired, state, uses, settled, expected) in rows {
        let tasks = if uses { vec![task()] } else { Vec::new() };
        let now = if settled { at(30) } else { at(10) };
        let step = next_status(desired, &recorded(state), &tasks, now, SETTLE);
        let (next, time_is_now, with_tasks, reason, recheck) = expected;
        let want = next.map(|s| FeatureStatus {
            state: Some(s),
            last_transition_time: Some(if time_is_now { now } else { at(0) }),
            transition_tasks: if with_tasks { vec![task()] } else { Vec::new() },
        });
        let case = format!("{desired:?} {state:?} uses={uses} settled={settled}");
        assert_eq!(step.write, want, "{case}");
        assert_eq!(step.event.as_ref().map(|e| e.0), reason, "{case}");
        assert_eq!(
            step.recheck_after,
            recheck.map(Duration::from_secs),
            "{case}"
        );
    }
}

#[test]
fn turning_off_names_every_task_in_the_event() {
    let step = next_status(
        Some(Desired::Disabled),
        &recorded(Some(State::On)),
        &[task()],
        at(0),
        SETTLE,
    );
    assert_eq!(
        step.event,
        Some((
            "TurningOff",
            "desired is Disabled; waiting for nodescope-feature-vpa-node-scope: VerticalPodAutoscaler monitoring/node-exporter".to_owned()
        ))
    );
}

#[test]
fn off_is_reached_exactly_at_the_settle_time_and_says_so() {
    let step = next_status(
        Some(Desired::Disabled),
        &recorded(Some(State::TurningOff)),
        &[],
        at(30),
        SETTLE,
    );
    assert_eq!(
        step.event,
        Some((
            "Off",
            "no object uses the feature 30s after TurningOff".to_owned()
        ))
    );
    let early = next_status(
        Some(Desired::Disabled),
        &recorded(Some(State::TurningOff)),
        &[],
        at(29),
        SETTLE,
    );
    assert_eq!(early.write, None);
    assert_eq!(early.recheck_after, Some(Duration::from_secs(1)));
}

#[test]
fn turning_off_without_a_transition_time_starts_the_settle_time_now() {
    let status = FeatureStatus {
        state: Some(State::TurningOff),
        last_transition_time: None,
        transition_tasks: Vec::new(),
    };
    let step = next_status(Some(Desired::Disabled), &status, &[], at(100), SETTLE);
    assert_eq!(
        step.write,
        Some(FeatureStatus {
            state: Some(State::TurningOff),
            last_transition_time: Some(at(100)),
            transition_tasks: Vec::new(),
        })
    );
    assert_eq!(step.event, None);
    assert_eq!(step.recheck_after, Some(SETTLE));
}

#[test]
fn a_clock_behind_the_transition_time_waits_the_whole_settle_time() {
    let step = next_status(
        Some(Desired::Disabled),
        &recorded(Some(State::TurningOff)),
        &[],
        at(-5),
        SETTLE,
    );
    assert_eq!(step.write, None);
    assert_eq!(step.recheck_after, Some(SETTLE));
}

#[test]
fn tasks_that_shrink_are_rewritten_while_the_transition_time_is_kept() {
    let mut status = recorded(Some(State::TurningOff));
    status.transition_tasks = vec![TransitionTask { count: 2, ..task() }];
    let step = next_status(Some(Desired::Disabled), &status, &[task()], at(10), SETTLE);
    assert_eq!(
        step.write,
        Some(FeatureStatus {
            state: Some(State::TurningOff),
            last_transition_time: Some(at(0)),
            transition_tasks: vec![task()],
        })
    );
}

#[test]
fn stale_tasks_on_an_off_or_on_feature_are_cleared_without_an_event() {
    for (desired, state) in [
        (Desired::Disabled, State::Off),
        (Desired::Enabled, State::On),
    ] {
        let mut status = recorded(Some(state));
        status.transition_tasks = vec![task()];
        let step = next_status(Some(desired), &status, &[], at(10), SETTLE);
        assert_eq!(step.write, Some(recorded(Some(state))), "{state:?}");
        assert_eq!(step.event, None);
    }
}

mod reported {
    use super::*;
    use crate::features::report::Report;

    fn webhook(instance: &str, state: State, generation: i64, time: i64) -> Report {
        Report {
            component: "webhook".to_owned(),
            instance: instance.to_owned(),
            observed_state: Some(state),
            observed_generation: generation,
            last_report_time: Some(at(time)),
            expiry: Some(Duration::from_secs(180)),
            enabled: None,
        }
    }

    fn turning_off() -> FeatureStatus {
        recorded(Some(State::TurningOff))
    }

    /// A TurningOff Feature (since 0, generation 2) with no uses left, 40 s
    /// later: past the settle time.
    fn step(reports: &[Report]) -> Step {
        next_status_reported(
            Some(Desired::Disabled),
            &turning_off(),
            &[],
            reports,
            2,
            at(40),
            SETTLE,
        )
    }

    #[test]
    fn off_comes_once_every_live_instance_confirmed_turning_off() {
        let reports = [
            webhook("a", State::TurningOff, 2, 35),
            webhook("b", State::Off, 2, 35),
        ];
        assert_eq!(
            step(&reports),
            Step {
                write: Some(FeatureStatus {
                    state: Some(State::Off),
                    last_transition_time: Some(at(40)),
                    transition_tasks: vec![],
                }),
                event: Some((
                    "Off",
                    "no object uses the feature 30s after TurningOff".to_owned()
                )),
                recheck_after: None,
            }
        );
    }

    #[test]
    fn an_instance_that_still_saw_on_or_an_older_generation_keeps_it_turning_off() {
        let reports = [
            webhook("a", State::TurningOff, 2, 35),
            webhook("b", State::On, 2, 35),
            webhook("c", State::TurningOff, 1, 35),
        ];
        assert_eq!(
            step(&reports),
            Step {
                write: Some(FeatureStatus {
                    transition_tasks: vec![TransitionTask {
                        name: "reports".to_owned(),
                        count: 2,
                        description: "not yet confirmed by webhook/b, webhook/c".to_owned(),
                    }],
                    ..turning_off()
                }),
                event: None,
                recheck_after: None,
            }
        );
    }

    #[test]
    fn an_expired_instance_is_not_waited_for() {
        // b last reported at -150: 190 s before now, past its 180 s expiry.
        let reports = [
            webhook("a", State::TurningOff, 2, 35),
            webhook("b", State::On, 2, -150),
        ];
        assert_eq!(step(&reports).write.and_then(|s| s.state), Some(State::Off));
    }

    #[test]
    fn the_settle_time_stays_a_floor_when_every_instance_confirmed() {
        let reports = [webhook("a", State::TurningOff, 2, 5)];
        let early = next_status_reported(
            Some(Desired::Disabled),
            &turning_off(),
            &[],
            &reports,
            2,
            at(10),
            SETTLE,
        );
        assert_eq!(
            early,
            Step {
                write: None,
                event: None,
                recheck_after: Some(Duration::from_secs(20)),
            }
        );
    }

    #[test]
    fn turning_off_lists_every_instance_that_has_not_yet_seen_it() {
        let reports = [webhook("a", State::On, 1, 0), webhook("b", State::On, 1, 0)];
        let step = next_status_reported(
            Some(Desired::Disabled),
            &recorded(Some(State::On)),
            &[task()],
            &reports,
            2,
            at(10),
            SETTLE,
        );
        let reports_task = TransitionTask {
            name: "reports".to_owned(),
            count: 2,
            description: "not yet confirmed by webhook/a, webhook/b".to_owned(),
        };
        assert_eq!(
            step,
            Step {
                write: Some(FeatureStatus {
                    state: Some(State::TurningOff),
                    last_transition_time: Some(at(10)),
                    transition_tasks: vec![task(), reports_task],
                }),
                event: Some((
                    "TurningOff",
                    "desired is Disabled; waiting for nodescope-feature-vpa-node-scope: \
                     VerticalPodAutoscaler monitoring/node-exporter; reports: not yet \
                     confirmed by webhook/a, webhook/b"
                        .to_owned()
                )),
                recheck_after: Some(SETTLE),
            }
        );
    }

    #[test]
    fn without_reports_or_while_enabled_the_reports_change_nothing() {
        assert_eq!(
            step(&[]),
            next_status(Some(Desired::Disabled), &turning_off(), &[], at(40), SETTLE)
        );
        let reports = [webhook("a", State::On, 1, 35)];
        assert_eq!(
            next_status_reported(
                Some(Desired::Enabled),
                &recorded(Some(State::TurningOn)),
                &[],
                &reports,
                2,
                at(40),
                SETTLE
            ),
            next_status(
                Some(Desired::Enabled),
                &recorded(Some(State::TurningOn)),
                &[],
                at(40),
                SETTLE
            )
        );
    }
}
