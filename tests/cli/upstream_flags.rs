//! The updater and the recommender take upstream's names for the flags
//! they share with upstream's updater and recommender, and nodescope's
//! earlier names as hidden aliases: a Deployment written for either starts,
//! and `--help` shows one name per flag.

use super::{assert_exit, command, stderr, stdout};
use std::net::TcpListener;
use std::path::PathBuf;

/// A kubeconfig naming a server nothing listens on: enough for the
/// commands to get past building their client, which does not connect.
fn kubeconfig_nowhere(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n\
         clusters: [{name: nowhere, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         users: [{name: nowhere, user: {token: t}}]\n\
         contexts: [{name: nowhere, context: {cluster: nowhere, user: nowhere}}]\n",
    )
    .expect("kubeconfig written");
    path
}

fn help(subcommand: &str) -> String {
    let output = command(&[subcommand, "--help"]).output().expect("runs");
    assert_exit(&output, 0);
    stdout(&output)
}

#[test]
fn help_shows_upstreams_names_and_not_the_hidden_aliases() {
    for subcommand in ["update", "recommend"] {
        let text = help(subcommand);
        for shown in [
            "--address <ADDRESS>",
            "--leader-elect-lease-duration <LEADER_ELECT_LEASE_DURATION>",
            "--leader-elect-resource-name <LEADER_ELECT_RESOURCE_NAME>",
            "--leader-elect-resource-namespace <LEADER_ELECT_RESOURCE_NAMESPACE>",
            "--vpa-object-namespace <VPA_OBJECT_NAMESPACE>",
            "--ignored-vpa-object-namespaces <IGNORED_VPA_OBJECT_NAMESPACES>",
        ] {
            assert!(
                text.contains(shown),
                "{subcommand}: {shown} missing:\n{text}"
            );
        }
        for hidden in [
            "metrics-listen",
            "--lease-duration",
            "--lease-name",
            "--lease-namespace",
        ] {
            assert!(
                !text.contains(hidden),
                "{subcommand}: {hidden} shown:\n{text}"
            );
        }
    }
}

/// The address each spelling names is the one bound: with the port taken,
/// the command stops naming it, whichever name set it.
#[test]
fn the_address_is_bound_under_its_upstream_name_its_alias_and_upstreams_port_only_form() {
    let busy = TcpListener::bind("0.0.0.0:0").expect("bind");
    let port = busy.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = kubeconfig_nowhere(&dir);
    for (subcommand, expected) in [
        (
            "update",
            format!("nodescope: update: --address 0.0.0.0:{port}: "),
        ),
        (
            "recommend",
            format!("nodescope: recommend: cannot listen on 0.0.0.0:{port} (--address): "),
        ),
    ] {
        for flag in ["--address", "--metrics-listen"] {
            for value in [format!(":{port}"), format!("0.0.0.0:{port}")] {
                let output = command(&[subcommand, "--no-report", flag, &value])
                    .env("KUBECONFIG", &kubeconfig)
                    .output()
                    .expect("runs");
                assert_exit(&output, 2);
                let err = stderr(&output);
                assert!(
                    err.lines().any(|l| l.starts_with(&expected)),
                    "{subcommand} {flag} {value}: {err}"
                );
            }
        }
    }
}

#[test]
fn a_malformed_address_is_refused_when_parsed_under_either_name() {
    for subcommand in ["update", "recommend"] {
        for flag in ["--address", "--metrics-listen"] {
            let output = command(&[subcommand, flag, "8943"]).output().expect("runs");
            assert_exit(&output, 2);
            assert_eq!(
                stderr(&output),
                "error: invalid value '8943' for '--address <ADDRESS>': expected HOST:PORT or \
                 :PORT (such as 0.0.0.0:8943 or :8943), not \"8943\"\n\n\
                 For more information, try '--help'.\n",
                "{subcommand} {flag}"
            );
        }
    }
}

/// nodescope's earlier Lease flags still parse, into upstream's: an
/// offline run takes them, and a bad value is refused under the new name.
#[test]
fn the_earlier_lease_flags_are_taken_as_upstreams_leader_election_flags() {
    let old = [
        "--lease-name",
        "x",
        "--lease-namespace",
        "y",
        "--lease-duration",
        "20s",
    ];
    let runs: [&[&str]; 2] = [
        &["update", "--plan", "--store", "file:examples/update"],
        &["recommend", "--demo"],
    ];
    for run in runs {
        let output = command(&[run, &old[..]].concat()).output().expect("runs");
        assert_exit(&output, 0);
        let output = command(&[run, &["--lease-duration", "1s"][..]].concat())
            .output()
            .expect("runs");
        assert_exit(&output, 2);
        assert!(
            stderr(&output).starts_with(
                "error: invalid value '1s' for \
                 '--leader-elect-lease-duration <LEADER_ELECT_LEASE_DURATION>'"
            ),
            "{run:?}: {}",
            stderr(&output)
        );
    }
}

/// A copy of `file` in `dir`, and beside it the same objects in namespace
/// `team-a` (Nodes left out: they have no namespace, and the store holds
/// each object once).
fn with_team_a(file: &str, dir: &std::path::Path) {
    let text = std::fs::read_to_string(super::root().join(file)).expect("read");
    std::fs::write(dir.join("a.yaml"), &text).expect("write");
    let copy: Vec<String> = text
        .split("\n---\n")
        .filter(|doc| !doc.contains("kind: Node\n"))
        .map(|doc| doc.replace("namespace: monitoring", "namespace: team-a"))
        .collect();
    std::fs::write(dir.join("b.yaml"), copy.join("\n---\n")).expect("write");
}

fn json(output: &std::process::Output) -> serde_json::Value {
    assert_exit(output, 0);
    serde_json::from_str(&stdout(output)).expect("json")
}

/// The namespaces of the pods a plan names, each once.
fn planned(args: &[&str]) -> Vec<String> {
    let plan = json(&command(args).output().expect("runs"));
    let mut namespaces: Vec<String> = plan["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| p["namespace"].as_str().unwrap_or_default().to_owned())
        .collect();
    namespaces.dedup();
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

#[test]
fn the_updater_plans_only_the_vpas_of_the_namespaces_it_handles() {
    let dir = tempfile::tempdir().expect("tempdir");
    with_team_a("examples/update/cluster.yaml", dir.path());
    let store = format!("file:{}", dir.path().display());
    let plan = ["update", "--plan", "--store", &store, "-o", "json"];
    let both = ["monitoring".to_owned(), "team-a".to_owned()];
    assert_eq!(planned(&plan), both);
    let team_a = ["team-a".to_owned()];
    assert_eq!(
        planned(&[&plan[..], &["--vpa-object-namespace", "team-a"]].concat()),
        team_a
    );
    assert_eq!(
        planned(
            &[
                &plan[..],
                &["--ignored-vpa-object-namespaces", "kube-system,monitoring"]
            ]
            .concat()
        ),
        team_a
    );
    assert_eq!(
        planned(
            &[
                &plan[..],
                &[
                    "--vpa-object-namespace",
                    "",
                    "--ignored-vpa-object-namespaces="
                ]
            ]
            .concat()
        ),
        both
    );
}

/// Which VPAs of an offline run got a status written.
fn recommended(args: &[&str]) -> Vec<String> {
    let list = json(&command(args).output().expect("runs"));
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|vpa| vpa.get("status").is_some())
        .map(|vpa| {
            vpa["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn the_recommender_computes_only_the_vpas_of_the_namespaces_it_handles() {
    let store = tempfile::tempdir().expect("tempdir");
    with_team_a("examples/recommend/store/zone-agent.yaml", store.path());
    let metrics = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(super::root().join("examples/recommend/metrics")).expect("ls") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(metrics.path().join(&name), &text).expect("write");
        let copy = text.replace("\"namespace\": \"monitoring\"", "\"namespace\": \"team-a\"");
        std::fs::write(metrics.path().join(format!("team-a-{name}")), copy).expect("write");
    }
    let store = format!("file:{}", store.path().display());
    let metrics = format!("file:{}", metrics.path().display());
    let run = [
        "recommend",
        "--store",
        &store,
        "--metrics",
        &metrics,
        "-o",
        "json",
    ];
    assert_eq!(recommended(&run), ["monitoring", "team-a"]);
    assert_eq!(
        recommended(&[&run[..], &["--vpa-object-namespace", "team-a"]].concat()),
        ["team-a"]
    );
    assert_eq!(
        recommended(&[&run[..], &["--ignored-vpa-object-namespaces", "team-a"]].concat()),
        ["monitoring"]
    );
}

/// Refused before anything is read or connected, offline and against a
/// cluster alike.
#[test]
fn one_namespace_and_ignored_namespaces_exclude_each_other_as_upstream_says() {
    let both = [
        "--vpa-object-namespace",
        "team-a",
        "--ignored-vpa-object-namespaces",
        "kube-system",
    ];
    let why = "--vpa-object-namespace and --ignored-vpa-object-namespaces exclude each other, \
               as upstream's do: give one";
    let runs: [(&[&str], String); 4] = [
        (&["update"], format!("nodescope: update: {why}\n")),
        (
            &["update", "--plan", "--store", "file:examples/update"],
            format!("nodescope: update: {why}\n"),
        ),
        (&["recommend"], format!("nodescope: recommend: {why}\n")),
        (&["recommend", "--demo"], format!("nodescope: {why}\n")),
    ];
    for (run, expected) in runs {
        let output = command(&[run, &both[..]].concat())
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("runs");
        assert_exit(&output, 2);
        assert_eq!(stderr(&output), expected, "{run:?}");
    }
}

#[test]
fn the_client_pace_takes_upstreams_names_and_refuses_a_rate_that_is_not_one() {
    for subcommand in [&["update"][..], &["balloon", "controller"][..]] {
        let mut words = subcommand.to_vec();
        words.push("--help");
        let output = command(&words).output().expect("runs");
        assert_exit(&output, 0);
        let text = stdout(&output);
        for shown in [
            "--kube-api-qps <KUBE_API_QPS>",
            "--kube-api-burst <KUBE_API_BURST>",
        ] {
            assert!(
                text.contains(shown),
                "{subcommand:?}: {shown} missing:\n{text}"
            );
        }
        for (flag, value, message) in [
            (
                "--kube-api-qps",
                "-1",
                "error: invalid value '-1' for '--kube-api-qps <KUBE_API_QPS>': \"-1\" is not a rate: a number of requests a second, 0 or more, such as 50",
            ),
            (
                "--kube-api-qps",
                "NaN",
                "error: invalid value 'NaN' for '--kube-api-qps <KUBE_API_QPS>': \"NaN\" is not a rate: a number of requests a second, 0 or more, such as 50",
            ),
            (
                "--kube-api-burst",
                "0",
                "error: invalid value '0' for '--kube-api-burst <KUBE_API_BURST>': 0 is not in 1..=4294967295",
            ),
        ] {
            let mut words = subcommand.to_vec();
            let arg = format!("{flag}={value}");
            words.push(&arg);
            let output = command(&words).output().expect("runs");
            assert_exit(&output, 2);
            let err = stderr(&output);
            assert_eq!(err.lines().next(), Some(message), "{subcommand:?} {arg}:\n{err}");
        }
    }
}
