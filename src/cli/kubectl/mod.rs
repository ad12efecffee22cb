//! kubectl's conventions, for every command that reads a cluster or prints
//! objects: its flags (`--kubeconfig`, `--context`, `-n`, `-A`, `-l`), its
//! words when the cluster fails, its table and ages and its `List`, so that
//! an operator who knows kubectl reads nodescope's input and output
//! without learning new ones.

pub mod cluster;
pub mod list;
pub mod scope;
pub(crate) mod table;
