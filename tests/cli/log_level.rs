//! Issue #42: a `--log-level` that is not a level is refused when parsed,
//! from the flag and from `NODESCOPE_LOG_LEVEL`. tracing reads a bare word
//! as a module name, so `warning` used to start a server that logged
//! nothing at all, a failed policy reload included.

use super::{assert_exit, command, stderr, stdout};

fn refused(value: &str) -> String {
    refused_from(value, "'--log-level <LOG_LEVEL>'")
}

/// The refusal, blaming `source`: the flag, or the environment variable
/// the value came from.
fn refused_from(value: &str, source: &str) -> String {
    format!(
        "error: invalid value '{value}' for {source}: \"{value}\" is not a log \
         filter (\"{value}\" is not a level: expected one of \"off\", \"error\", \"warn\", \
         \"info\", \"debug\", \"trace\", or MODULE=LEVEL); such as info, or \
         info,nodescope=debug\n\nFor more information, try '--help'.\n"
    )
}

#[test]
fn a_log_level_that_is_not_a_level_is_refused_by_serve_and_a_controller() {
    for subcommand in [&["serve", "--demo"][..], &["features", "controller"][..]] {
        for value in ["nonsense", "warning", "eror"] {
            let mut args = subcommand.to_vec();
            args.extend_from_slice(&["--log-level", value]);
            let output = command(&args)
                .env("KUBECONFIG", "/nonexistent/kubeconfig")
                .output()
                .expect("the binary runs");
            assert_exit(&output, 2);
            assert_eq!(stderr(&output), refused(value), "{args:?}");
            assert_eq!(stdout(&output), "", "{args:?}");
        }
    }
}

#[test]
fn nodescope_log_level_that_is_not_a_level_is_refused_by_serve() {
    let output = command(&["serve", "--demo"])
        .env("NODESCOPE_LOG_LEVEL", "nonsense")
        .output()
        .expect("the binary runs");
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        refused_from(
            "nonsense",
            "NODESCOPE_LOG_LEVEL (the environment variable of --log-level)"
        )
    );
    assert_eq!(stdout(&output), "");
}
