//! Fast deterministic random data (wyrand). Each flux row is an independent
//! stream keyed by (seed, column, row), so tests can recompute any value.

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
    let mut chunks = dst.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = wyrand(&mut s);
        let lo = f32_bits(v as u32);
        let hi = f32_bits((v >> 32) as u32);
        c.copy_from_slice(&(u64::from(lo) | (u64::from(hi) << 32)).to_le_bytes());
    }
    let rem = chunks.into_remainder();
    if rem.len() >= 4 {
        let v = wyrand(&mut s);
        rem[..4].copy_from_slice(&f32_bits(v as u32).to_le_bytes());
    }
}

/// The values our Parquet writer stores for (seed, column, row) of `n` floats.
pub fn flux_row_values(seed: u64, column: usize, row: u64, n: usize) -> Vec<f32> {
    let mut b = Vec::with_capacity(n * 4);
    fill_f32_le(row_seed(seed, column, row), n, &mut b);
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
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
#[allow(clippy::unwrap_used)]
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
