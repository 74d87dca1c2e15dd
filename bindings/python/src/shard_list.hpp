// Shards as the Python layer passes them (mxfp8/_shard.py): None, or one entry per tensor that is None
// (the whole tensor) or the dict of mxfp8_shard fields shard_fields() returns. Owns the structs and the
// piece arrays for the length of one call.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "mxfp8/mxfp8.h"

class ShardList {
 public:
  ShardList(const std::optional<std::vector<pybind11::object>> &given, size_t count) {
    if (!given) return;
    if (given->size() != count) throw pybind11::value_error("shards must have one entry per tensor");
    shards_.resize(count);
    pieces_.resize(count);
    pointers_.assign(count, nullptr);
    for (size_t i = 0; i < count; ++i) {
      const pybind11::object &g = (*given)[i];
      if (g.is_none()) continue;
      mxfp8_shard s = MXFP8_SHARD_INIT;
      s.row_begin = g["row_begin"].cast<int64_t>();
      s.row_end = g["row_end"].cast<int64_t>();
      s.col_begin = g["col_begin"].cast<int64_t>();
      s.col_end = g["col_end"].cast<int64_t>();
      pybind11::object pieces = g["row_pieces"];
      if (!pieces.is_none()) {
        pieces_[i] = pieces.cast<std::vector<int64_t>>();
        if (pieces_[i].size() % 2 != 0) throw pybind11::value_error("row pieces come as (begin, end) pairs");
        s.num_row_pieces = pieces_[i].size() / 2;
        s.row_pieces = pieces_[i].data();
      }
      shards_[i] = s;
      pointers_[i] = &shards_[i];
    }
  }
  // NULL when no shards were given: every tensor whole.
  const mxfp8_shard *const *data() const { return pointers_.empty() ? nullptr : pointers_.data(); }

 private:
  std::vector<mxfp8_shard> shards_;
  std::vector<std::vector<int64_t>> pieces_;
  std::vector<const mxfp8_shard *> pointers_;
};
