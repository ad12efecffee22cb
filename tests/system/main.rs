//! The system suite: nodescope installed from `manifests/` on a cluster that
//! behaves like one. A real etcd, kube-apiserver, kube-controller-manager
//! and kube-scheduler; a simulated kubelet (this suite's code) for N Nodes;
//! every nodescope component as a process with a token of its own
//! ServiceAccount; a real Prometheus scraping them through the shipped
//! PodMonitors for the fault steps. docs/system.md says what each step
//! shows.
//!
//! `cargo test --test system` (also part of `cargo test`). The binaries come
//! from the directory the e2e suite uses (`KUBEBUILDER_ASSETS`, else
//! setup-envtest's store), which must also hold kube-controller-manager and
//! kube-scheduler. The same rules: nothing asked for and nothing there is
//! one "not run" line and a pass; asked for and missing is a failure.
//! `NODESCOPE_SYSTEM_NODES` sets N (50 by default).

mod balloons;
#[path = "../common/mod.rs"]
mod common;
mod components;
mod deferred;
mod disable;
mod faults;
mod floor;
mod front;
mod install;
mod join;
mod kubelet;
mod ledger;
mod plane;
mod prometheus;
mod report;
mod scenario;
mod steps;
#[path = "../e2e/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;
mod workloads;

use std::process::ExitCode;
use support::{Assets, Found};

/// The system suite's own binaries beside the e2e suite's.
pub struct SystemAssets {
    pub base: Assets,
    pub controller_manager: std::path::PathBuf,
    pub scheduler: std::path::PathBuf,
}

/// The e2e suite's rules, with two more binaries required.
fn find() -> Result<Option<SystemAssets>, String> {
    let asked = std::env::var_os("KUBEBUILDER_ASSETS").is_some();
    let base = match Assets::find()? {
        Found::Assets(assets) => assets,
        Found::NotAsked(why) => {
            println!("system: not run: no etcd/kube-apiserver ({why}); set KUBEBUILDER_ASSETS");
            return Ok(None);
        }
    };
    let controller_manager = base.dir.join("kube-controller-manager");
    let scheduler = base.dir.join("kube-scheduler");
    let missing: Vec<String> = [&controller_manager, &scheduler]
        .into_iter()
        .filter(|b| !b.is_file())
        .map(|b| format!("{} is missing", b.display()))
        .collect();
    if !missing.is_empty() {
        let why = format!(
            "{}: the system suite also needs kube-controller-manager and kube-scheduler \
             (the Kubernetes server release archive holds both; docs/system.md)",
            missing.join(", ")
        );
        if asked {
            return Err(format!("KUBEBUILDER_ASSETS={} {why}", base.dir.display()));
        }
        println!("system: not run: {why}");
        return Ok(None);
    }
    Ok(Some(SystemAssets {
        base,
        controller_manager,
        scheduler,
    }))
}

fn nodes() -> Result<usize, String> {
    match std::env::var("NODESCOPE_SYSTEM_NODES") {
        Err(_) => Ok(50),
        Ok(text) => match text.parse::<usize>() {
            Ok(n) if n >= 10 => Ok(n),
            _ => Err(format!(
                "NODESCOPE_SYSTEM_NODES={text:?}: a whole number of nodes, at least 10"
            )),
        },
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("system: test");
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| "system".contains(f.as_str())) {
        // `cargo test some_filter` passes its filter to every test binary.
        println!("system: not selected by {filters:?}; nothing started");
        return ExitCode::SUCCESS;
    }
    let n = match nodes() {
        Ok(n) => n,
        Err(why) => {
            println!("system: FAILED: {why}");
            return ExitCode::FAILURE;
        }
    };
    let assets = match find() {
        Ok(Some(assets)) => assets,
        Ok(None) => return ExitCode::SUCCESS,
        Err(why) => {
            println!("system: FAILED: {why}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            println!("system: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(scenario::run(&assets, n)))
            .await
    });
    match outcome {
        Ok(()) => {
            println!("system: passed (N = {n})");
            ExitCode::SUCCESS
        }
        Err(panic) => {
            let message = common::panic_message(panic.as_ref());
            println!("system: FAILED: {message}");
            ExitCode::FAILURE
        }
    }
}
