//! References the tests compare the library with, written from the header's formulas (never from the
//! library's code), and input generators.
#![allow(dead_code)]

pub const POISON: u8 = 0xEE;

/// The cuBLAS 128x4 layout offset of (r, c), written from the layout's permute form
/// (tiles of 128 x 4: [r/128][c/4][r%32][(r%128)/32][c%4]).
pub fn swizzled_index(r: usize, c: usize, padded_cols: usize) -> usize {
    let (a, b, cc, d, e) = (r / 128, (r % 128) / 32, r % 32, c / 4, c % 4);
    (((a * (padded_cols / 4) + d) * 32 + cc) * 4 + b) * 4 + e
}

/// The swizzled buffer of a rows x cols matrix, padding set to `pad`.
pub fn swizzle_reference(s: &[u8], rows: usize, cols: usize, pad: u8) -> Vec<u8> {
    let (rp, cp) = (rows.div_ceil(128) * 128, cols.div_ceil(4) * 4);
    let mut out = vec![pad; rp * cp];
    for r in 0..rows {
        for c in 0..cols {
            out[swizzled_index(r, c, cp)] = s[r * cols + c];
        }
    }
    out
}

/// A rows x cols matrix placed in a padded_rows x padded_cols row-major buffer, padding `pad`.
pub fn pad_reference(s: &[u8], rows: usize, cols: usize, padded_rows: usize, padded_cols: usize, pad: u8) -> Vec<u8> {
    let mut out = vec![pad; padded_rows * padded_cols];
    for r in 0..rows {
        out[r * padded_cols..r * padded_cols + cols].copy_from_slice(&s[r * cols..(r + 1) * cols]);
    }
    out
}

pub fn transpose(s: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0; s.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = s[r * cols + c];
        }
    }
    out
}

pub fn random_bytes(n: usize, seed: u64, lo: u8, hi: u8) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lo + (x % (hi as u64 - lo as u64 + 1)) as u8
        })
        .collect()
}

/// Floats spread over many binades, signed, with an all-zero 32-block at the start.
pub fn random_floats(n: usize, seed: u64) -> Vec<f32> {
    let bytes = random_bytes(3 * n, seed, 0, 255);
    (0..n)
        .map(|i| {
            if i < 32 {
                return 0.0;
            }
            let mantissa = 1.0 + bytes[3 * i] as f32 / 256.0;
            let exponent = (bytes[3 * i + 1] % 24) as i32 - 12;
            let sign = if bytes[3 * i + 2] & 1 == 1 { -1.0 } else { 1.0 };
            sign * mantissa * 2f32.powi(exponent)
        })
        .collect()
}

/// E4M3FN to f64, from the bit format.
pub fn decode_e4m3(v: u8) -> f64 {
    let (sign, e, m) = (v >> 7, ((v >> 3) & 15) as i32, (v & 7) as f64);
    if e == 15 && m == 7.0 {
        return f64::NAN;
    }
    let x = if e == 0 { m * 2f64.powi(-9) } else { (8.0 + m) * 2f64.powi(e - 10) };
    if sign == 1 {
        -x
    } else {
        x
    }
}

/// f32 to E4M3FN: the nearest finite code (ties to the even code), so anything past 448 saturates.
pub fn encode_e4m3(y: f32) -> u8 {
    if y.is_nan() {
        return 0x7F;
    }
    let a = y.abs() as f64;
    let mut best = 0u8;
    for c in 1..=0x7Eu8 {
        let (d, db) = ((decode_e4m3(c) - a).abs(), (decode_e4m3(best) - a).abs());
        if d < db || (d == db && c % 2 == 0) {
            best = c;
        }
    }
    if y.is_sign_negative() {
        best | 0x80
    } else {
        best
    }
}

