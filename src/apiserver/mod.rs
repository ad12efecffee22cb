//! What kube-apiserver does to a request around admission, emulated offline:
//! the kinds it serves ([`kinds`], by default those of v1.36's discovery,
//! [`builtin`]), its defaulting ([`defaulting`]), the
//! AdmissionReview it sends ([`review`]) and the pod validation it does
//! between the mutating and the validating webhooks ([`validation`]). Pure:
//! no I/O, no command line.

pub mod builtin;
pub mod defaulting;
pub mod kinds;
pub mod review;
pub mod validation;
