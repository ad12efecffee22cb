//! The figures the suite records (BENCHMARKS.md): time to convergence, API
//! requests per user from the apiserver's audit log, peak memory per
//! component.

use crate::scenario::World;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Default)]
pub struct Report {
    /// Every pod at its group but the two deferred ones.
    pub converged: Option<Duration>,
    /// And those two, after their eviction.
    pub all_at_group: Option<Duration>,
    /// A bare client's resizes (floor.rs).
    pub floor: crate::floor::Floor,
    /// Step 2's resizes and seconds from the groups to every pod at its group.
    pub step2: Option<(usize, f64)>,
}

/// Who made a request, in the report's words.
fn who(user: &str) -> String {
    match user {
        "system:kube-scheduler" => "kube-scheduler".to_owned(),
        "system:kube-controller-manager" => "kube-controller-manager".to_owned(),
        "system:serviceaccount:kube-system:node-resizer" => {
            "nodescope balloon controller".to_owned()
        }
        "system:serviceaccount:nodescope-system:nodescope" => {
            "nodescope webhook (2 replicas)".to_owned()
        }
        "system:serviceaccount:nodescope-system:nodescope-features" => {
            "nodescope features controller".to_owned()
        }
        "system:serviceaccount:nodescope-system:nodescope-recommender" => {
            "nodescope recommender".to_owned()
        }
        "system:serviceaccount:nodescope-system:nodescope-updater" => {
            "nodescope updater".to_owned()
        }
        // --use-service-account-credentials: one account per controller.
        u if u.starts_with("system:serviceaccount:kube-system:") => {
            "kube-controller-manager".to_owned()
        }
        "system:apiserver" => "kube-apiserver (loopback)".to_owned(),
        u => u.to_owned(),
    }
}

impl Report {
    pub fn requests(world: &World) -> BTreeMap<String, usize> {
        let text = std::fs::read_to_string(&world.cluster.audit_log).unwrap_or_default();
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if event["stage"] != "ResponseComplete" && event["stage"] != "Panic" {
                continue;
            }
            let user = event["user"]["username"].as_str().unwrap_or_default();
            *out.entry(who(user)).or_default() += 1;
        }
        out
    }

    /// The answers of 400 and above since `since`, by user and code, from
    /// the audit log: what the components had refused or lost and retried
    /// (a request the apiserver never received is not in it).
    pub fn refused_since(world: &World, since: k8s_openapi::jiff::Timestamp) -> String {
        let text = std::fs::read_to_string(&world.cluster.audit_log).unwrap_or_default();
        let mut out: BTreeMap<(String, i64), usize> = BTreeMap::new();
        for line in text.lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let code = event["responseStatus"]["code"].as_i64().unwrap_or(0);
            let at = event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
            if event["stage"] != "ResponseComplete" || code < 400 || at.is_none_or(|t| t < since) {
                continue;
            }
            let user = event["user"]["username"].as_str().unwrap_or_default();
            *out.entry((who(user), code)).or_default() += 1;
        }
        if out.is_empty() {
            return "no request refused".to_owned();
        }
        let parts: Vec<String> = out
            .iter()
            .map(|((user, code), n)| format!("{user} {code}×{n}"))
            .collect();
        format!("refused: {}", parts.join(", "))
    }

    pub fn print(&self, world: &World) {
        println!("system: report, N = {}", world.n);
        if let Some(t) = self.converged {
            println!(
                "system:   every pod at its group (but the two deferred) {:.1} s after the start",
                t.as_secs_f64()
            );
        }
        let f = self.floor;
        println!(
            "system:   floor: {} resizes by a bare client, paced as the updater: sent {:.1} s, actuated {:.1} s; unpaced: sent {:.1} s, actuated {:.1} s",
            f.paced.writes,
            f.paced.sent.as_secs_f64(),
            f.paced.actuated.as_secs_f64(),
            f.unpaced.sent.as_secs_f64(),
            f.unpaced.actuated.as_secs_f64(),
        );
        if let Some((resizes, took)) = self.step2 {
            println!(
                "system:   step 2: {resizes} resizes, every pod at its group {took:.1} s after the groups; {}",
                f.beside(resizes, took)
            );
        }
        if let Some(t) = self.all_at_group {
            println!(
                "system:   the two deferred evicted and recreated at their group {:.1} s after the start",
                t.as_secs_f64()
            );
        }
        println!("system:   API requests by user (audit log; the suite and its kubelet excluded):");
        for (user, count) in Self::requests(world) {
            println!("system:     {count:>8}  {user}");
        }
        println!("system:   peak memory (VmHWM):");
        for c in &world.components {
            println!("system:     {:>8} KiB  {}", c.peak_kib(), c.name);
        }
        // The apiserver's figure is since its last start (fault 5 restarts
        // it); the suite's own holds the simulated kubelet of every node.
        let cluster = &world.cluster;
        let others = cluster.plane.pids().into_iter().chain([
            (
                "kube-controller-manager",
                cluster.controller_manager.child.id(),
            ),
            ("kube-scheduler", cluster.scheduler.child.id()),
            ("the suite (kubelet, ledger, clients)", std::process::id()),
        ]);
        for (name, pid) in others {
            println!(
                "system:     {:>8} KiB  {name}",
                crate::components::peak_kib(pid)
            );
        }
    }
}