/// The header's RCEIL scale of a block's amax for E4M3 (normal inputs): the E8M0 exponent of
/// amax * float(1/448), rounded up.
pub fn rceil_scale(amax: f32) -> u8 {
    let v = amax * (1.0f32 / 448.0);
    if v == 0.0 {
        return 0;
    }
    let bits = v.to_bits();
    let (exp, mantissa) = ((bits >> 23) & 0xFF, bits & 0x7F_FFFF);
    assert!(exp > 0 && exp < 0xFF, "the reference covers normal block maxima only");
    (exp + (mantissa != 0) as u32).min(254) as u8
}

/// r(e) = 2^(127 - e), r(0) = 1, r(254) = 0.
pub fn reciprocal(e: u8) -> f32 {
    match e {
        0 => 1.0,
        254 => 0.0,
        e => f32::from_bits((254 - e as u32) << 23),
    }
}

/// Rowwise E4M3 quantize of a (m, k) matrix: values and compact (m, ceil(k/32)) scales.
pub fn quantize_rowwise_reference(x: &[f32], m: usize, k: usize) -> (Vec<u8>, Vec<u8>) {
    let c = k.div_ceil(32);
    let (mut values, mut scales) = (vec![0u8; m * k], vec![0u8; m * c]);
    for r in 0..m {
        for b in 0..c {
            let cols = b * 32..((b + 1) * 32).min(k);
            let amax = cols.clone().map(|j| x[r * k + j].abs()).fold(0f32, f32::max);
            let e = rceil_scale(amax);
            scales[r * c + b] = e;
            for j in cols {
                values[r * k + j] = encode_e4m3(x[r * k + j] * reciprocal(e));
            }
        }
    }
    (values, scales)
}

/// Columnwise E4M3 quantize of a (m, k) matrix: values (m, k) and compact (ceil(m/32), k) scales.
pub fn quantize_columnwise_reference(x: &[f32], m: usize, k: usize) -> (Vec<u8>, Vec<u8>) {
    let xt = transpose_f32(x, m, k);
    let (vt, st) = quantize_rowwise_reference(&xt, k, m);
    (transpose(&vt, k, m), transpose(&st, k, m.div_ceil(32)))
}

pub fn transpose_f32(s: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; s.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = s[r * cols + c];
        }
    }
    out
}

/// bfloat16 bits to f32 (exact).
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// f32 to bfloat16 bits, rounded to nearest-even (finite inputs).
pub fn f32_to_bf16(f: f32) -> u16 {
    let bits = f.to_bits();
    ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) as u16
}

pub fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m) * m
}

/// SGLang's DeepGEMM scales on Hopper: each E8M0 byte as the float32 2^(e - 127) (0.0 for byte 0,
/// infinity for 255, the values of the bit patterns `e << 23` SGLang builds), little-endian bytes.
pub fn hopper_deepgemm_reference(s: &[u8]) -> Vec<u8> {
    s.iter()
        .flat_map(|&e| {
            let v = match e {
                0 => 0.0f32,
                255 => f32::INFINITY,
                _ => 2f32.powi(i32::from(e) - 127),
            };
            v.to_le_bytes()
        })
        .collect()
}

/// DeepGEMM's packed UE8M0 layout of a rows x cols matrix, written from the header's byte offset
/// formula: S(r, c) at ((c / 4) * roundup(rows, 4) + r) * 4 + c % 4, every other byte `pad`.
pub fn deepgemm_reference(s: &[u8], rows: usize, cols: usize, pad: u8) -> Vec<u8> {
    let aligned = round_up(rows, 4);
    let mut out = vec![pad; 4 * cols.div_ceil(4) * aligned];
    for r in 0..rows {
        for c in 0..cols {
            out[((c / 4) * aligned + r) * 4 + c % 4] = s[r * cols + c];
        }
    }
    out
}

/// FlashInfer's shuffle_matrix_a row map (epilogue_tile_m 128), from the header: source row 32b + i
/// goes to row 32b + 8 * (i % 4) + i / 4.
pub fn trtllm_destination_row(r: usize) -> usize {
    32 * (r / 32) + 8 * (r % 4) + (r % 32) / 4
}

