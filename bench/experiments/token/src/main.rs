//! Nanoseconds per owner token: our hex of 128 random bits (before), the uuid crate's encoder of the same bits
//! (now), and v4 / v7 UUIDs (bench/results/2026-11-25-token.md).

use std::hint::black_box;
use std::time::Instant;
fn old() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bits = rand::random::<u128>();
    let mut digits = vec![0; 32];
    for (at, digit) in digits.iter_mut().enumerate() {
        *digit = HEX[(bits >> (4 * (31 - at))) as usize & 0xf];
    }
    String::from_utf8(digits).expect("hex")
}
fn new() -> String {
    let mut digits = [0; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::from_u128(rand::random()).simple().encode_lower(&mut digits).to_owned()
}
fn v4() -> String {
    let mut digits = [0; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::new_v4().simple().encode_lower(&mut digits).to_owned()
}
fn v7() -> String {
    let mut digits = [0; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::now_v7().simple().encode_lower(&mut digits).to_owned()
}
fn main() {
    const N: u32 = 5_000_000;
    for round in 0..5 {
        let t = Instant::now();
        for _ in 0..N { black_box(old()); }
        let a = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        for _ in 0..N { black_box(new()); }
        let b = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        for _ in 0..N { black_box(v4()); }
        let c = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        for _ in 0..N { black_box(v7()); }
        let d = t.elapsed().as_nanos() as f64 / N as f64;
        println!("round {round}: hand-written {a:.1} ns/token, uuid encoder of 128 random bits {b:.1}, v4 fast-rng {c:.1}, v7 {d:.1}");
    }
}
