//! Erasure coding: GF(2^8) arithmetic with SIMD slice kernels, a systematic Reed–Solomon
//! block code (the `fec` microprotocol's) and systematic random linear network coding in
//! blocks (the codec of the `coded` profile).

pub mod gf256;
pub mod rlnc;
mod rows;
pub mod rs;
