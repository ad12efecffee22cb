//! What kube-apiserver does to a request before admission, emulated offline:
//! the kinds it serves ([`kinds`], by default those of v1.36's discovery,
//! [`builtin`]), its defaulting ([`defaulting`]) and the AdmissionReview it
//! sends ([`review`]). Pure: no I/O, no command line.

pub mod builtin;
pub mod defaulting;
pub mod kinds;
pub mod review;
