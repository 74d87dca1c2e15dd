//! Resharding: one shard of a tensor (rows of M, K columns, or several row ranges of a fused weight), for
//! an export (`ExportOptions::shard`) or a transfer's entry (`Transfer::shards`; the header's "Resharding").
use core::ops::Range;
use core::ptr;

use crate::sys;

/// Which part of a tensor: row ranges of M (concatenated in order; empty: every row) and a range of K
/// columns (None: all of K). Rowwise, K boundaries are multiples of 32 (or K); columnwise, row
/// boundaries are multiples of 32 (or M). The end of the one row range or of the column range may be
/// [`Shard::END`]: to M or K (several row ranges take explicit ends). The library checks them and says
/// which one is wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    /// Row ranges, concatenated in this order (a fused QKV weight's Q, K and V rows of one rank).
    pub rows: Vec<Range<i64>>,
    /// K columns.
    pub cols: Option<Range<i64>>,
}

impl Shard {
    /// As the end of the one row range or of the column range: the end of the dimension, M or K
    /// (`MXFP8_SHARD_END`), e.g. `Shard::rows(4096..Shard::END)`.
    pub const END: i64 = sys::MXFP8_SHARD_END;

    /// The whole tensor.
    pub fn whole() -> Self {
        Self::default()
    }
    /// Rows `rows` of M (a shard of N for a column-parallel weight).
    pub fn rows(rows: Range<i64>) -> Self {
        Self { rows: vec![rows], cols: None }
    }
    /// K columns `cols` (a shard of K for a row-parallel weight).
    pub fn cols(cols: Range<i64>) -> Self {
        Self { rows: Vec::new(), cols: Some(cols) }
    }
    /// Several row ranges, concatenated.
    pub fn row_pieces(pieces: &[Range<i64>]) -> Self {
        Self { rows: pieces.to_vec(), cols: None }
    }
    /// Whether this is the whole tensor (no row range, no column range).
    pub fn is_whole(&self) -> bool {
        self.rows.is_empty() && self.cols.is_none()
    }
    /// The shape of this shard of a tensor of logical `shape` `(*lead, K)`: the tensor's own shape for
    /// the whole tensor, else `(rows, cols)` (the sum of the row ranges or M, the column range or K),
    /// what a receiver's manifest and destinations describe. Ranges are not checked here (the library
    /// checks them against the tensor).
    pub fn shape_of(&self, shape: &[i64]) -> Vec<i64> {
        if self.is_whole() {
            return shape.to_vec();
        }
        // Saturating: the ranges are not checked yet, and a shape that overflowed would be refused anyway.
        let (k, m) = shape.split_last().map_or((1, 1), |(&k, lead)| (k, lead.iter().fold(1i64, |m, &d| m.saturating_mul(d))));
        // END is the dimension's end where the library reads it so: the one row range (row_end) and
        // the column range (col_end); several row ranges are pieces, where the library refuses it.
        let end = |r: &Range<i64>, dim: i64| if r.end == Self::END { dim } else { r.end };
        let rows = match self.rows.as_slice() {
            [] => m,
            [one] => end(one, m).saturating_sub(one.start),
            pieces => pieces.iter().fold(0i64, |n, r| n.saturating_add(r.end.saturating_sub(r.start))),
        };
        let cols = self.cols.as_ref().map_or(k, |c| end(c, k).saturating_sub(c.start));
        vec![rows, cols]
    }

    /// The C struct and the piece array its `row_pieces` points into (which must outlive every use of
    /// the struct; moving the pair does not move the array's heap buffer).
    fn to_raw(&self) -> (sys::mxfp8_shard, Vec<i64>) {
        let mut raw = sys::mxfp8_shard::default();
        if let Some(cols) = &self.cols {
            raw.col_begin = cols.start;
            raw.col_end = cols.end;
        }
        let pieces: Vec<i64> = self.rows.iter().flat_map(|r| [r.start, r.end]).collect();
        match self.rows.len() {
            0 => {}
            1 => {
                raw.row_begin = self.rows[0].start;
                raw.row_end = self.rows[0].end;
            }
            n => {
                raw.num_row_pieces = n;
                raw.row_pieces = pieces.as_ptr();
            }
        }
        (raw, pieces)
    }
}

/// Shards as the C calls take them: one pointer per tensor, NULL for a whole one. The pointers point
/// into the structs and piece arrays held here (heap buffers that never grow), valid as long as this value.
pub(crate) struct RawShards {
    _structs: Vec<(sys::mxfp8_shard, Vec<i64>)>,
    pointers: Vec<*const sys::mxfp8_shard>,
}

impl RawShards {
    pub(crate) fn new(shards: &[Shard]) -> Self {
        let structs: Vec<(sys::mxfp8_shard, Vec<i64>)> = shards.iter().map(Shard::to_raw).collect();
        let pointers = structs.iter().zip(shards).map(|(b, s)| if s.is_whole() { ptr::null() } else { &b.0 as *const _ }).collect();
        Self { _structs: structs, pointers }
    }
    /// The array of `count` pointers (NULL when there are no shards at all).
    pub(crate) fn as_ptr(&self) -> *const *const sys::mxfp8_shard {
        if self.pointers.is_empty() {
            ptr::null()
        } else {
            self.pointers.as_ptr()
        }
    }
}
