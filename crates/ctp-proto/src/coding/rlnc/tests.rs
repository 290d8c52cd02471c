use super::*;
use proptest::prelude::*;

/// A block of `k` symbols of `size` bytes with distinct, seed-dependent contents.
fn block(k: usize, size: usize, seed: u64) -> Vec<Vec<u8>> {
    (0..k)
        .map(|i| {
            (0..size)
                .map(|j| (seed.wrapping_mul(0x9E37_79B9) ^ (i * 131 + j * 7) as u64) as u8)
                .collect()
        })
        .collect()
}

fn concat(symbols: &[Vec<u8>]) -> Vec<u8> {
    symbols.concat()
}

/// The coefficient vector a coded symbol stands for.
fn vector_of(symbol: CodedSymbol, k: usize) -> Vec<u8> {
    let mut v = vec![0u8; k];
    match symbol {
        CodedSymbol::Source(i) => v[i] = 1,
        CodedSymbol::Repair(seed) => coefficients(seed, &mut v),
    }
    v
}

/// An independent rank count: plain Gaussian elimination with the scalar field operations.
#[derive(Default)]
struct NaiveRank {
    /// Rows with a leading 1 at `lead`, kept as they were reduced.
    rows: Vec<(usize, Vec<u8>)>,
}

impl NaiveRank {
    /// Adds `v`; whether it was independent of the rows held.
    fn add(&mut self, mut v: Vec<u8>) -> bool {
        for (lead, r) in &self.rows {
            let f = v[*lead];
            if f != 0 {
                for (x, &y) in v.iter_mut().zip(r) {
                    *x ^= gf256::mul(f, y);
                }
            }
        }
        match v.iter().position(|&c| c != 0) {
            None => false,
            Some(lead) => {
                let s = gf256::inv(v[lead]);
                v.iter_mut().for_each(|x| *x = gf256::mul(*x, s));
                self.rows.push((lead, v));
                true
            }
        }
    }
}

impl Decoder {
    /// Receives an explicit combination (coefficients and payload), for the tests of
    /// dependence that a seed cannot express.
    fn receive_combination(&mut self, vector: &[u8], payload: &[u8]) -> Reception {
        let slot = self.free_row();
        row_mut(&mut self.coefficients, self.k, slot).copy_from_slice(vector);
        row_mut(&mut self.payloads, self.symbol_size, slot).copy_from_slice(payload);
        self.insert(slot)
    }
}

/// Checks the decoder's view of the source symbols against the data after every symbol.
fn check_decoded_symbols(decoder: &Decoder, data: &[Vec<u8>]) {
    for (i, source) in data.iter().enumerate() {
        if let Some(s) = decoder.symbol(i) {
            assert_eq!(s, &source[..], "symbol {i}");
        }
        assert_eq!(
            i < decoder.decoded_prefix(),
            (0..=i).all(|j| decoder.is_decoded(j)),
            "prefix {} at {i}",
            decoder.decoded_prefix()
        );
    }
}

#[test]
fn the_generator_is_pinned_by_its_golden_vector() {
    // SplitMix64 from state 0: outputs 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
    // 0x06C45D188009454F (the published reference values), bytes least significant first.
    let mut v = [0u8; 20];
    coefficients(0, &mut v);
    assert_eq!(
        v,
        [
            0xaf, 0xcd, 0x1d, 0x7b, 0x39, 0xa8, 0x20, 0xe2, 0xf4, 0x65, 0xb9, 0xa1, 0x6a, 0x9e,
            0x78, 0x6e, 0x4f, 0x45, 0x09, 0x80
        ]
    );
    // A vector is a prefix of a longer one from the same seed.
    let mut short = [0u8; 3];
    coefficients(0, &mut short);
    assert_eq!(short, v[..3]);
    let mut other = [0u8; 4];
    coefficients(0xdead_beef, &mut other);
    assert_ne!(other, v[..4]);
}

#[test]
fn the_all_zero_vector_is_never_produced() {
    // With k = 1 the first output's low byte is zero for about 1 seed in 256: such a seed
    // takes the next output's low byte instead.
    let mut found = 0;
    for seed in 0..20_000u32 {
        let mut generator = SplitMix64(u64::from(seed));
        let first = generator.next() as u8;
        let second = generator.next() as u8;
        let mut v = [0u8; 1];
        coefficients(seed, &mut v);
        assert_ne!(v[0], 0, "seed {seed}");
        if first == 0 {
            found += 1;
            if second != 0 {
                assert_eq!(v[0], second, "seed {seed}");
            }
        } else {
            assert_eq!(v[0], first);
        }
    }
    assert!(found > 20, "only {found} seeds with a zero first byte");
    coefficients(5, &mut []);
}

