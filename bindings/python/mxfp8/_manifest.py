"""The words of a bucket manifest (the list export_bucket returns, or a sender's JSON of it) and their codes
in the C library. The extension reads a manifest into mxfp8_transfer_desc's bucket lists (its BucketSource,
for import_bucket, unpack_bucket and SGLang's payload alike) and the C library's mxfp8_transfer_check says
what it means: every receiver, in every binding, refuses the same manifests with the same message
(desc.parts_in[i] there is manifest[i] here)."""

LAYOUTS = {"compact": 0, "cutlass_128x4": 1, "trtllm": 2, "deepgemm": 3, "trtllm_gated": 4,  # mxfp8_scale_layout
           "deepgemm_float32": 5}
# The element type an engine holds a layout's scales in, when it is not bytes (4 bytes an element).
LAYOUT_WORDS = {"deepgemm": "int32", "deepgemm_float32": "float32"}
ENTRY_FORMATS = {"mxfp8": 0, "nvfp4": 1}  # an entry's "format" (absent: mxfp8)
