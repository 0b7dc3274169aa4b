//! Fast deterministic random data (wyrand). Each flux row is an independent
//! stream keyed by (seed, column, row), so tests can recompute any value;
//! a scalar column chunk is one stream keyed by its row group's first row
//! (a draw per value would cost more than writing it).

use super::ElemType;

/// wyrand step.
#[inline(always)]
pub fn wyrand(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0xa076_1d64_78bd_642f);
    let t = u128::from(*state) * u128::from(*state ^ 0xe703_7ed1_a0b4_28db);
    ((t >> 64) ^ t) as u64
}

/// Stream seed for one (seed, column, row).
pub fn row_seed(seed: u64, column: usize, row: u64) -> u64 {
    let mut s = seed ^ (column as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    s = s.wrapping_add(row.wrapping_mul(0xD1B5_4A32_D192_ED03));
    wyrand(&mut s)
}

/// Map 23 random bits to an f32 in [1, 2): cheap and never NaN.
#[inline(always)]
fn f32_bits(x: u32) -> u32 {
    (x >> 9) | 0x3F80_0000
}

/// Append `n` random f32 (little-endian bytes) of stream `state` to `out`.
pub fn fill_f32_le(state: u64, n: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + n * 4, 0);
    fill_f32_into(state, &mut out[start..]);
}

/// Overwrite `dst` (whose length is a multiple of 4) with the f32 stream of
/// `state`, the same values [`fill_f32_le`] appends. Writing in place lets the
/// Parquet writer fill its reused page buffer without zero-filling it first.
#[inline]
pub fn fill_f32_into(state: u64, dst: &mut [u8]) {
    let mut s = state;
    fill_f32_stream(&mut s, dst);
}

/// [`fill_f32_into`] continuing stream `s` (a multiple of 8 bytes consumes
/// whole draws, so a chunk filled page by page equals one fill).
#[inline]
fn fill_f32_stream(s: &mut u64, dst: &mut [u8]) {
    let mut chunks = dst.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = wyrand(s);
        let lo = f32_bits(v as u32);
        let hi = f32_bits((v >> 32) as u32);
        c.copy_from_slice(&(u64::from(lo) | (u64::from(hi) << 32)).to_le_bytes());
    }
    let rem = chunks.into_remainder();
    if rem.len() >= 4 {
        let v = wyrand(s);
        rem[..4].copy_from_slice(&f32_bits(v as u32).to_le_bytes());
    }
}

/// Overwrite `dst` with PLAIN-encoded values of type `elem` drawn from
/// stream `s`, which is advanced: 1.0 <= floats < 2.0 (never NaN), int8 any
/// value sign-extended to INT32. `dst.len()` must be a multiple of the
/// stored width; one draw fills 8 bytes of values (int8: 8 values), so
/// filling a chunk in pieces whose lengths are multiples of 32 bytes gives
/// the same bytes as filling it at once.
#[inline]
pub fn fill_values(s: &mut u64, elem: ElemType, dst: &mut [u8]) {
    match elem {
        ElemType::Float32 => fill_f32_stream(s, dst),
        ElemType::Float64 => {
            for c in dst.chunks_exact_mut(8) {
                let v = (wyrand(s) >> 12) | 0x3FF0_0000_0000_0000;
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
        ElemType::Float16 => {
            // Sign 0, exponent 15, 10 random mantissa bits: [1, 2).
            for c in dst.chunks_mut(8) {
                let v = wyrand(s);
                for (k, h) in c.chunks_exact_mut(2).enumerate() {
                    let bits = 0x3C00 | ((v >> (16 * k)) as u16 & 0x3FF);
                    h.copy_from_slice(&bits.to_le_bytes());
                }
            }
        }
        ElemType::Int8 => {
            for c in dst.chunks_mut(32) {
                let v = wyrand(s).to_le_bytes();
                for (b, out) in v.iter().zip(c.chunks_exact_mut(4)) {
                    out.copy_from_slice(&i32::from(*b as i8).to_le_bytes());
                }
            }
        }
    }
}

/// The PLAIN bytes our Parquet writer stores for `rows` rows of scalar
/// column `column` from a row group's first row `group_first_row`: one
/// stream per column chunk.
pub fn scalar_chunk_values(
    seed: u64,
    column: usize,
    group_first_row: u64,
    rows: usize,
    elem: ElemType,
) -> Vec<u8> {
    let mut out = vec![0u8; rows * elem.stored_bytes()];
    let mut s = row_seed(seed, column, group_first_row);
    fill_values(&mut s, elem, &mut out);
    out
}

/// The values our Parquet writer stores for (seed, column, row) of `n` floats.
pub fn flux_row_values(seed: u64, column: usize, row: u64, n: usize) -> Vec<f32> {
    let mut b = Vec::with_capacity(n * 4);
    fill_f32_le(row_seed(seed, column, row), n, &mut b);
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Two independent standard normal draws for `seed` (Box-Muller over
/// wyrand): the per-file sizes DLIO draws from a normal distribution.
pub fn normal_pair(seed: u64) -> (f64, f64) {
    let mut s = seed;
    let mut uniform = || ((wyrand(&mut s) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let (u1, u2) = (uniform(), uniform());
    let r = (-2.0 * u1.ln()).sqrt();
    let th = std::f64::consts::TAU * u2;
    (r * th.cos(), r * th.sin())
}

/// Append `n` random bytes of stream `state`.
pub fn fill_bytes(state: u64, n: usize, out: &mut Vec<u8>) {
    let mut s = state;
    let start = out.len();
    out.resize(start + n, 0);
    let mut chunks = out[start..].chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&wyrand(&mut s).to_le_bytes());
    }
    let rem = chunks.into_remainder();
    let last = wyrand(&mut s).to_le_bytes();
    let k = rem.len();
    rem.copy_from_slice(&last[..k]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_in_range_and_deterministic() {
        let a = flux_row_values(7, 1, 3, 11);
        assert_eq!(a, flux_row_values(7, 1, 3, 11));
        assert_ne!(a, flux_row_values(7, 1, 4, 11));
        assert!(a.iter().all(|v| (1.0..2.0).contains(v)));
    }
}