#[test]
fn a_repair_symbol_is_the_combination_of_its_coefficients() {
    let data = block(5, 37, 1);
    let encoder = Encoder::new(data.clone(), 37).unwrap();
    let mut out = vec![0u8; 37];
    encoder.repair(99, &mut out).unwrap();
    let c = vector_of(CodedSymbol::Repair(99), 5);
    for (j, &byte) in out.iter().enumerate() {
        let expected = (0..5).fold(0u8, |acc, i| acc ^ gf256::mul(c[i], data[i][j]));
        assert_eq!(byte, expected, "byte {j}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any mix of source and repair symbols, in any order: the decoder's reports match an
    /// independent rank count, every decoded symbol is right as soon as it is reported, and
    /// the block decodes exactly when k independent symbols have arrived.
    #[test]
    fn any_k_independent_combinations_decode_the_block(
        k in 1usize..=24,
        size in 1usize..=48,
        data_seed in any::<u64>(),
        picks in proptest::collection::vec((any::<bool>(), any::<u32>()), 0..60),
        simd in any::<bool>(),
    ) {
        let kernel = if simd { Kernel::detected() } else { Kernel::scalar() };
        let data = block(k, size, data_seed);
        let encoder = Encoder::new(data.clone(), size).unwrap().with_kernel(kernel);
        let mut decoder = Decoder::new(k, size).unwrap().with_kernel(kernel);
        let mut naive = NaiveRank::default();
        // The picks, then fresh repairs until complete (bounded).
        let symbols = picks
            .iter()
            .map(|&(source, x)| if source { CodedSymbol::Source(x as usize % k) } else { CodedSymbol::Repair(x) })
            .chain((0..k as u32 + 16).map(|s| CodedSymbol::Repair(s.wrapping_mul(0x9E37_79B9) ^ data_seed as u32)));
        let mut payload = vec![0u8; size];
        let mut innovative = 0;
        for symbol in symbols {
            if decoder.is_complete() && innovative == k {
                break;
            }
            encoder.encode(symbol, &mut payload).unwrap();
            let independent = naive.add(vector_of(symbol, k));
            let reception = decoder.receive(symbol, &payload).unwrap();
            prop_assert_eq!(reception == Reception::Innovative, independent, "{:?}", symbol);
            innovative += usize::from(independent);
            prop_assert_eq!(decoder.rank(), innovative);
            check_decoded_symbols(&decoder, &data);
        }
        prop_assert!(decoder.is_complete());
        prop_assert_eq!(decoder.decoded_prefix(), k);
        prop_assert_eq!(decoder.take_block().unwrap(), concat(&data));
    }

    /// Repair symbols only (the systematic symbols all lost), seeds in random order.
    #[test]
    fn repairs_alone_decode_the_block(
        k in 1usize..=40,
        size in 1usize..=64,
        seeds in proptest::collection::vec(any::<u32>(), 80),
    ) {
        let data = block(k, size, u64::from(seeds[0]));
        let encoder = Encoder::new(data.clone(), size).unwrap();
        let mut decoder = Decoder::new(k, size).unwrap();
        let mut payload = vec![0u8; size];
        let mut sent = 0;
        for &seed in &seeds {
            if decoder.is_complete() {
                break;
            }
            encoder.repair(seed, &mut payload).unwrap();
            decoder.receive(CodedSymbol::Repair(seed), &payload).unwrap();
            sent += 1;
        }
        prop_assert!(decoder.is_complete(), "rank {} of {k} after {sent}", decoder.rank());
        // Over GF(2^8) a random combination is dependent with probability < 1/255 per symbol.
        prop_assert!(sent <= k + 3, "{sent} repairs for k = {k}");
        prop_assert_eq!(decoder.take_block().unwrap(), concat(&data));
    }

    /// Malformed symbols are errors, never panics, and change nothing.
    #[test]
    fn malformed_symbols_are_errors(
        k in 1usize..=8,
        size in 1usize..=16,
        index in any::<usize>(),
        len in 0usize..40,
    ) {
        let mut decoder = Decoder::new(k, size).unwrap();
        let payload = vec![1u8; len];
        let result = decoder.receive(CodedSymbol::Source(index), &payload);
        if len != size {
            prop_assert_eq!(result, Err(RlncError::SymbolSize { len, symbol_size: size }));
        } else if index >= k {
            prop_assert_eq!(result, Err(RlncError::IndexOutOfBlock { index, k }));
        } else {
            prop_assert_eq!(result, Ok(Reception::Innovative));
        }
        let before = decoder.rank();
        prop_assert_eq!(
            decoder.receive(CodedSymbol::Repair(index as u32), &vec![0u8; size + 1]),
            Err(RlncError::SymbolSize { len: size + 1, symbol_size: size })
        );
        prop_assert_eq!(decoder.rank(), before);
    }
}

#[test]
fn dependent_combinations_are_detected() {
    let (k, size) = (4, 33);
    let data = block(k, size, 7);
    let encoder = Encoder::new(data.clone(), size).unwrap();
    let mut decoder = Decoder::new(k, size).unwrap();
    let mut payload = vec![0u8; size];
    let receive = |decoder: &mut Decoder, symbol: CodedSymbol, payload: &mut Vec<u8>| {
        encoder.encode(symbol, payload).unwrap();
        decoder.receive(symbol, payload).unwrap()
    };

    // A duplicate source symbol, and a duplicate repair symbol.
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Source(2), &mut payload),
        Reception::Innovative
    );
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Source(2), &mut payload),
        Reception::NotInnovative
    );
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Repair(11), &mut payload),
        Reception::Innovative
    );
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Repair(11), &mut payload),
        Reception::NotInnovative
    );
    assert_eq!(decoder.rank(), 2);

    // A combination of the rows held: 3·Source(2) + 0x5a·Repair(11).
    let repair = vector_of(CodedSymbol::Repair(11), k);
    let vector: Vec<u8> = (0..k)
        .map(|i| gf256::mul(0x5a, repair[i]) ^ if i == 2 { 3 } else { 0 })
        .collect();
    let mut combination = vec![0u8; size];
    encoder.combine(&vector, &mut combination);
    assert_eq!(
        decoder.receive_combination(&vector, &combination),
        Reception::NotInnovative
    );
    assert_eq!(decoder.rank(), 2);

    // The rest decode the block; afterwards nothing is innovative.
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Repair(12), &mut payload),
        Reception::Innovative
    );
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Source(0), &mut payload),
        Reception::Innovative
    );
    assert!(decoder.is_complete());
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Repair(13), &mut payload),
        Reception::NotInnovative
    );
    assert_eq!(
        receive(&mut decoder, CodedSymbol::Source(1), &mut payload),
        Reception::NotInnovative
    );
    assert_eq!(decoder.rank(), k);
    assert_eq!(decoder.take_block().unwrap(), concat(&data));
}

