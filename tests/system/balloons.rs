//! Step 5: `nodescope balloon set` on a tenth of the nodes. Each balloon is
//! resized in place to hold allocatable minus the usable size; `balloon
//! status` and the controller's usable-capacity metrics say so. An upsize
//! the node's other pods would not fit under is refused and changes
//! nothing.

use crate::kubelet::{bytes, milli};
use crate::scenario::{say, until, World};
use crate::steps::node_of;
use crate::support::nodescope::scrape;
use crate::workloads::{daemonset_of, pod_resources};

/// The usable size asked of a node: three quarters of it.
fn usable(cpu: i64, memory: i64) -> (i64, i64) {
    (cpu * 3 / 4, memory * 3 / 4)
}

/// The value of one series in a `/metrics` text.
pub fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

pub async fn run(world: &mut World) {
    let shapes: Vec<_> = world
        .nodes
        .all()
        .into_iter()
        .filter(|s| {
            s.name[5..]
                .parse::<usize>()
                .is_ok_and(|i| i % 10 == 5 && i < world.n)
        })
        .collect();
    let before = world.ledger.book();
    // Step 4's two pods may be evicted meanwhile (at N = 1,000 this step
    // outlasts its five minutes); nothing else may be.
    let deferred = world.deferred.clone();
    // All at once, as an operator's loop over the nodes would; each
    // `--wait` still answers for its own node.
    let children: Vec<_> = shapes
        .iter()
        .map(|shape| {
            let (cpu, memory) = usable(shape.cpu, shape.memory);
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_nodescope"))
                .args(["balloon", "set", &shape.name])
                .arg(format!("--usable-cpu={cpu}m"))
                .arg(format!("--usable-memory={memory}"))
                .args(["--wait", "--timeout=120s"])
                .env("KUBECONFIG", &world.cluster.plane.kubeconfig)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{e}"));
            (shape.name.clone(), child)
        })
        .collect();
    for (node, child) in children {
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "balloon set {node}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // An upsize that cannot fit: usable 100m leaves no room for the
    // node's three other pods.
    let refused = world
        .nodes
        .get("node-0007")
        .unwrap_or_else(|| panic!("no node-0007"));
    let (code, out, err) = world.nodescope(&[
        "balloon",
        "set",
        &refused.name,
        "--usable-cpu=100m",
        "--wait",
        "--timeout=30s",
    ]);
    assert_eq!(
        code, 1,
        "balloon set {} --usable-cpu=100m: {out}{err}",
        refused.name
    );

    let (code, out, err) = world.nodescope(&["balloon", "status", "-o", "json"]);
    assert_eq!(code, 0, "balloon status: {err}");
    let status: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let rows = status["items"].as_array().cloned().unwrap_or_default();
    let states = |state: &str| rows.iter().filter(|r| r["state"] == state).count();
    assert_eq!(
        (states("Settled"), states("Refused"), states("Unmanaged")),
        (shapes.len(), 1, rows.len() - shapes.len() - 1),
        "balloon status: {out}"
    );
    // The controller's gauges follow a pass that saw every resize and the
    // refusal: wait for a scrape that shows them all, not one instant's.
    let port = world.component("nodescope-balloon").metrics_port;
    let expected: Vec<(String, f64)> = shapes
        .iter()
        .map(|shape| {
            (
                format!(
                    "nodescope_balloon_usable{{node=\"{}\",resource=\"cpu\"}}",
                    shape.name
                ),
                usable(shape.cpu, shape.memory).0 as f64 / 1000.0,
            )
        })
        .chain(std::iter::once((
            format!(
                "nodescope_balloon_node_state{{node=\"{}\",state=\"Refused\"}}",
                refused.name
            ),
            1.0,
        )))
        .collect();
    let expected = std::sync::Arc::new(expected);
    until(
        world,
        "the balloon controller's gauges at every set balloon and the refusal",
        std::time::Duration::from_secs(60),
        |_| {
            let expected = expected.clone();
            Box::pin(async move {
                let metrics = scrape(port).await;
                let off: Vec<String> = expected
                    .iter()
                    .filter(|(series, want)| value(&metrics, series) != Some(*want))
                    .map(|(series, want)| {
                        format!("{series} {:?}, want {want}", value(&metrics, series))
                    })
                    .collect();
                if off.is_empty() {
                    Ok(())
                } else {
                    Err(off.join("; "))
                }
            })
        },
    )
    .await;
    for shape in &shapes {
        let (cpu, memory) = usable(shape.cpu, shape.memory);
        let row = rows
            .iter()
            .find(|r| r["node"] == shape.name.as_str())
            .unwrap_or_else(|| panic!("{}: no row", shape.name));
        assert_eq!(row["state"], "Settled", "{row}");
        assert_eq!(
            milli(row["usable"]["cpu"].as_str().unwrap_or("0")),
            cpu,
            "{row}"
        );
        assert_eq!(
            bytes(row["usable"]["memory"].as_str().unwrap_or("0")),
            memory,
            "{row}"
        );
        assert_eq!(
            milli(row["balloon"]["cpu"].as_str().unwrap_or("0")),
            shape.cpu - cpu,
            "{row}"
        );
    }
    let row = rows
        .iter()
        .find(|r| r["node"] == refused.name.as_str())
        .unwrap_or_else(|| panic!("no row for {}", refused.name));
    assert_eq!(row["state"], "Refused", "{row}");
    assert_eq!(row["balloon"]["cpu"], "500m", "{row}");

    // Every balloon resize came from `set`, one each; nothing evicted.
    let after = world.ledger.book();
    let resized = |b: &crate::ledger::Book| crate::ledger::Book::count(&b.resized, "node-balloon");
    assert_eq!(
        resized(&after) - resized(&before),
        shapes.len(),
        "balloon resizes"
    );
    let deleted = &after.deleted_pods[before.deleted_pods.len()..];
    assert!(
        deleted.iter().all(|p| deferred.contains(p)),
        "deletions during the balloon step: {deleted:?}"
    );
    let balloons = world.pods("kube-system").await;
    for shape in &shapes {
        let balloon = balloons
            .iter()
            .find(|p| daemonset_of(p) == "node-balloon" && node_of(p) == shape.name)
            .unwrap_or_else(|| panic!("no balloon on {}", shape.name));
        let (cpu, memory) = usable(shape.cpu, shape.memory);
        assert_eq!(
            pod_resources(balloon)[2],
            (shape.cpu - cpu, shape.memory - memory),
            "{}'s balloon",
            shape.name
        );
    }
    say(world.began, &format!(
        "step 5: balloons of {} nodes resized in place to hold a quarter each ({} resizes, 0 evictions); `balloon status` and nodescope_balloon_usable agree; {} refused (usable 100m), its balloon unchanged",
        shapes.len(),
        shapes.len(),
        refused.name
    ));
}