/// The gated (w13) source row of destination row d before the shuffle: row 2i <- up row i (source
/// n + i), row 2i + 1 <- gate row i (source i), for 2n rows.
pub fn gated_source_row(d: usize, n: usize) -> usize {
    if d % 2 == 0 {
        n + d / 2
    } else {
        d / 2
    }
}

/// Rows of a rows x width matrix moved as `destination(source row)` says.
pub fn permute_rows(x: &[u8], rows: usize, width: usize, destination: impl Fn(usize) -> usize) -> Vec<u8> {
    let mut out = vec![POISON; rows * width];
    for r in 0..rows {
        let d = destination(r);
        out[d * width..(d + 1) * width].copy_from_slice(&x[r * width..(r + 1) * width]);
    }
    out
}

/// The cuBLAS 128x4 layout of a `rows x cols` host scale matrix, through the library (padding zero).
pub fn swizzle_host(compact: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>, mxfp8::Error> {
    let len = mxfp8::layout_bytes(mxfp8::Layout::Cutlass128x4, mxfp8::Direction::Rowwise, rows as i64, cols as i64)?;
    let mut out = vec![0u8; len as usize];
    mxfp8::swizzle_scales(compact, rows, cols, &mut out, mxfp8::Stream::default())?;
    Ok(out)
}

/// The row-major `rows x cols` matrix held in a swizzled host buffer, through the library.
pub fn unswizzle_host(swizzled: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>, mxfp8::Error> {
    let mut out = vec![0u8; rows * cols];
    mxfp8::unswizzle_scales(swizzled, rows, cols, &mut out, mxfp8::Stream::default())?;
    Ok(out)
}

/// The shape of the scales an MXFP8 quantize of `shape` writes for `direction` in `layout` (the header's
/// formulas): compact `(*lead, ceil(K/32))` / `(ceil(M/32), K)`, or TE's padded (and swizzled) buffer.
pub fn quantized_scales_shape(layout: mxfp8::QuantizedScales, shape: &[i64], direction: mxfp8::Direction) -> Vec<i64> {
    let (k, m) = (shape[shape.len() - 1], shape[..shape.len() - 1].iter().product::<i64>());
    let up = |n: i64, d: i64| (n + d - 1) / d * d;
    match (layout, direction) {
        (mxfp8::QuantizedScales::Compact, mxfp8::Direction::Rowwise) => vec![m, (k + 31) / 32],
        (mxfp8::QuantizedScales::Compact, _) => vec![(m + 31) / 32, k],
        (_, mxfp8::Direction::Rowwise) => vec![up(m, 128), up((k + 31) / 32, 4)],
        (_, _) => vec![up((m + 31) / 32, 4), up(k, 128)],
    }
}

/// The bytes of the block scales an NVFP4 quantize of `shape` writes: the stored (R, C) matrix (rowwise
/// (M, K), columnwise (K, M)), compact `R * ceil(C/16)` or padded / swizzled `roundup(R, 128) * roundup(ceil(C/16), 4)`.
pub fn nvfp4_scales_len(layout: mxfp8::QuantizedScales, direction: mxfp8::Direction, shape: &[i64]) -> usize {
    let (k, m) = (shape[shape.len() - 1], shape[..shape.len() - 1].iter().product::<i64>());
    let (r, c) = if direction == mxfp8::Direction::Rowwise { (m, k) } else { (k, m) };
    let up = |n: i64, d: i64| (n + d - 1) / d * d;
    (match layout {
        mxfp8::QuantizedScales::Compact => r * ((c + 15) / 16),
        _ => up(r, 128) * up((c + 15) / 16, 4),
    }) as usize
}

/// Decodes `direction` of a tensor in host memory to a new float32 vector of `prod(shape)` elements.
pub fn dequantize_host(tensor: &mxfp8::Tensor, direction: mxfp8::Direction) -> Result<Vec<f32>, mxfp8::Error> {
    let mut out = vec![0f32; tensor.shape().iter().product::<i64>() as usize];
    tensor.dequantize_into(&mut out, &mxfp8::DequantizeOptions::new().direction(direction))?;
    Ok(out)
}
