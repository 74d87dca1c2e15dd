//! Resharding: one shard of a tensor (rows of M, K columns, or several row ranges of a fused weight),
//! exported straight from the stored scales (`mxfp8_export_shard`; the header's "Resharding" section).
use core::ops::Range;
use core::ptr;

use crate::error::{check, Error};
use crate::managed::ManagedTensor;
use crate::options::ExportOptions;
use crate::sys;
use crate::tensor::{Components, Tensor};

/// Which part of a tensor: row ranges of M (concatenated in order; empty: every row) and a range of K
/// columns (None: all of K). Rowwise, K boundaries are multiples of 32 (or K); columnwise, row
/// boundaries are multiples of 32 (or M). The library checks them and says which one is wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    /// Row ranges, concatenated in this order (a fused QKV weight's Q, K and V rows of one rank).
    pub rows: Vec<Range<i64>>,
    /// K columns.
    pub cols: Option<Range<i64>>,
}

impl Shard {
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

    /// Runs `f` with the C struct, whose piece array lives for the call.
    pub(crate) fn with_raw<R>(&self, f: impl FnOnce(&sys::mxfp8_shard) -> R) -> R {
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
        f(&raw)
    }
}

impl Tensor {
    /// Exports one shard of `options`' direction: values `(rows, cols)` (a strided view for one row range,
    /// else a copy) and the shard's compact scales, exactly the crop of [`Tensor::export`]'s.
    pub fn export_shard(&self, shard: &Shard, options: &ExportOptions) -> Result<Components, Error> {
        let o = options.to_sys();
        let (mut values, mut scales) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid handle, options and shard (its pieces live for the call); both outputs are
        // written only on success.
        shard.with_raw(|raw| check(unsafe { sys::mxfp8_export_shard(self.as_raw(), raw, &o, &mut values, &mut scales) }))?;
        // SAFETY: on success both are fresh managed tensors that we now own.
        unsafe {
            Ok(Components {
                values: ManagedTensor::from_raw(values).expect("values"),
                scales: ManagedTensor::from_raw(scales).expect("scales"),
            })
        }
    }
}
