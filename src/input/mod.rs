//! The operator's inputs, read offline: files, directories, kustomizations
//! and standard input ([`sources`]), parsed into documents that know where
//! they came from ([`parse`]); an offline cluster (`--store file:`) read an
//! object at a time into what each controller keeps ([`cluster`]).

pub mod cluster;
mod documents;
pub mod objects;
pub mod parse;
pub mod sources;
mod staged;
mod unique;
mod yaml_list;

pub use parse::{
    check_object, is_review, object_problem, parse, parse_in_pieces, InputError, Location,
    SourceDocument, STDIN,
};
