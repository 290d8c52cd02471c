//! Erasure coding: GF(2^8) arithmetic and a systematic Reed–Solomon block code.

pub mod gf256;
pub mod rs;
