//! Serving files to, and fetching one file from, several mirrors at once (paper 002's
//! segmented download): `ctp serve` and `ctp get`.

pub mod get;
pub mod serve;
pub mod tree;
pub mod wire;
