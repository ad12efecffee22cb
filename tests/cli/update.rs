//! `nodescope update --plan` offline: the plan on `examples/update` in
//! every format, the exit codes of `--exit-code` and of bad input, and the
//! range of every numeric and duration flag (all commands), refused when
//! parsed.

use super::{assert_exit, command, golden, nodescope, root, stderr, stdout};

#[test]
fn the_plan_on_the_example() {
    for (format, name) in [
        ("table", "update-plan.txt"),
        ("json", "update-plan.json"),
        ("yaml", "update-plan.yaml"),
    ] {
        let out = nodescope(&[
            "update",
            "--plan",
            "--store",
            "file:examples/update",
            "-o",
            format,
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        golden(name, &String::from_utf8_lossy(&out.stdout));
    }
    // The JSON has the promised shape: desired only where something changes.
    let out = nodescope(&[
        "update",
        "--plan",
        "--store",
        "file:examples/update",
        "-o",
        "json",
    ]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let items = plan["items"].as_array().expect("items");
    assert_eq!(items.len(), 4);
    for item in items {
        let changes = item["action"] == "resize" || item["action"] == "evict";
        assert_eq!(
            item["containers"][0].get("desired").is_some(),
            changes,
            "{item}"
        );
    }
}

#[test]
fn bad_input_exits_2_and_names_the_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: c, resources: {requests: [1]}}]}\n",
    )
    .expect("write");
    let store = format!("file:{}", dir.path().display());
    let out = nodescope(&["update", "--plan", "--store", &store]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "nodescope: update: Pod ns/p: spec.containers[0].resources.requests: invalid type: array, expected an object\n"
    );
    let out = nodescope(&["update", "--store", "file:examples/update"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "nodescope: update: offline (--store file:), only --plan runs: a pass needs a cluster to act on\n"
    );
    let _ = root();
}

/// examples/update without its Nodes, as a dump that left them out.
fn dump_without_nodes() -> (tempfile::TempDir, String) {
    let text = std::fs::read_to_string(root().join("examples/update/cluster.yaml")).expect("read");
    let kept: Vec<&str> = text
        .split("\n---\n")
        .filter(|d| !d.contains("\nkind: Node\n"))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), kept.join("\n---\n")).expect("write");
    let store = format!("file:{}", dir.path().display());
    (dir, store)
}

#[test]
fn a_plan_on_a_dump_without_nodes_defers_every_pod_instead_of_moving_it_to_the_vpa_wide_value() {
    let (_dir, store) = dump_without_nodes();
    let output = nodescope(&["update", "--plan", "--store", &store, "-o", "json"]);
    assert_exit(&output, 0);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("json");
    let items = plan["items"].as_array().expect("items");
    assert_eq!(items.len(), 4);
    for item in items {
        let node = item["node"].as_str().expect("a node");
        assert_eq!(item["action"], "deferred", "{item}");
        assert_eq!(item["reason"], "unknown node", "{item}");
        assert_eq!(
            item["message"],
            format!(
                "node {node:?} is not known (no such Node in the store), so its \
                 topology.kubernetes.io/zone label is unknown: waiting until it is rather than \
                 moving the pod to the VerticalPodAutoscaler-wide recommendation"
            )
        );
        assert_eq!(item["containers"][0].get("desired"), None, "{item}");
    }
}

