//! End-to-end on a real control plane: nodescope's webhook, policies and
//! manifests against a real etcd and kube-apiserver, as envtest runs them.
//!
//! `cargo test --test e2e` (also part of `cargo test`). The binaries come
//! from `KUBEBUILDER_ASSETS` (`setup-envtest use 1.36 -p path`) or
//! setup-envtest's default store. When the variable is unset and the store
//! has none, the suite says so in one line and passes, so a fresh clone's
//! tests never depend on it; when the variable is set (even empty) and does
//! not hold etcd and kube-apiserver, the suite fails (support/assets.rs).
//!
//! One control plane serves the whole suite, and the steps run in order:
//! `install` puts the CRDs in place that the later steps use. Each step
//! works in namespaces of its own. A custom harness (not libtest) so the
//! "not run" line is never swallowed by output capture. Arguments that do
//! not start with `-` filter steps by name.

mod apply_twice;
mod asset_rules;
mod balloon;
#[path = "../common/mod.rs"]
mod common;
mod dry_run_kinds;
mod election;
mod enforcers;
mod failures;
mod feature_contention;
mod feature_reports;
mod features;
mod guard;
mod install;
mod mutation;
mod optional_crds;
mod portable_scope;
mod recommend;
mod recommend_owners;
mod recommend_upstream;
mod scopes;
mod startup_boost;
mod status_lease;
mod status_size;
mod support;
mod update;
mod updater_rbac;
mod watches;

use futures::future::BoxFuture;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use support::{Assets, ControlPlane, Found};

type Step = for<'a> fn(&'a ControlPlane) -> BoxFuture<'a, ()>;

const STEPS: &[(&str, Step)] = &[
    // First: a cluster with only the VPA CRD, before `install` adds the rest.
    ("optional-crds", |p| optional_crds::run(p).boxed()),
    ("install", |p| install::run(p).boxed()),
    ("dry-run-kinds", |p| dry_run_kinds::run(p).boxed()),
    // Right after install: it re-applies what install applied, with the
    // webhook configurations, and removes those again.
    ("apply-twice", |p| apply_twice::run(p).boxed()),
    // Before any step removes a binding with a ConfigMap param: see guard.rs.
    ("guard", |p| guard::run(p).boxed()),
    ("features", |p| features::run(p).boxed()),
    ("enforcers", |p| enforcers::run(p).boxed()),
    ("portable-scope", |p| portable_scope::run(p).boxed()),
    ("mutation", |p| mutation::run(p).boxed()),
    ("scopes", |p| scopes::run(p).boxed()),
    ("recommend", |p| recommend::run(p).boxed()),
    ("recommend-upstream", |p| recommend_upstream::run(p).boxed()),
    ("recommend-owners", |p| recommend_owners::run(p).boxed()),
    ("status-size", |p| status_size::run(p).boxed()),
    ("update", |p| update::run(p).boxed()),
    ("startup-boost", |p| startup_boost::run(p).boxed()),
    ("watches", |p| watches::run(p).boxed()),
    ("failures", |p| failures::run(p).boxed()),
    ("status-lease", |p| status_lease::run(p).boxed()),
    ("updater-rbac", |p| updater_rbac::run(p).boxed()),
    ("balloon", |p| balloon::run(p).boxed()),
    ("feature-contention", |p| feature_contention::run(p).boxed()),
    // Last: it deletes and re-creates the Features nodescope owns.
    ("feature-reports", |p| feature_reports::run(p).boxed()),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let steps: Vec<&(&str, Step)> = STEPS
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &steps {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    if steps.is_empty() {
        // `cargo test some_filter` passes its filter to every test binary.
        println!("e2e: no step matches {filters:?}; nothing started");
        return ExitCode::SUCCESS;
    }
    if !asset_rules::is_child() {
        match asset_rules::check() {
            Ok(()) => println!("e2e: asset rules ok (unset: not run; set empty or wrong: FAILED)"),
            Err(why) => {
                println!("e2e: FAILED: asset rules: {why}");
                return ExitCode::FAILURE;
            }
        }
    }
    let assets = match Assets::find() {
        Ok(Found::Assets(assets)) => assets,
        Ok(Found::NotAsked(why)) => {
            println!("e2e: not run: no etcd/kube-apiserver ({why}); set KUBEBUILDER_ASSETS");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            // Asked for and not there: a run that looks green but tested
            // nothing would hide it.
            println!("e2e: FAILED: {why}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            println!("e2e: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let plane = match runtime.block_on(ControlPlane::start(&assets)) {
        Ok(plane) => plane,
        Err(why) => {
            println!("e2e: the control plane did not start: {why}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "e2e: kube-apiserver {} at {} and etcd, from {}, ready in {:.1} s",
        plane.version,
        plane.url,
        assets.dir.display(),
        plane.started_in.as_secs_f64()
    );
    // The nodescope servers the steps start find the control plane here.
    // Set before any step runs, while no other thread reads the environment.
    std::env::set_var("KUBECONFIG", &plane.kubeconfig);

    let (mut passed, mut failed) = (0, 0);
    for (name, step) in steps {
        println!("e2e: {name} ...");
        let outcome = runtime.block_on(AssertUnwindSafe(step(&plane)).catch_unwind());
        match outcome {
            Ok(()) => {
                println!("e2e: {name} ok");
                passed += 1;
            }
            Err(panic) => {
                let message = common::panic_message(panic.as_ref());
                println!("e2e: {name} FAILED: {message}");
                failed += 1;
            }
        }
    }
    drop(plane);
    println!("e2e: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
