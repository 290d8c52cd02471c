//! Systematic random linear network coding (RLNC) over GF(2^8), in blocks: the codec of the
//! `coded` profile (CTCP, paper 003, issue 28).
//!
//! # Blocks and symbols
//!
//! A stream is cut into **blocks** of `k` **source symbols** of `symbol_size` bytes each
//! (`1 ≤ k ≤` [`MAX_SYMBOLS`]). The last block of a stream may have fewer symbols, and its
//! last symbol may be short: it is coded as if padded with zeros to `symbol_size`, and the
//! caller keeps the true length (the stream's length or FIN offset travels anyway) to cut the
//! padding off the decoded block. Sender and receiver must agree on a block's `k`; for the
//! last block it is `ceil(remaining bytes / symbol_size)`.
//!
//! A **coded symbol** ([`CodedSymbol`]) is `symbol_size` bytes of one of two kinds:
//! - `Source(i)`: source symbol `i` itself (the code is *systematic*: without loss the
//!   receiver gets the data as sent, and nothing is decoded);
//! - `Repair(seed)`: the combination `Σ_j c_j · symbol_j` whose coefficient vector `c` is
//!   generated from the 32-bit `seed` by [`coefficients`]. The seed travels on the wire, not
//!   the `k` coefficients.
//!
//! # The coefficient generator (part of the wire format)
//!
//! [`coefficients`] is SplitMix64 (Steele, Lea and Flood, 2014) started at `state = seed`:
//! each output adds `0x9E3779B97F4A7C15` to the state and mixes it
//! (`z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
//! z ^= z >> 31`). The `k` coefficients are the bytes of `ceil(k / 8)` successive outputs,
//! each output's bytes least significant first; the unused bytes of the last output are
//! dropped. Zero coefficients are allowed; if all `k` are zero, the next `ceil(k / 8)`
//! outputs are drawn, and so on, so the all-zero vector is never produced. Seed 0 gives
//! `af cd 1d 7b 39 a8 20 e2 f4 65 …` (pinned by a test): changing the generator changes the
//! wire.
//!
//! # Decoding
//!
//! A [`Decoder`] holds one block. Every symbol that arrives is reduced against the rows held
//! so far (incremental Gauss–Jordan elimination, the paper's Algorithm 5, kept in *reduced*
//! row echelon form): a symbol that reduces to nothing is *not innovative* (reported, not
//! stored); any other is normalised and eliminated from the other rows, and raises the rank
//! (the degrees of freedom the receiver acknowledges) by one. The block is decoded the moment
//! the rank reaches `k`, with no final solve, and source symbols arriving in order are
//! readable at once ([`Decoder::decoded_prefix`], [`Decoder::symbol`]). Memory: `k` rows of
//! `k` coefficients and `k` payloads.
//!
//! ```
//! use ctp_proto::coding::rlnc::{CodedSymbol, Decoder, Encoder};
//!
//! let stream: Vec<u8> = (0..9_500u32).map(|i| (i * 7 % 251) as u8).collect();
//! let (k, symbol_size) = (4, 1000);
//! let mut received = Vec::new();
//! // Blocks of 4000, 4000 and 1500 bytes: the last has k = 2, its last symbol 500 bytes.
//! for block in stream.chunks(k * symbol_size) {
//!     let encoder = Encoder::from_block(block, symbol_size)?;
//!     let mut decoder = Decoder::new(encoder.k(), symbol_size)?;
//!     let mut payload = vec![0u8; symbol_size];
//!     // Source symbol 0 is lost; a repair symbol (seed 7) stands in for it.
//!     encoder.repair(7, &mut payload)?;
//!     decoder.receive(CodedSymbol::Repair(7), &payload)?;
//!     for i in 1..encoder.k() {
//!         encoder.encode(CodedSymbol::Source(i), &mut payload)?; // zero-padded
//!         decoder.receive(CodedSymbol::Source(i), &payload)?;
//!     }
//!     let decoded = decoder.take_block().expect("k innovative symbols decode the block");
//!     received.extend_from_slice(&decoded[..block.len()]); // the padding cut off
//! }
//! assert_eq!(received, stream);
//! # Ok::<(), ctp_proto::coding::rlnc::RlncError>(())
//! ```

use super::blocks::MAX_BLOCK_SYMBOLS;
use super::gf256::{self, Kernel};
use super::rows::{add_scaled_row, row, row_mut};

/// Most source symbols in a block: the sender's window's limit ([`MAX_BLOCK_SYMBOLS`]).
pub const MAX_SYMBOLS: usize = MAX_BLOCK_SYMBOLS as usize;

