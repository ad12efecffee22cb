//! The suite's rules on `KUBEBUILDER_ASSETS`, checked on this very binary:
//! it runs itself as a subprocess unset (with an empty HOME: "not run", exit
//! 0), set but empty and set to a directory without the binaries (both
//! "FAILED", exit 1). The children exit before any control plane starts.

use std::process::Command;

/// Set in the children, so they do not check again.
const CHILD: &str = "NODESCOPE_E2E_ASSET_RULES_CHILD";

/// Whether this process is one of the children.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs this binary with `KUBEBUILDER_ASSETS` as given and an empty HOME.
fn run(variable: Option<&str>) -> Result<(Option<i32>, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let home = tempfile::tempdir().map_err(|e| format!("no temporary HOME: {e}"))?;
    let mut command = Command::new(exe);
    command.env(CHILD, "1").env("HOME", home.path());
    match variable {
        Some(value) => command.env("KUBEBUILDER_ASSETS", value),
        None => command.env_remove("KUBEBUILDER_ASSETS"),
    };
    let output = command
        .output()
        .map_err(|e| format!("cannot run this binary: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    Ok((output.status.code(), text))
}

/// Checks the three cases; the error says which one broke, and how.
pub fn check() -> Result<(), String> {
    let cases: [(&str, Option<&str>, i32, &str); 3] = [
        ("unset", None, 0, "e2e: not run: "),
        (
            "set but empty",
            Some(""),
            1,
            "e2e: FAILED: KUBEBUILDER_ASSETS is set but empty",
        ),
        (
            "set to /nonexistent",
            Some("/nonexistent"),
            1,
            "e2e: FAILED: KUBEBUILDER_ASSETS=/nonexistent does not hold etcd and kube-apiserver",
        ),
    ];
    for (name, variable, code, start) in cases {
        let (got, text) = run(variable)?;
        if got != Some(code) || !text.starts_with(start) {
            return Err(format!(
                "KUBEBUILDER_ASSETS {name}: exit {got:?} and {text:?}; want exit {code} and a line starting {start:?}"
            ));
        }
    }
    Ok(())
}
