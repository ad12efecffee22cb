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