#[test]
fn a_repair_without_the_missing_symbol_is_not_innovative() {
    // k = 3, sources 0 and 1 held: a repair whose coefficient for symbol 2 is zero is a
    // combination of them. Such seeds are about 1 in 256.
    let (k, size) = (3, 8);
    let data = block(k, size, 3);
    let encoder = Encoder::new(data.clone(), size).unwrap();
    let seed = (0..100_000u32)
        .find(|&s| vector_of(CodedSymbol::Repair(s), k)[2] == 0)
        .expect("a seed with a zero third coefficient");
    let mut decoder = Decoder::new(k, size).unwrap();
    let mut payload = vec![0u8; size];
    for symbol in [CodedSymbol::Source(0), CodedSymbol::Source(1)] {
        encoder.encode(symbol, &mut payload).unwrap();
        assert_eq!(decoder.receive(symbol, &payload), Ok(Reception::Innovative));
    }
    encoder.repair(seed, &mut payload).unwrap();
    assert_eq!(
        decoder.receive(CodedSymbol::Repair(seed), &payload),
        Ok(Reception::NotInnovative)
    );
    assert_eq!((decoder.rank(), decoder.decoded_prefix()), (2, 2));
    assert_eq!(decoder.symbol(2), None);
}

#[test]
fn in_order_sources_are_delivered_before_the_block_completes() {
    let (k, size) = (6, 10);
    let data = block(k, size, 9);
    let encoder = Encoder::new(data.clone(), size).unwrap();
    let mut decoder = Decoder::new(k, size).unwrap();
    let mut payload = vec![0u8; size];
    for (i, source) in data.iter().enumerate().take(3) {
        encoder
            .encode(CodedSymbol::Source(i), &mut payload)
            .unwrap();
        decoder.receive(CodedSymbol::Source(i), &payload).unwrap();
        assert_eq!(decoder.decoded_prefix(), i + 1);
        assert_eq!(decoder.symbol(i), Some(&source[..]));
    }
    // Symbol 3 lost, 4 arrives: the prefix waits at 3 while 4 is decoded.
    encoder
        .encode(CodedSymbol::Source(4), &mut payload)
        .unwrap();
    decoder.receive(CodedSymbol::Source(4), &payload).unwrap();
    assert_eq!(decoder.decoded_prefix(), 3);
    assert!(decoder.is_decoded(4) && !decoder.is_decoded(3));
    // A repair holding 3 and 5 decodes neither; one more completes the block.
    encoder.repair(1, &mut payload).unwrap();
    decoder.receive(CodedSymbol::Repair(1), &payload).unwrap();
    assert_eq!((decoder.rank(), decoder.decoded_prefix()), (5, 3));
    assert_eq!(decoder.symbol(3), None);
    encoder.repair(2, &mut payload).unwrap();
    decoder.receive(CodedSymbol::Repair(2), &payload).unwrap();
    assert!(decoder.is_complete());
    assert_eq!(decoder.decoded_prefix(), k);
    check_decoded_symbols(&decoder, &data);
}

