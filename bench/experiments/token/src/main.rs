//! Nanoseconds per owner token: our hex of 128 random bits (before), the uuid crate's encoder of the same bits
//! (now), and v4 / v7 UUIDs (bench/results/2026-11-25-token.md).

use std::hint::black_box;
use std::time::Instant;
use uuid::Uuid;

/// Tokens made per variant and round.
const N: u32 = 5_000_000;

/// The token before: 128 random bits, hex digit by digit.
fn hand_written() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bits = rand::random::<u128>();
    let mut digits = vec![0; 32];
    for (at, digit) in digits.iter_mut().enumerate() {
        *digit = HEX[(bits >> (4 * (31 - at))) as usize & 0xf];
    }
    String::from_utf8(digits).expect("hex")
}

/// `id` as 32 lowercase hex digits, by the uuid crate's encoder.
fn hex(id: Uuid) -> String {
    let mut digits = [0; uuid::fmt::Simple::LENGTH];
    id.simple().encode_lower(&mut digits).to_owned()
}

/// Mean nanoseconds per token of `make` over [`N`] tokens.
fn ns_per_token(make: fn() -> String) -> f64 {
    let started = Instant::now();
    for _ in 0..N {
        black_box(make());
    }
    started.elapsed().as_nanos() as f64 / f64::from(N)
}

fn main() {
    let variants: [(&str, fn() -> String); 4] = [
        ("hand-written", hand_written),
        ("uuid encoder of 128 random bits", || hex(Uuid::from_u128(rand::random()))),
        ("v4 fast-rng", || hex(Uuid::new_v4())),
        ("v7", || hex(Uuid::now_v7())),
    ];
    for round in 0..5 {
        let figures: Vec<String> =
            variants.iter().map(|(name, make)| format!("{name} {:.1}", ns_per_token(*make))).collect();
        println!("round {round}: ns/token: {}", figures.join(", "));
    }
}
