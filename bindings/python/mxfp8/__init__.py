"""mxfp8: hand MXFP8 weights from a trainer to whoever consumes them next.

    values, scales = mxfp8.export_components(data, scale_inv, swizzled=True)

``values`` is a zero-copy view of the FP8 data; ``scales`` holds the compact E8M0 scales
``(*shape[:-1], ceil(K/32))`` as uint8, unpadded and unswizzled. Inputs are any DLPack producers (torch,
JAX, CuPy, NumPy); with torch inputs the results are torch tensors.

    q = mxfp8.quantize(weight_bf16, scales="swizzled")   # TE-exact, in TE's layout

``python -m mxfp8 demo`` runs the whole path on a built-in weight set and checks it bit for bit.
"""
from ._api import Components, export_components, export_grouped, export_te
from ._convert import Converted, convert
from ._bucket import export_bucket, iter_buckets, swizzle_scales, unpack_bucket, unswizzle_scales
from ._import import (import_bucket, import_tensors, layout_bytes, prepare_import_bucket, prepare_import_tensors,
                      scales_shape)
from ._mxfp8 import Array
from ._nvfp4_quantize import NVFP4Quantized, nvfp4_quantize, nvfp4_quantize_fused
from ._plan import Plan, prepare_buckets, prepare_export
from ._quantize import Quantized, dequantize, quantize
from ._tvm_ffi import tvm_ffi_library_path
from . import nvfp4

ImportPlan = Plan  # the former name of the plans prepare_import_* return; removed in the next release

__version__ = "0.1.0"
__all__ = [
    "Array",
    "Components",
    "Converted",
    "ImportPlan",
    "NVFP4Quantized",
    "Plan",
    "Quantized",
    "convert",
    "dequantize",
    "export_bucket",
    "export_components",
    "export_grouped",
    "export_te",
    "import_bucket",
    "import_tensors",
    "nvfp4",
    "iter_buckets",
    "layout_bytes",
    "nvfp4_quantize",
    "nvfp4_quantize_fused",
    "prepare_buckets",
    "prepare_export",
    "prepare_import_bucket",
    "prepare_import_tensors",
    "quantize",
    "scales_shape",
    "swizzle_scales",
    "tvm_ffi_library_path",
    "unpack_bucket",
    "unswizzle_scales",
    "__version__",
]