#[test]
fn a_repair_can_decode_a_symbol_before_the_block_completes() {
    // Source 0 held; a repair over symbols 0 and 1 only (coefficient of 2 zero) yields 1.
    let (k, size) = (3, 12);
    let data = block(k, size, 5);
    let encoder = Encoder::new(data.clone(), size).unwrap();
    let seed = (0..100_000u32)
        .find(|&s| {
            let v = vector_of(CodedSymbol::Repair(s), k);
            v[1] != 0 && v[2] == 0
        })
        .expect("a seed over symbols 0 and 1");
    let mut decoder = Decoder::new(k, size).unwrap();
    let mut payload = vec![0u8; size];
    encoder
        .encode(CodedSymbol::Source(0), &mut payload)
        .unwrap();
    decoder.receive(CodedSymbol::Source(0), &payload).unwrap();
    encoder.repair(seed, &mut payload).unwrap();
    assert_eq!(
        decoder.receive(CodedSymbol::Repair(seed), &payload),
        Ok(Reception::Innovative)
    );
    assert!(!decoder.is_complete());
    assert_eq!(decoder.decoded_prefix(), 2);
    assert_eq!(decoder.symbol(1), Some(&data[1][..]));
}

#[test]
fn block_boundaries_and_the_last_partial_block() {
    let (k, size) = (5, 16);
    for len in [1usize, 15, 16, 17, 79, 80, 81, 160, 3 * 80 - 5, 1000] {
        let stream: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
        let mut received = Vec::new();
        let mut blocks = 0;
        for (b, block) in stream.chunks(k * size).enumerate() {
            let encoder = Encoder::from_block(block, size).unwrap();
            assert_eq!(encoder.k(), block.len().div_ceil(size));
            let mut decoder = Decoder::new(encoder.k(), size).unwrap();
            let mut payload = vec![0u8; size];
            // Every other source symbol lost; repairs replace them.
            for i in (0..encoder.k()).filter(|i| (i + b) % 2 == 0) {
                encoder
                    .encode(CodedSymbol::Source(i), &mut payload)
                    .unwrap();
                decoder.receive(CodedSymbol::Source(i), &payload).unwrap();
            }
            let mut seed = 0;
            while !decoder.is_complete() && seed < 64 {
                encoder.repair(seed, &mut payload).unwrap();
                decoder
                    .receive(CodedSymbol::Repair(seed), &payload)
                    .unwrap();
                seed += 1;
            }
            let decoded = decoder.take_block().expect("complete");
            assert_eq!(decoded.len(), encoder.k() * size);
            // The padding of a short last symbol decodes as zeros.
            assert!(decoded[block.len()..].iter().all(|&b| b == 0));
            received.extend_from_slice(&decoded[..block.len()]);
            blocks += 1;
        }
        assert_eq!(blocks, len.div_ceil(k * size));
        assert_eq!(received, stream, "stream of {len}");
    }
}

#[test]
fn a_block_of_one_symbol() {
    let data = block(1, 20, 4);
    let encoder = Encoder::new(data.clone(), 20).unwrap();
    let mut payload = vec![0u8; 20];
    for symbol in [
        CodedSymbol::Source(0),
        CodedSymbol::Repair(0),
        CodedSymbol::Repair(77),
    ] {
        let mut decoder = Decoder::new(1, 20).unwrap();
        encoder.encode(symbol, &mut payload).unwrap();
        assert_eq!(decoder.receive(symbol, &payload), Ok(Reception::Innovative));
        assert!(decoder.is_complete());
        assert_eq!(decoder.decoded_prefix(), 1);
        assert_eq!(decoder.symbol(0), Some(&data[0][..]));
        assert_eq!(
            decoder.receive(symbol, &payload),
            Ok(Reception::NotInnovative)
        );
        assert_eq!(decoder.take_block().unwrap(), data[0]);
    }
}