/// Largest symbol, in bytes.
pub const MAX_SYMBOL_SIZE: usize = 65_535;

/// Why a block could not be set up or a symbol not coded or received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RlncError {
    /// `k` or the symbol size is zero or above its maximum.
    #[error(
        "invalid block: {k} symbols of {symbol_size} bytes \
         (need 1 ≤ k ≤ {MAX_SYMBOLS} and 1 ≤ symbol size ≤ {MAX_SYMBOL_SIZE})"
    )]
    Shape {
        /// Source symbols in the block.
        k: usize,
        /// Bytes per symbol.
        symbol_size: usize,
    },
    /// A payload or output buffer is not `symbol_size` bytes, or a source symbol given to an
    /// encoder is longer.
    #[error("{len} bytes where the block's symbols have {symbol_size}")]
    SymbolSize {
        /// The length given.
        len: usize,
        /// The block's symbol size.
        symbol_size: usize,
    },
    /// `Source(index)` with `index ≥ k`.
    #[error("source symbol {index} of a block of {k}")]
    IndexOutOfBlock {
        /// The index given.
        index: usize,
        /// Source symbols in the block.
        k: usize,
    },
}

/// What a coded symbol is: which source symbol, or which combination of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodedSymbol {
    /// Source symbol `i` of the block, as it is (zero-padded if short).
    Source(usize),
    /// The combination whose coefficients [`coefficients`] generates from this seed.
    Repair(u32),
}

/// Checks a block's shape.
fn check_shape(k: usize, symbol_size: usize) -> Result<(), RlncError> {
    if (1..=MAX_SYMBOLS).contains(&k) && (1..=MAX_SYMBOL_SIZE).contains(&symbol_size) {
        Ok(())
    } else {
        Err(RlncError::Shape { k, symbol_size })
    }
}

/// Checks that a payload or buffer has the block's symbol size.
fn check_len(len: usize, symbol_size: usize) -> Result<(), RlncError> {
    if len == symbol_size {
        Ok(())
    } else {
        Err(RlncError::SymbolSize { len, symbol_size })
    }
}

/// SplitMix64: the generator behind [`coefficients`].
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Fills `out` (one coefficient per source symbol of the block) with the coefficient vector
/// of `Repair(seed)`: the bytes of successive SplitMix64 outputs from state `seed`, least
/// significant first, drawn again while all are zero (see the module documentation; this
/// is part of the wire format). An empty `out` is left empty.
pub fn coefficients(seed: u32, out: &mut [u8]) {
    let mut generator = SplitMix64(u64::from(seed));
    loop {
        for chunk in out.chunks_mut(8) {
            let bytes = generator.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        if out.iter().all(|&c| c == 0) && !out.is_empty() {
            continue;
        }
        return;
    }
}

/// Makes the coded symbols of one block. The source symbols are borrowed or owned (`S` is
/// `&[u8]`, `Vec<u8>`, `bytes::Bytes`, …) and never copied to encode.
#[derive(Clone, Debug)]
pub struct Encoder<S> {
    symbols: Vec<S>,
    symbol_size: usize,
    kernel: Kernel,
}

impl<'a> Encoder<&'a [u8]> {
    /// An encoder over a contiguous block: `ceil(block.len() / symbol_size)` symbols, the
    /// last one short if the block is not a whole number of symbols.
    pub fn from_block(block: &'a [u8], symbol_size: usize) -> Result<Self, RlncError> {
        if symbol_size == 0 {
            return Err(RlncError::Shape { k: 0, symbol_size });
        }
        Encoder::new(block.chunks(symbol_size).collect(), symbol_size)
    }
}

impl<S: AsRef<[u8]>> Encoder<S> {
    /// An encoder over a block's source symbols, in order; a symbol shorter than
    /// `symbol_size` (the last of a stream) is coded as if padded with zeros.
    pub fn new(symbols: Vec<S>, symbol_size: usize) -> Result<Self, RlncError> {
        check_shape(symbols.len(), symbol_size)?;
        if let Some(long) = symbols.iter().find(|s| s.as_ref().len() > symbol_size) {
            return Err(RlncError::SymbolSize {
                len: long.as_ref().len(),
                symbol_size,
            });
        }
        Ok(Encoder {
            symbols,
            symbol_size,
            kernel: Kernel::detected(),
        })
    }

    /// The same encoder running on `kernel` (the benchmark compares them).
    pub fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel;
        self
    }

    /// Source symbols in the block.
    pub fn k(&self) -> usize {
        self.symbols.len()
    }

    /// The source symbols back (to reuse their buffers).
    pub fn into_symbols(self) -> Vec<S> {
        self.symbols
    }

    /// Bytes per symbol.
    pub fn symbol_size(&self) -> usize {
        self.symbol_size
    }

    /// Source symbol `i` as given (not padded), if `i < k`.
    pub fn source(&self, i: usize) -> Option<&[u8]> {
        self.symbols.get(i).map(AsRef::as_ref)
    }

    /// Writes the payload of `symbol` into `out` (`symbol_size` bytes): a source symbol
    /// zero-padded, or a repair symbol's combination.
    pub fn encode(&self, symbol: CodedSymbol, out: &mut [u8]) -> Result<(), RlncError> {
        match symbol {
            CodedSymbol::Repair(seed) => self.repair(seed, out),
            CodedSymbol::Source(index) => {
                check_len(out.len(), self.symbol_size)?;
                let source = self
                    .source(index)
                    .ok_or(RlncError::IndexOutOfBlock { index, k: self.k() })?;
                let (head, padding) = out.split_at_mut(source.len());
                head.copy_from_slice(source);
                padding.fill(0);
                Ok(())
            }
        }
    }

    /// Writes the payload of `Repair(seed)` into `out` (`symbol_size` bytes).
    pub fn repair(&self, seed: u32, out: &mut [u8]) -> Result<(), RlncError> {
        check_len(out.len(), self.symbol_size)?;
        let mut buffer = [0u8; MAX_SYMBOLS];
        let coefficients_of_seed = &mut buffer[..self.k()];
        coefficients(seed, coefficients_of_seed);
        self.combine(coefficients_of_seed, out);
        Ok(())
    }

    /// `out = Σ_j coefficients[j] · symbol_j` (`out` is `symbol_size` bytes).
    fn combine(&self, coefficients: &[u8], out: &mut [u8]) {
        out.fill(0);
        for (symbol, &c) in self.symbols.iter().zip(coefficients) {
            self.kernel.mul_add_slice(out, symbol.as_ref(), c);
        }
    }
}

