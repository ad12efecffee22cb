//! nodescope: the admission layer for node-level resource control.
//!
//! Bytes flow one way: [`server`] (transport) hands a body to
//! [`admission::answer`] (pure decision from immutable snapshots), which
//! returns response bytes. [`cli`] enters the same pipeline offline.

pub mod admission;
pub mod apiserver;
pub mod balloon;
pub mod cli;
pub mod features;
pub mod files;
pub mod input;
pub mod json;
pub mod leader;
pub mod manifest;
pub mod messages;
pub mod metrics;
pub mod mutate;
pub mod pace;
pub mod params;
pub mod pods;
pub mod policy;
pub mod quantity;
pub mod recommend;
pub mod selector;
pub mod server;
pub mod stale;
pub mod store;
pub mod throttle;
pub mod tls;
pub mod update;
pub mod vpa;