#[test]
fn take_block_waits_for_completion_and_leaves_an_empty_decoder() {
    let (k, size) = (2, 4);
    let mut decoder = Decoder::new(k, size).unwrap();
    assert_eq!(decoder.take_block(), None);
    decoder
        .receive(CodedSymbol::Source(1), &[1, 2, 3, 4])
        .unwrap();
    assert_eq!(decoder.take_block(), None);
    assert_eq!(decoder.rank(), 1);
    decoder
        .receive(CodedSymbol::Source(0), &[5, 6, 7, 8])
        .unwrap();
    assert_eq!(decoder.take_block(), Some(vec![5, 6, 7, 8, 1, 2, 3, 4]));
    assert_eq!((decoder.rank(), decoder.decoded_prefix()), (0, 0));
    assert_eq!(decoder.symbol(0), None);
    // Reused for the next block.
    decoder.receive(CodedSymbol::Source(0), &[9; 4]).unwrap();
    decoder.receive(CodedSymbol::Source(1), &[10; 4]).unwrap();
    assert_eq!(decoder.take_block(), Some(vec![9, 9, 9, 9, 10, 10, 10, 10]));
}

#[test]
fn shapes_and_buffers_are_checked() {
    for (k, size) in [
        (0, 10),
        (MAX_SYMBOLS + 1, 10),
        (4, 0),
        (4, MAX_SYMBOL_SIZE + 1),
    ] {
        assert_eq!(
            Decoder::new(k, size).err(),
            Some(RlncError::Shape {
                k,
                symbol_size: size
            })
        );
    }
    assert!(Decoder::new(MAX_SYMBOLS, 1).is_ok());
    assert!(Encoder::from_block(&[], 10).is_err());
    assert!(Encoder::from_block(&[1, 2, 3], 0).is_err());
    assert_eq!(
        Encoder::new(vec![vec![0u8; 11]], 10).err(),
        Some(RlncError::SymbolSize {
            len: 11,
            symbol_size: 10
        })
    );
    let encoder = Encoder::from_block(&[1u8; 25], 10).unwrap();
    assert_eq!(encoder.k(), 3);
    assert_eq!(encoder.source(2), Some(&[1u8; 5][..]));
    assert_eq!(encoder.source(3), None);
    let mut out = vec![0u8; 9];
    assert_eq!(
        encoder.repair(1, &mut out),
        Err(RlncError::SymbolSize {
            len: 9,
            symbol_size: 10
        })
    );
    let mut out = vec![0xffu8; 10];
    assert_eq!(
        encoder.encode(CodedSymbol::Source(3), &mut out),
        Err(RlncError::IndexOutOfBlock { index: 3, k: 3 })
    );
    encoder.encode(CodedSymbol::Source(2), &mut out).unwrap();
    assert_eq!(out, [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
}

#[test]
fn borrowed_and_owned_symbols_code_alike() {
    let data = block(7, 50, 8);
    let owned = Encoder::new(data.clone(), 50).unwrap();
    let shared: Vec<bytes::Bytes> = data.iter().cloned().map(bytes::Bytes::from).collect();
    let shared = Encoder::new(shared, 50).unwrap();
    let contiguous = concat(&data);
    let borrowed = Encoder::from_block(&contiguous, 50).unwrap();
    let scalar = Encoder::from_block(&contiguous, 50)
        .unwrap()
        .with_kernel(Kernel::scalar());
    for seed in [0, 1, 0xffff_ffff] {
        let mut expected = vec![0u8; 50];
        owned.repair(seed, &mut expected).unwrap();
        let mut out = vec![0u8; 50];
        shared.repair(seed, &mut out).unwrap();
        assert_eq!(out, expected);
        borrowed.repair(seed, &mut out).unwrap();
        assert_eq!(out, expected);
        scalar.repair(seed, &mut out).unwrap();
        assert_eq!(out, expected);
    }
}

#[test]
fn a_block_of_the_largest_k_decodes_from_repairs() {
    let (k, size) = (MAX_SYMBOLS, 3);
    let data = block(k, size, 11);
    let encoder = Encoder::new(data.clone(), size).unwrap();
    let mut decoder = Decoder::new(k, size).unwrap();
    let mut payload = vec![0u8; size];
    let mut seed = 1000;
    while !decoder.is_complete() && seed < 1000 + k as u32 + 8 {
        encoder.repair(seed, &mut payload).unwrap();
        decoder
            .receive(CodedSymbol::Repair(seed), &payload)
            .unwrap();
        seed += 1;
    }
    assert!(decoder.is_complete(), "rank {}", decoder.rank());
    assert_eq!(decoder.take_block().unwrap(), concat(&data));
}
