//! The sender's window of coded blocks (CTCP §II, §III-B): which blocks are open, what the
//! receiver has acknowledged of each, and which symbol a block sends next.
//!
//! The sender cuts its data into blocks of `k` source symbols (the last block of a stream
//! may be shorter; each block carries its own `k`). At most `max_blocks` blocks (the
//! paper's `numblks`, negotiated because it bounds both ends' memory) are open:
//! `currblk, currblk + 1, …, currblk + numblks − 1`, where `currblk` is the oldest block the
//! receiver has not decoded. A new block opens only below that bound; the window advances
//! when an acknowledgement says the receiver decoded the oldest (`ack_currblk > currblk`:
//! blocks below `ack_currblk` are freed).
//!
//! What the sender knows of each block's degrees of freedom at the receiver:
//! - for `currblk`, the receiver's own count (`currdof` of the acknowledgements, the
//!   largest one seen for that block);
//! - for a later block, the packets of it acknowledged so far (capped at `k`). The paper's
//!   receiver reports dofs of `currblk` only and its listing counts only packets in flight
//!   for later blocks, which would resend for a later block every packet already
//!   acknowledged; each acknowledgement names the packet's sequence number, whose block the
//!   sender knows, so a received packet is counted as a degree of freedom (true but for the
//!   rare dependent random combination, which `currdof` corrects once the block is current).
//!
//! Symbols: the code is systematic. A block's first `k` packets are its source symbols, in
//! order; every later one is a repair symbol (a random combination of the block, numbered
//! so that the packet can carry the seed of its coefficients instead of the vector). A lost
//! source symbol is never sent again: any repair symbol replaces it.

use std::collections::VecDeque;

/// Most source symbols in a block (GF(2^8) combinations of more would be dependent too
/// often, and the receiver's matrix is `k × k`).
pub const MAX_BLOCK_SYMBOLS: u16 = 1024;

/// Why a block could not be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// `max_blocks` blocks are open: wait until the oldest is decoded.
    #[error("the window of blocks is full")]
    WindowFull,
    /// A block of no symbols, or of more than [`MAX_BLOCK_SYMBOLS`].
    #[error("invalid block size {0} (1 to {MAX_BLOCK_SYMBOLS} symbols)")]
    Size(u16),
}

/// The symbol a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symbol {
    /// Source symbol `i` of the block, uncoded (`i < k`).
    Source(u16),
    /// The block's repair symbol number `n` (its coefficients come from `n`).
    Repair(u32),
}

/// One open block, as the sender sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Block number.
    pub id: u64,
    /// Source symbols in the block.
    pub k: u16,
    /// Source symbols sent (they go first, once each).
    pub sources_sent: u16,
    /// Repair symbols sent.
    pub repairs_sent: u32,
    /// Packets of this block the receiver acknowledged.
    pub acked: u32,
}

impl Block {
    /// Packets of this block sent, sources and repairs.
    pub fn sent(&self) -> u64 {
        u64::from(self.sources_sent) + u64::from(self.repairs_sent)
    }
}

/// What an acknowledgement's block information did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockAck {
    /// The receiver decoded blocks: this many were freed.
    Advanced(u64),
    /// Same current block (its dof count may have grown).
    Same,
    /// About a block already freed: ignored.
    Stale,
    /// Names a block never opened, or more dofs than the block has: malformed, ignored.
    Invalid,
}

/// The open blocks.
#[derive(Clone, Debug)]
pub struct BlockWindow {
    blocks: VecDeque<Block>,
    /// Number of the oldest undecoded block (`currblk`).
    current: u64,
    /// Number the next block opened takes.
    next_id: u64,
    /// Dofs the receiver has of `currblk` (`currdof`).
    current_dofs: u32,
    max_blocks: usize,
    decoded: u64,
    invalid_acks: u64,
}

impl BlockWindow {
    /// An empty window allowing `max_blocks` open blocks (at least 1).
    pub fn new(max_blocks: usize) -> Self {
        BlockWindow {
            blocks: VecDeque::new(),
            current: 0,
            next_id: 0,
            current_dofs: 0,
            max_blocks: max_blocks.max(1),
            decoded: 0,
            invalid_acks: 0,
        }
    }

    /// Opens the next block, of `k` source symbols; returns its number.
    pub fn open(&mut self, k: u16) -> Result<u64, BlockError> {
        if k == 0 || k > MAX_BLOCK_SYMBOLS {
            return Err(BlockError::Size(k));
        }
        if self.is_full() {
            return Err(BlockError::WindowFull);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.blocks.push_back(Block {
            id,
            k,
            sources_sent: 0,
            repairs_sent: 0,
            acked: 0,
        });
        Ok(id)
    }

    /// True when no block may open before the oldest is decoded.
    pub fn is_full(&self) -> bool {
        self.blocks.len() >= self.max_blocks
    }

    /// Blocks open (sent from, not yet decoded).
    pub fn open_count(&self) -> usize {
        self.blocks.len()
    }

    /// The bound on open blocks.
    pub fn max_blocks(&self) -> usize {
        self.max_blocks
    }

    /// The oldest undecoded block's number (`currblk`); equal to the next block's number
    /// when none is open.
    pub fn current(&self) -> u64 {
        self.current
    }

    /// Dofs the receiver acknowledged for the current block (`currdof`).
    pub fn current_dofs(&self) -> u32 {
        self.current_dofs
    }

    /// Blocks decoded (freed) so far.
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// Acknowledgements whose block information was malformed.
    pub fn invalid_acks(&self) -> u64 {
        self.invalid_acks
    }

    /// The open blocks, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Block> {
        self.blocks.iter()
    }