/// What a received symbol did to the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reception {
    /// It raised the rank by one.
    Innovative,
    /// It was a combination of the symbols already held (or the block was complete): rank
    /// unchanged, nothing stored.
    NotInnovative,
}

/// Decodes one block from its coded symbols, incrementally (see the module documentation).
///
/// Row `j` of the coefficient matrix and payload `j` hold the row whose pivot is column `j`,
/// once one has arrived (`is_pivot[j]`); the rows held are in reduced row echelon form, so
/// row `j` is decoded source symbol `j` as soon as its only non-zero coefficient is the
/// pivot, and all are when the rank is `k`.
#[derive(Clone, Debug)]
pub struct Decoder {
    k: usize,
    symbol_size: usize,
    kernel: Kernel,
    /// `k × k`, row-major.
    coefficients: Vec<u8>,
    /// `k × symbol_size`, row-major: the decoded block, in order, once complete.
    payloads: Vec<u8>,
    is_pivot: Vec<bool>,
    rank: usize,
    decoded_prefix: usize,
}

impl Decoder {
    /// A decoder for a block of `k` symbols of `symbol_size` bytes.
    pub fn new(k: usize, symbol_size: usize) -> Result<Self, RlncError> {
        check_shape(k, symbol_size)?;
        Ok(Decoder {
            k,
            symbol_size,
            kernel: Kernel::detected(),
            coefficients: vec![0; k * k],
            payloads: vec![0; k * symbol_size],
            is_pivot: vec![false; k],
            rank: 0,
            decoded_prefix: 0,
        })
    }

