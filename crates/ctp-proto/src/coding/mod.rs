//! Erasure coding: GF(2^8) arithmetic and a systematic Reed–Solomon block code; the coded
//! profile's control loops (CTCP): loss estimate and redundancy ([`loss`]), the sender's
//! window of blocks ([`blocks`]) and the block and path scheduler ([`schedule`]).

pub mod blocks;
pub mod gf256;
pub mod loss;
pub mod rs;
pub mod schedule;
