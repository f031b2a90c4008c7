//! Our RESP code (crates/core/src/protocol/resp.rs) against the redis crate's, on what a withfn c=50 batch of the
//! direct connection writes and reads: 12 acquisitions as one transaction (SET NX PX GET, INCR, PEXPIRE each) and the
//! replies of those and of a release script call for 12 locks. Prints nanoseconds per batch.

use std::time::Instant;
use tokio_util::codec::Decoder;
fn main() {
    pack_bench();
    // A typical withfn c=50 read: a transaction of 12 acquisitions (MULTI +OK, 36 QUEUED, EXEC array of 36) and a release of 12.
    let mut buf = Vec::new();
    buf.extend_from_slice(b"+OK\r\n");
    for _ in 0..36 { buf.extend_from_slice(b"+QUEUED\r\n"); }
    buf.extend_from_slice(b"*36\r\n");
    for _ in 0..12 { buf.extend_from_slice(b"$-1\r\n:1795579282070470\r\n:1\r\n"); }
    buf.extend_from_slice(b"*12\r\n");
    for _ in 0..12 { buf.extend_from_slice(b":1\r\n"); }
    let replies_per_round = 1 + 36 + 1 + 1;
    let rounds = 200_000;
    // ours
    let t = Instant::now();
    let mut n = 0usize;
    for _ in 0..rounds {
        let mut at = 0;
        while let Ok(Some((r, len))) = snatch_core::parse_reply(&buf[at..]) { at += len; n += 1; std::hint::black_box(r); }
    }
    let ours = t.elapsed();
    // redis ValueCodec
    let mut codec = redis::ValueCodec::default();
    let t = Instant::now();
    let mut m = 0usize;
    for _ in 0..rounds {
        let mut b = bytes::BytesMut::from(&buf[..]);
        while let Ok(Some(v)) = codec.decode(&mut b) { m += 1; std::hint::black_box(v); }
    }
    let theirs = t.elapsed();
    println!("replies/round {replies_per_round}, ours {n}, redis {m}");
    println!("ours:  {:.1} ns per round ({:.1} ns per reply)", ours.as_nanos() as f64 / rounds as f64, ours.as_nanos() as f64 / n as f64);
    println!("redis: {:.1} ns per round ({:.1} ns per reply)", theirs.as_nanos() as f64 / rounds as f64, theirs.as_nanos() as f64 / m as f64);
}
/// A RESP line, as resp.rs writes it.
fn line(buf: &mut Vec<u8>, kind: u8, n: usize) { buf.push(kind); buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()); buf.extend_from_slice(b"\r\n"); }
/// A bulk string argument, as resp.rs writes it.
fn arg(buf: &mut Vec<u8>, a: &[u8]) { line(buf, b'$', a.len()); buf.extend_from_slice(a); buf.extend_from_slice(b"\r\n"); }
/// Packs the transaction of 12 acquisitions, the way resp.rs writes it and with redis::Cmd.
fn pack_bench() {
    let keys: Vec<String> = (0..12).map(|i| format!("snatch:bench:key:{i}")).collect();
    let fences: Vec<String> = keys.iter().map(|k| format!("{{{k}}}:fence")).collect();
    let token = "0123456789abcdef0123456789abcdef";
    let rounds = 200_000;
    let mut out = Vec::with_capacity(4096);
    let t = Instant::now();
    for _ in 0..rounds {
        out.clear();
        line(&mut out, b'*', 1); arg(&mut out, b"MULTI");
        for (k, f) in keys.iter().zip(&fences) {
            line(&mut out, b'*', 7); arg(&mut out, b"SET"); arg(&mut out, k.as_bytes()); arg(&mut out, token.as_bytes()); arg(&mut out, b"NX"); arg(&mut out, b"PX"); arg(&mut out, itoa::Buffer::new().format(30000u64).as_bytes()); arg(&mut out, b"GET");
            line(&mut out, b'*', 2); arg(&mut out, b"INCR"); arg(&mut out, f.as_bytes());
            line(&mut out, b'*', 3); arg(&mut out, b"PEXPIRE"); arg(&mut out, f.as_bytes()); arg(&mut out, itoa::Buffer::new().format(604800000u64).as_bytes());
        }
        line(&mut out, b'*', 1); arg(&mut out, b"EXEC");
        std::hint::black_box(&out);
    }
    let ours = t.elapsed();
    let t = Instant::now();
    for _ in 0..rounds {
        out.clear();
        redis::cmd("MULTI").write_packed_command(&mut out);
        for (k, f) in keys.iter().zip(&fences) {
            redis::cmd("SET").arg(k).arg(token).arg("NX").arg("PX").arg(30000u64).arg("GET").write_packed_command(&mut out);
            redis::cmd("INCR").arg(f).write_packed_command(&mut out);
            redis::cmd("PEXPIRE").arg(f).arg(604800000u64).write_packed_command(&mut out);
        }
        redis::cmd("EXEC").write_packed_command(&mut out);
        std::hint::black_box(&out);
    }
    let theirs = t.elapsed();
    println!("pack ours:  {:.1} ns per 12 acquisitions", ours.as_nanos() as f64 / rounds as f64);
    println!("pack redis: {:.1} ns per 12 acquisitions", theirs.as_nanos() as f64 / rounds as f64);
}
