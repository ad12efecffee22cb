//! Fault 3: a node's kubelet answers its balloon's resize `Infeasible`.
//! `balloon set --wait` exits 1, the node is reported (`balloon status`,
//! the state gauge, `NodescopeBalloonResizeInfeasible`), and nothing is
//! evicted for it. The node stays so for the rest of the run.

use super::webhook::alert_state;
use crate::kubelet::milli;
use crate::scenario::{say, until, World};
use crate::steps::node_of;
use crate::workloads::{daemonset_of, pod_resources};
use std::time::Duration;

pub const NODE: &str = "node-0003";

pub async fn run(world: &mut World) {
    let shape = world.nodes.get(NODE).unwrap_or_else(|| panic!("no {NODE}"));
    world.kubelet.set_infeasible(NODE, true);
    world.ledger.reset();
    let usable = format!("--usable-cpu={}m", shape.cpu * 3 / 4);
    let (code, out, err) =
        world.nodescope(&["balloon", "set", NODE, &usable, "--wait", "--timeout=60s"]);
    assert_eq!(code, 1, "balloon set {NODE} {usable}: {out}{err}");
    assert!(
        format!("{out}{err}").contains("Infeasible"),
        "balloon set {NODE}: the answer does not say Infeasible: {out}{err}"
    );
    let (code, out, err) =
        world.nodescope(&["balloon", "status", NODE, "-o", "json", "--exit-code"]);
    assert_eq!(code, 1, "balloon status {NODE}: {out}{err}");
    let status: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let row = status["items"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["node"] == NODE))
        .cloned()
        .unwrap_or_else(|| panic!("balloon status: no row for {NODE}: {out}"));
    assert_eq!(row["state"], "Infeasible", "{row}");
    // Asked for the rest of the node; the kubelet keeps it at its
    // template's 500m.
    assert_eq!(
        milli(row["balloon"]["cpu"].as_str().unwrap_or("0")),
        shape.cpu - shape.cpu * 3 / 4,
        "{row}"
    );
    let balloon = world
        .pods("kube-system")
        .await
        .into_iter()
        .find(|p| node_of(p) == NODE && daemonset_of(p) == "node-balloon")
        .unwrap_or_else(|| panic!("no balloon pod on {NODE}"));
    assert_eq!(
        pod_resources(&balloon)[1].0,
        500,
        "{NODE}'s balloon: allocated cpu changed though the kubelet refused"
    );
    let series =
        format!("max(nodescope_balloon_node_state{{node=\"{NODE}\",state=\"Infeasible\"}})");
    until(
        world,
        "the Infeasible gauge",
        Duration::from_secs(30),
        |w| {
            let series = series.clone();
            Box::pin(async move {
                match w.prometheus.value(&series).await {
                    Some(1.0) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            })
        },
    )
    .await;
    alert_state(world, "NodescopeBalloonResizeInfeasible", "firing").await;
    let book = world.ledger.book();
    let deleted: usize = book.deleted.values().sum();
    assert_eq!(
        deleted, 0,
        "evicted for an Infeasible balloon: {:?}",
        book.deleted_pods
    );
    say(world.began, &format!(
        "fault 3: {NODE}'s balloon resize answered Infeasible: balloon set exit 1, state Infeasible (balloon asked {}m, still 500m allocated), NodescopeBalloonResizeInfeasible firing, 0 evictions",
        shape.cpu - shape.cpu * 3 / 4
    ));
}
