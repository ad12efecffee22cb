//! Writes the synthetic load-test store as one JSON `List` for
//! `nodescope serve --store file:PATH`: `--vpas` node-scoped VPAs with
//! `--nodes` recommendation groups each (see `store::synthetic`), plus the
//! Namespaces and Features of `examples/store/` so the policy bundle has its
//! params, exactly as `benches/admission.rs` builds its decider.
//!
//! `cargo run --release --example gen_store -- --vpas 100 --nodes 5000 --out store.json`

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

struct Options {
    vpas: usize,
    nodes: usize,
    out: PathBuf,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        vpas: 100,
        nodes: 5_000,
        out: PathBuf::from("store.json"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let count = || {
            value
                .parse::<usize>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--vpas" => options.vpas = count()?,
            "--nodes" => options.nodes = count()?,
            "--out" => options.out = PathBuf::from(&value),
            _ => {
                return Err(format!(
                    "unknown flag {flag} (expected --vpas, --nodes, --out)"
                ))
            }
        }
    }
    Ok(options)
}

fn main() -> Result<(), String> {
    let options = parse_args()?;
    let mut items = nodescope::store::synthetic::node_scoped_vpas(options.vpas, options.nodes);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/store");
    let documents = nodescope::manifest::read_path(&example, &[])
        .map_err(|e| format!("{}: {e}", example.display()))?;
    items.extend(
        documents
            .into_iter()
            .map(|d| d.value)
            .filter(|v| v["kind"] != "VerticalPodAutoscaler"),
    );
    let list: Value = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let bytes = serde_json::to_vec(&list).map_err(|e| e.to_string())?;
    std::fs::write(&options.out, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", options.out.display()))?;
    eprintln!(
        "wrote {} ({} VPAs x {} nodes, {} bytes)",
        options.out.display(),
        options.vpas,
        options.nodes,
        bytes.len()
    );
    Ok(())
}
