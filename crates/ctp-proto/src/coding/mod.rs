//! Erasure coding: GF(2^8) arithmetic with SIMD slice kernels and a systematic Reed–Solomon
//! block code (the `fec` microprotocol's); the coded profile (CTCP): its codec, systematic
//! random linear network coding in blocks ([`rlnc`]), and its control loops — loss estimate
//! and redundancy ([`loss`]), the sender's window of blocks ([`blocks`]) and the block and
//! path scheduler ([`schedule`]).

pub mod blocks;
pub mod gf256;
pub mod loss;
pub mod rlnc;
mod rows;
pub mod rs;
pub mod schedule;