    /// Block `id`, if open.
    pub fn get(&self, id: u64) -> Option<&Block> {
        let index = usize::try_from(id.checked_sub(self.current)?).ok()?;
        self.blocks.get(index)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Block> {
        let index = usize::try_from(id.checked_sub(self.current)?).ok()?;
        self.blocks.get_mut(index)
    }

    /// Dofs the receiver is known to hold of block `id` (0 if not open).
    pub fn known_dofs(&self, id: u64) -> u32 {
        match self.get(id) {
            Some(b) if id == self.current => self.current_dofs.min(u32::from(b.k)),
            Some(b) => b.acked.min(u32::from(b.k)),
            None => 0,
        }
    }

    /// Dofs block `id` still needs at the receiver (0 if not open).
    pub fn missing_dofs(&self, id: u64) -> u32 {
        self.get(id)
            .map_or(0, |b| u32::from(b.k) - self.known_dofs(id))
    }

    /// The receiver's report: its current block and the dofs it holds of it.
    pub fn on_ack(&mut self, ack_currblk: u64, ack_currdof: u32) -> BlockAck {
        if ack_currblk > self.next_id {
            self.invalid_acks += 1;
            return BlockAck::Invalid;
        }
        if ack_currblk < self.current {
            return BlockAck::Stale;
        }
        if let Some(b) = self.get(ack_currblk) {
            if ack_currdof > u32::from(b.k) {
                self.invalid_acks += 1;
                return BlockAck::Invalid;
            }
        }
        if ack_currblk == self.current {
            self.current_dofs = self.current_dofs.max(ack_currdof);
            return BlockAck::Same;
        }
        let freed = ack_currblk - self.current;
        for _ in 0..freed {
            self.blocks.pop_front();
        }
        self.current = ack_currblk;
        self.current_dofs = ack_currdof;
        self.decoded += freed;
        BlockAck::Advanced(freed)
    }

    /// A packet of block `id` was acknowledged.
    pub fn on_packet_acked(&mut self, id: u64) {
        if let Some(b) = self.get_mut(id) {
            b.acked = b.acked.saturating_add(1);
        }
    }

    /// The symbol block `id` sends next (`None` if it is not open).
    pub fn peek_symbol(&self, id: u64) -> Option<Symbol> {
        let b = self.get(id)?;
        Some(if b.sources_sent < b.k {
            Symbol::Source(b.sources_sent)
        } else {
            Symbol::Repair(b.repairs_sent)
        })
    }

    /// The symbol block `id` sends next, counted as sent (`None` if it is not open).
    pub fn take_symbol(&mut self, id: u64) -> Option<Symbol> {
        let symbol = self.peek_symbol(id)?;
        let b = self.get_mut(id)?;
        match symbol {
            Symbol::Source(_) => b.sources_sent += 1,
            Symbol::Repair(_) => b.repairs_sent = b.repairs_sent.saturating_add(1),
        }
        Some(symbol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_go_first_then_repairs() {
        let mut w = BlockWindow::new(2);
        let b = w.open(3).unwrap();
        let symbols: Vec<_> = (0..5).map(|_| w.take_symbol(b).unwrap()).collect();
        use Symbol::*;
        assert_eq!(
            symbols,
            [Source(0), Source(1), Source(2), Repair(0), Repair(1)]
        );
        assert_eq!(w.get(b).unwrap().sent(), 5);
        assert_eq!(w.take_symbol(7), None);
    }

    #[test]
    fn the_window_is_bounded_and_advances_when_the_oldest_is_decoded() {
        let mut w = BlockWindow::new(2);
        assert_eq!(w.open(0), Err(BlockError::Size(0)));
        assert_eq!(w.open(MAX_BLOCK_SYMBOLS + 1), Err(BlockError::Size(1025)));
        assert_eq!(w.open(4), Ok(0));
        assert_eq!(w.open(2), Ok(1));
        assert_eq!(w.open(4), Err(BlockError::WindowFull));
        // Dofs of the current block come from the receiver, of later ones from ACKs.
        assert_eq!(w.on_ack(0, 3), BlockAck::Same);
        assert_eq!(w.on_ack(0, 1), BlockAck::Same, "an older report");
        assert_eq!((w.known_dofs(0), w.missing_dofs(0)), (3, 1));
        w.on_packet_acked(1);
        assert_eq!(w.missing_dofs(1), 1);
        // Malformed reports change nothing.
        assert_eq!(w.on_ack(0, 5), BlockAck::Invalid);
        assert_eq!(w.on_ack(9, 0), BlockAck::Invalid);
        assert_eq!(w.invalid_acks(), 2);
        // Block 0 decoded: the window slides, a block may open.
        assert_eq!(w.on_ack(1, 2), BlockAck::Advanced(1));
        assert_eq!((w.current(), w.current_dofs(), w.decoded()), (1, 2, 1));
        assert_eq!(w.missing_dofs(1), 0);
        assert_eq!(w.on_ack(0, 4), BlockAck::Stale);
        assert_eq!(w.open(4), Ok(2));
        // Both decoded at once: nothing open, the current block is the next one.
        assert_eq!(w.on_ack(3, 0), BlockAck::Advanced(2));
        assert_eq!((w.open_count(), w.current()), (0, 3));
        assert_eq!(w.known_dofs(3), 0);
    }
}