#[test]
fn exit_code_tells_a_plan_that_resizes_or_evicts_from_one_that_does_not() {
    let plan = |store: &str, extra: &[&str]| {
        let mut args = vec!["update", "--plan", "--store", store];
        args.extend_from_slice(extra);
        nodescope(&args)
    };
    // examples/update resizes agent-a and agent-x.
    assert_exit(&plan("file:examples/update", &["--exit-code"]), 1);
    assert_exit(&plan("file:examples/update", &[]), 0);
    // Deferred pods are not actions.
    let (_dir, store) = dump_without_nodes();
    assert_exit(&plan(&store, &["--exit-code"]), 0);
    let output = nodescope(&["update", "--exit-code"]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output)
            .starts_with("error: the following required arguments were not provided:\n  --plan\n"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn go_durations_are_taken_as_upstreams_flags_take_them() {
    let plan = |lifetime: &str| {
        let output = nodescope(&[
            "update",
            "--plan",
            "--store",
            "file:examples/update",
            "--in-recommendation-bounds-eviction-lifetime-threshold",
            lifetime,
        ]);
        assert_exit(&output, 0);
        stdout(&output)
    };
    let default = plan("12h");
    for same in ["12h0m0s", "11h60m", "0.5h11h30m", "720m"] {
        assert_eq!(plan(same), default, "{same}");
    }
}

#[test]
fn numeric_and_duration_flags_outside_their_range_are_refused_before_connecting() {
    let cases: &[(&[&str], &str, &str, &str)] = &[
        (&["update"], "--pod-update-threshold", "-1", "expected a fraction in (0, 1], not \"-1\""),
        (&["update"], "--pod-update-threshold", "0", "expected a fraction in (0, 1], not \"0\""),
        (&["update"], "--pod-update-threshold", "NaN", "expected a fraction in (0, 1], not \"NaN\""),
        (&["update"], "--pod-update-threshold", "1e308", "expected a fraction in (0, 1], not \"1e308\""),
        (&["update"], "--eviction-tolerance", "-1", "expected a fraction in (0, 1], not \"-1\""),
        (&["update"], "--eviction-tolerance", "NaN", "expected a fraction in (0, 1], not \"NaN\""),
        (&["update"], "--eviction-tolerance", "1.5", "expected a fraction in (0, 1], not \"1.5\""),
        (&["update"], "--updater-interval", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        (&["update"], "--min-replicas", "-1", "expected a whole number >= 1, not \"-1\""),
        (&["update"], "--leader-elect-lease-duration", "1s", "\"1s\": a Lease duration is whole seconds, at least 2s (such as 15s)"),
        (&["update"], "--eviction-rate-limit", "NaN", "expected a finite number, not \"NaN\""),
        (&["recommend"], "--recommender-interval", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        (&["recommend"], "--target-cpu-percentile", "90", "expected a percentile in [0, 1], not \"90\""),
        (&["recommend"], "--leader-elect-lease-duration", "1s", "\"1s\": a Lease duration is whole seconds, at least 2s (such as 15s)"),
        (&["balloon", "controller"], "--interval", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        (&["balloon", "controller"], "--lease-duration", "2500ms", "\"2500ms\": a Lease duration is whole seconds, at least 2s (such as 15s)"),
        (&["features", "controller"], "--lease-duration", "1s", "\"1s\": a Lease duration is whole seconds, at least 2s (such as 15s)"),
        (&["features", "controller"], "--period", "0s", "\"0s\": the interval must be longer than 0 (such as 10s)"),
        (&["serve", "--demo"], "--reload-interval", "0", "expected a whole number of seconds >= 1, not \"0\""),
        (&["serve", "--demo"], "--idle-timeout", "-5", "expected a whole number of seconds >= 1, not \"-5\""),
        (&["update"], "--log-level", "nodescope=loud", "\"nodescope=loud\" is not a log filter (error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5); such as info, or info,nodescope=debug"),
        (&["recommend"], "--log-level", "nodescope=loud", "\"nodescope=loud\" is not a log filter (error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5); such as info, or info,nodescope=debug"),
        (&["balloon", "controller"], "--log-level", "nodescope=loud", "\"nodescope=loud\" is not a log filter (error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5); such as info, or info,nodescope=debug"),
        (&["features", "controller"], "--log-level", "nodescope=loud", "\"nodescope=loud\" is not a log filter (error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5); such as info, or info,nodescope=debug"),
        (&["serve", "--demo"], "--log-level", "nodescope=loud", "\"nodescope=loud\" is not a log filter (error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5); such as info, or info,nodescope=debug"),
        (&["update"], "--updater-interval", "7", "\"7\" has a number without a unit: write 7s for seconds (such as 30s, 1.5m, 1h30m or 12h0m0s (units ns, us, ms, s, m, h))"),
    ];
    // Checked together, so after parsing; still before connecting.
    let output = command(&["update", "--report-heartbeat=60s", "--report-expiry=90s"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("the binary runs");
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "nodescope: update: --report-expiry 90s must be at least twice --report-heartbeat 60s, \
         so that one lost write does not expire a live instance\n"
    );
    for (subcommand, flag, value, why) in cases {
        let mut args = subcommand.to_vec();
        args.extend_from_slice(&[flag, value]);
        let output = command(&args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("the binary runs");
        assert_exit(&output, 2);
        let name = flag
            .trim_start_matches("--")
            .replace('-', "_")
            .to_uppercase();
        assert_eq!(
            stderr(&output),
            format!(
                "error: invalid value '{value}' for '{flag} <{name}>': {why}\n\n\
                 For more information, try '--help'.\n"
            ),
            "{args:?}"
        );
    }
}

/// Issue #30: a group target the VPA CRD's pattern lets through but no pod
/// can have (`-150m`) is no recommendation: the plan leaves the pods of
/// that group alone and says why, where main planned `cpu 100m→-1`.
#[test]
fn a_negative_group_target_is_planned_as_nothing_to_do_with_the_reason() {
    let text = std::fs::read_to_string(root().join("examples/update/cluster.yaml")).expect("read");
    let text = text.replace(
        "target: {cpu: 600m, memory: 600Mi}",
        "target: {cpu: \"-150m\", memory: 600Mi}",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), text).expect("write");
    let store = format!("file:{}", dir.path().display());
    let output = nodescope(&["update", "--plan", "--store", &store, "-o", "json"]);
    assert_exit(&output, 0);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("json");
    let za: Vec<&serde_json::Value> = plan["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|p| p["scopeValue"] == "za")
        .collect();
    assert!(!za.is_empty(), "{plan}");
    for item in za {
        assert_eq!(item["action"], "none", "{item}");
        assert_eq!(item["reason"], "unusable recommendation", "{item}");
        assert_eq!(
            item["message"],
            "container \"agent\": its cpu target \"-150m\" is negative in VerticalPodAutoscaler \
             monitoring/agent, so it has no applicable recommendation; container left unchanged",
            "{item}"
        );
        assert_eq!(item["containers"], serde_json::json!([]), "{item}");
    }
}

/// examples/update without its VerticalPodAutoscaler: pods, but none a
/// scoped VPA controls.
fn store_without_vpa() -> (tempfile::TempDir, String) {
    let text = std::fs::read_to_string(root().join("examples/update/cluster.yaml")).expect("read");
    let kept: Vec<&str> = text
        .split("\n---\n")
        .filter(|d| !d.contains("\nkind: VerticalPodAutoscaler\n"))
        .collect();
    assert_eq!(kept.len(), 9, "the example's documents but its VPA");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cluster.yaml"), kept.join("\n---\n")).expect("write");
    let store = format!("file:{}", dir.path().display());
    (dir, store)
}

#[test]
fn a_plan_of_no_pod_says_no_resources_found_as_kubectl_does() {
    let (_dir, no_vpa) = store_without_vpa();
    let example = "file:examples/update";
    for (args, said) in [
        (vec!["--store", &no_vpa], "No resources found\n"),
        (vec!["--store", &no_vpa, "-A"], "No resources found\n"),
        (
            vec!["--store", example, "-n", "nope"],
            "No resources found in nope namespace.\n",
        ),
        (
            vec!["--store", example, "-l", "app=nope"],
            "No resources found\n",
        ),
        (
            vec!["--store", example, "-n", "monitoring", "-l", "app=nope"],
            "No resources found in monitoring namespace.\n",
        ),
        (
            vec![
                "--store",
                example,
                "-n",
                "nope",
                "-o",
                "wide",
                "--exit-code",
            ],
            "No resources found in nope namespace.\n",
        ),
    ] {
        let mut all = vec!["update", "--plan"];
        all.extend_from_slice(&args);
        let output = nodescope(&all);
        assert_exit(&output, 0);
        assert_eq!(stdout(&output), "", "{args:?}: no header alone");
        assert_eq!(stderr(&output), said, "{args:?}");
    }
    // A List stays a List, empty, as `kubectl get -o json` prints it.
    for (format, text) in [
        (
            "json",
            "{\n  \"apiVersion\": \"v1\",\n  \"items\": [],\n  \"kind\": \"List\"\n}\n",
        ),
        ("yaml", "apiVersion: v1\nitems: []\nkind: List\n"),
    ] {
        let output = nodescope(&[
            "update", "--plan", "--store", example, "-n", "nope", "-o", format,
        ]);
        assert_exit(&output, 0);
        assert_eq!(stdout(&output), text, "{format}");
        assert_eq!(stderr(&output), "", "{format}");
    }
}

#[test]
fn reasons_are_a_few_words_and_wide_adds_the_sentence() {
    let table = nodescope(&["update", "--plan", "--store", "file:examples/update"]);
    assert_exit(&table, 0);
    assert_eq!(
        stdout(&table),
        "POD                   NODE      SCOPE VALUE   ACTION     REASON               CURRENT → DESIRED\n\
         monitoring/agent-b2   node-b2   zb            none       at target            -\n\
         monitoring/agent-a    node-a    za            resize     below target         agent: cpu 100m→600m, memory 100Mi→600Mi (limits cpu 200m→1200m, memory 200Mi→1200Mi)\n\
         monitoring/agent-x    node-x    __absent__    resize     below target         agent: cpu 100m→200m, memory 100Mi→200Mi (limits cpu 200m→400m, memory 200Mi→400Mi)\n\
         monitoring/agent-b    node-b    zb            deferred   eviction tolerance   -\n"
    );
    let longest = stdout(&table)
        .lines()
        .filter_map(|l| l.split("   ").map(str::trim).nth(4))
        .map(str::len)
        .max();
    assert!(longest.is_some_and(|n| n <= 20), "{longest:?}");
    let wide = nodescope(&[
        "update",
        "--plan",
        "--store",
        "file:examples/update",
        "-o",
        "wide",
        "-l",
        "!canary",
        "-n",
        "monitoring",
    ]);
    assert_exit(&wide, 0);
    let text = stdout(&wide);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("   REASON               CURRENT → DESIRED   ")
            && lines[0].ends_with("   MESSAGE"),
        "{text}"
    );
    assert!(
        lines[4].ends_with(
            "   above its recommendation: the summed relative difference of its requests from \
             the recommendation (upstream's resource diff) is 0.86, at least \
             --pod-update-threshold 0.10; held back: 2 of 4 pods may be disrupted at once \
             (--eviction-tolerance) and that many already are"
        ),
        "{text}"
    );
    assert!(lines[1].ends_with("   at its recommendation"), "{text}");
    // JSON and YAML carry both: the few words and the sentence.
    let json = nodescope(&[
        "update",
        "--plan",
        "--store",
        "file:examples/update",
        "-o",
        "json",
    ]);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    let a = &plan["items"][1];
    assert_eq!(
        (&a["pod"], &a["reason"], &a["message"]),
        (
            &serde_json::json!("agent-a"),
            &serde_json::json!("below target"),
            &serde_json::json!(
                "below its recommendation: the summed relative difference of its requests from \
                 the recommendation (upstream's resource diff) is 10.00, at least \
                 --pod-update-threshold 0.10"
            )
        )
    );
}
