//! Issue #42: no negative or inverted bound reaches a recommendation. Every
//! numeric flag of `nodescope recommend` is checked when it is parsed, and
//! the pairs that bound one another are checked together before anything
//! is read: exit 2, naming the flags and their values, offline and against
//! a cluster alike.

use super::{assert_exit, command, stderr, stdout};

/// `recommend ARGS` with no cluster to reach.
fn recommend(args: &[&str]) -> std::process::Output {
    let mut all = vec!["recommend"];
    all.extend_from_slice(args);
    command(&all)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("the binary runs")
}

#[test]
fn every_numeric_flag_out_of_its_range_exits_2_naming_the_range() {
    let cases: &[(&str, &str, &str)] = &[
        ("--recommendation-margin-fraction", "-1", "expected a finite number >= 0, not \"-1\""),
        ("--pod-recommendation-min-cpu-millicores", "-1", "expected a finite number >= 0, not \"-1\""),
        ("--pod-recommendation-min-memory-mb", "NaN", "expected a finite number >= 0, not \"NaN\""),
        ("--target-cpu-percentile", "1.5", "expected a percentile in [0, 1], not \"1.5\""),
        ("--recommendation-lower-bound-cpu-percentile", "-0.1", "expected a percentile in [0, 1], not \"-0.1\""),
        ("--recommendation-upper-bound-cpu-percentile", "2", "expected a percentile in [0, 1], not \"2\""),
        ("--target-memory-percentile", "NaN", "expected a percentile in [0, 1], not \"NaN\""),
        ("--recommendation-lower-bound-memory-percentile", "-1", "expected a percentile in [0, 1], not \"-1\""),
        ("--recommendation-upper-bound-memory-percentile", "1.01", "expected a percentile in [0, 1], not \"1.01\""),
        ("--confidence-interval-cpu", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        ("--confidence-interval-memory", "-1h", "\"-1h\": a duration cannot be negative"),
        ("--round-cpu-millicores", "0", "expected a whole number >= 1, not \"0\""),
        ("--round-memory-bytes", "-1", "expected a whole number >= 1, not \"-1\""),
        ("--memory-aggregation-interval", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        ("--memory-aggregation-interval-count", "0", "expected a whole number >= 1, not \"0\""),
        ("--memory-histogram-decay-half-life", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        ("--cpu-histogram-decay-half-life", "-5m", "\"-5m\": a duration cannot be negative"),
        ("--oom-bump-up-ratio", "0.5", "expected a finite number >= 1, not \"0.5\""),
        ("--oom-min-bump-up-bytes", "-1", "expected a finite number >= 0, not \"-1\""),
        ("--container-recommendation-max-allowed-cpu", "-1", "expected a quantity >= 0 (0: no cap), not \"-1\""),
        ("--container-recommendation-max-allowed-memory", "-1Gi", "expected a quantity >= 0 (0: no cap), not \"-1Gi\""),
        ("--container-recommendation-max-allowed-cpu", "lots", "quantity \"lots\" is not a number followed by an optional suffix (e.g. \"1.5\", \"250m\", \"12e6\")"),
        ("--group-min-samples", "0", "expected a whole number >= 1, not \"0\""),
        ("--recommender-interval", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        ("--checkpoint-interval", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        ("--leader-elect-lease-duration", "1s", "\"1s\": a Lease duration is whole seconds, at least 2s (such as 15s)"),
        ("--recommender-name", "bad name", "expected a label value (1 to 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit), not \"bad name\""),
        ("--recommender-name", "", "expected a label value (1 to 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit), not \"\""),
    ];
    for (flag, value, why) in cases {
        let name = flag
            .trim_start_matches("--")
            .replace('-', "_")
            .to_uppercase();
        let expected = format!(
            "error: invalid value '{value}' for '{flag} <{name}>': {why}\n\n\
             For more information, try '--help'.\n"
        );
        // `--flag=value` and, where the value is not empty, `--flag value`
        // (a negative number is taken as the value, not as a flag).
        let mut forms = vec![vec![format!("{flag}={value}")]];
        if !value.is_empty() {
            forms.push(vec![(*flag).to_owned(), (*value).to_owned()]);
        }
        for form in forms {
            // Offline (--demo) and against a cluster: refused at parsing.
            for mode in [&["--demo"][..], &[][..]] {
                let mut args: Vec<&str> = mode.to_vec();
                args.extend(form.iter().map(String::as_str));
                let output = recommend(&args);
                assert_exit(&output, 2);
                assert_eq!(stderr(&output), expected, "{args:?}");
                assert_eq!(stdout(&output), "", "{args:?}");
            }
        }
    }
}

#[test]
fn bounds_that_would_invert_a_recommendation_exit_2_naming_both_flags() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--recommendation-lower-bound-cpu-percentile=0.95"],
            "--recommendation-lower-bound-cpu-percentile 0.95 is above --target-cpu-percentile 0.9: \
             the lower bound would be above the target",
        ),
        (
            &["--target-cpu-percentile=0.99"],
            "--target-cpu-percentile 0.99 is above --recommendation-upper-bound-cpu-percentile 0.95: \
             the target would be above the upper bound",
        ),
        (
            &["--recommendation-lower-bound-memory-percentile=1"],
            "--recommendation-lower-bound-memory-percentile 1 is above --target-memory-percentile 0.9: \
             the lower bound would be above the target",
        ),
        (
            &["--target-memory-percentile=0.5", "--recommendation-upper-bound-memory-percentile=0.4", "--recommendation-lower-bound-memory-percentile=0"],
            "--target-memory-percentile 0.5 is above --recommendation-upper-bound-memory-percentile 0.4: \
             the target would be above the upper bound",
        ),
        (
            &["--container-recommendation-max-allowed-cpu=10m"],
            "--container-recommendation-max-allowed-cpu 10m is below --pod-recommendation-min-cpu-millicores 25: \
             every recommendation would be capped under its minimum",
        ),
        (
            &["--container-recommendation-max-allowed-memory=200Mi"],
            "--container-recommendation-max-allowed-memory 200Mi is below --pod-recommendation-min-memory-mb 250: \
             every recommendation would be capped under its minimum",
        ),
    ];
    for (args, why) in cases {
        for mode in [&["--demo"][..], &[][..]] {
            let mut all: Vec<&str> = mode.to_vec();
            all.extend_from_slice(args);
            let output = recommend(&all);
            assert_exit(&output, 2);
            assert_eq!(
                stderr(&output),
                format!("nodescope: recommend: {why}\n"),
                "{all:?}"
            );
            assert_eq!(stdout(&output), "", "{all:?}");
        }
    }
}

#[test]
fn a_cap_of_zero_is_no_cap_and_bounds_that_meet_are_taken() {
    let plain = recommend(&["--demo"]);
    assert_exit(&plain, 0);
    // (arguments, whether the output is the uncapped one)
    let cases: &[(&[&str], bool)] = &[
        (
            &["--demo", "--container-recommendation-max-allowed-cpu=0"],
            true,
        ),
        (
            &[
                "--demo",
                "--container-recommendation-max-allowed-memory",
                "0",
            ],
            true,
        ),
        // A cap equal to the floor is no contradiction.
        (
            &[
                "--demo",
                "--container-recommendation-max-allowed-cpu=25m",
                "--container-recommendation-max-allowed-memory=250Mi",
            ],
            false,
        ),
        // Equal percentiles: the bounds are equal before their confidence
        // margins, never inverted.
        (
            &[
                "--demo",
                "--recommendation-lower-bound-cpu-percentile=0.9",
                "--recommendation-upper-bound-cpu-percentile=0.9",
            ],
            false,
        ),
    ];
    for (args, uncapped) in cases {
        let output = recommend(args);
        assert_exit(&output, 0);
        assert_eq!(stderr(&output), "", "{args:?}");
        assert_eq!(stdout(&output) == stdout(&plain), *uncapped, "{args:?}");
    }
}
