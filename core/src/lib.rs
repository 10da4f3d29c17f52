#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod escape;
pub mod hints;
pub mod jsonrpc;
pub mod lint;
pub mod name;
pub mod suggest;