    /// The same decoder running on `kernel` (the benchmark compares them).
    pub fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel;
        self
    }

    /// Source symbols in the block.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Bytes per symbol.
    pub fn symbol_size(&self) -> usize {
        self.symbol_size
    }

    /// Degrees of freedom received: innovative symbols held (what the receiver acknowledges).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Whether the block is decoded (rank `k`).
    pub fn is_complete(&self) -> bool {
        self.rank == self.k
    }

    /// How many leading source symbols are decoded: symbols `0..decoded_prefix()` can be
    /// delivered in order before the block is complete.
    pub fn decoded_prefix(&self) -> usize {
        self.decoded_prefix
    }

    /// Whether source symbol `i` is decoded.
    pub fn is_decoded(&self, i: usize) -> bool {
        i < self.k
            && self.is_pivot[i]
            && row(&self.coefficients, self.k, i)
                .iter()
                .enumerate()
                .all(|(j, &c)| j == i || c == 0)
    }

    /// Source symbol `i` (`symbol_size` bytes, padding included), once decoded.
    pub fn symbol(&self, i: usize) -> Option<&[u8]> {
        self.is_decoded(i)
            .then(|| row(&self.payloads, self.symbol_size, i))
    }

    /// Takes a complete block out (`k × symbol_size` bytes, source symbols in order, padding
    /// included) and leaves the decoder empty for the next block of the same shape; `None`
    /// (and nothing changed) while the block is incomplete.
    pub fn take_block(&mut self) -> Option<Vec<u8>> {
        if !self.is_complete() {
            return None;
        }
        let block = std::mem::replace(&mut self.payloads, vec![0; self.k * self.symbol_size]);
        self.coefficients.fill(0);
        self.is_pivot.fill(false);
        self.rank = 0;
        self.decoded_prefix = 0;
        Some(block)
    }

    /// Receives one coded symbol. `payload` must be `symbol_size` bytes and a source index
    /// below `k`; a malformed symbol is an error and changes nothing.
    pub fn receive(&mut self, symbol: CodedSymbol, payload: &[u8]) -> Result<Reception, RlncError> {
        check_len(payload.len(), self.symbol_size)?;
        if let CodedSymbol::Source(index) = symbol {
            if index >= self.k {
                return Err(RlncError::IndexOutOfBlock { index, k: self.k });
            }
            if self.is_decoded(index) {
                return Ok(Reception::NotInnovative);
            }
        }
        if self.is_complete() {
            return Ok(Reception::NotInnovative);
        }
        let slot = match symbol {
            // A source symbol whose column has no pivot goes straight to its own row.
            CodedSymbol::Source(index) if !self.is_pivot[index] => index,
            _ => self.free_row(),
        };
        let coefficient_row = row_mut(&mut self.coefficients, self.k, slot);
        match symbol {
            CodedSymbol::Source(index) => {
                coefficient_row.fill(0);
                coefficient_row[index] = 1;
            }
            CodedSymbol::Repair(seed) => coefficients(seed, coefficient_row),
        }
        row_mut(&mut self.payloads, self.symbol_size, slot).copy_from_slice(payload);
        Ok(self.insert(slot))
    }

    /// The first row without a pivot (there is one: the rank is below `k`).
    fn free_row(&self) -> usize {
        self.is_pivot.iter().position(|&p| !p).unwrap_or(0)
    }

    /// Algorithm 5 on the symbol written into free row `slot`: reduce it against every
    /// pivot; if anything remains, normalise it, move it to the row of its pivot column and
    /// eliminate that column from the other rows.
    fn insert(&mut self, slot: usize) -> Reception {
        let (k, size, kernel) = (self.k, self.symbol_size, self.kernel);
        for pivot in 0..k {
            let factor = self.coefficients[slot * k + pivot];
            if self.is_pivot[pivot] && factor != 0 {
                add_scaled_row(kernel, &mut self.coefficients, k, slot, pivot, factor);
                add_scaled_row(kernel, &mut self.payloads, size, slot, pivot, factor);
            }
        }
        let Some(column) = row(&self.coefficients, k, slot)
            .iter()
            .position(|&c| c != 0)
        else {
            return Reception::NotInnovative;
        };
        let scale = gf256::inv(self.coefficients[slot * k + column]);
        kernel.mul_slice(row_mut(&mut self.coefficients, k, slot), scale);
        kernel.mul_slice(row_mut(&mut self.payloads, size, slot), scale);
        if column != slot {
            // `column` has no pivot (every pivot column was cleared above): its row is free.
            self.coefficients
                .copy_within(slot * k..(slot + 1) * k, column * k);
            self.payloads
                .copy_within(slot * size..(slot + 1) * size, column * size);
        }
        for other in 0..k {
            let factor = self.coefficients[other * k + column];
            if self.is_pivot[other] && factor != 0 {
                add_scaled_row(kernel, &mut self.coefficients, k, other, column, factor);
                add_scaled_row(kernel, &mut self.payloads, size, other, column, factor);
            }
        }
        self.is_pivot[column] = true;
        self.rank += 1;
        while self.decoded_prefix < k && self.is_decoded(self.decoded_prefix) {
            self.decoded_prefix += 1;
        }
        Reception::Innovative
    }
}

#[cfg(test)]
mod tests;
