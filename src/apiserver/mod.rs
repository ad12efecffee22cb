//! What kube-apiserver does to a request before admission, emulated offline:
//! the kinds it serves ([`kinds`]), its defaulting ([`defaulting`]) and the
//! AdmissionReview it sends ([`review`]). Pure: no I/O, no command line.

pub mod defaulting;
pub mod kinds;
pub mod review;
