// Reading a caller's option structs: the size prefix (older callers, smaller struct_size, get defaults
// for the fields they do not know; newer callers are accepted when every field this build does not know
// is 0) and the enum fields inside them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "core/error.hpp"

namespace mxfp8 {

// `field_ends`: where each field past `smallest_size` ends (offsetof the next one), for a struct that
// grew; a struct_size between smallest_size and sizeof(T) must be one of them. A size that ends inside a
// field is no version of the struct: the copy below would keep the caller's first bytes of that field
// and the default's last ones, and a pointer cut so (a manifest's shards or global_scales) is an address
// nobody gave us.
template <class T>
T read_sized_struct(const T *caller, const T &defaults, size_t smallest_size, const char *name,
                    const char *init_macro, std::initializer_list<size_t> field_ends = {}) {
  if (!caller) return defaults;
  const uint32_t size = caller->struct_size;
  if (size < smallest_size)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".struct_size is ", size, ", smaller than any version of ",
         name, " (", smallest_size, " bytes): initialize it with ", init_macro);
  if (size > smallest_size && size < sizeof(T) &&
      std::find(field_ends.begin(), field_ends.end(), size_t{size}) == field_ends.end())
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".struct_size is ", size, ", which ends inside a field: no version of ",
         name, " has that size; initialize it with ", init_macro);
  T result = defaults;
  std::memcpy(&result, caller, std::min<size_t>(size, sizeof(T)));
  const auto *bytes = reinterpret_cast<const unsigned char *>(caller);
  for (size_t i = sizeof(T); i < size; ++i)
    if (bytes[i] != 0)
      fail(MXFP8_ERROR_UNSUPPORTED, name, " sets fields this build does not know (struct_size ", size,
           ", this build knows ", sizeof(T), " bytes): link against a newer libmxfp8");
  result.struct_size = static_cast<uint32_t>(sizeof(T));
  return result;
}

// An options struct's `flags` (MXFP8_CHECK_ONLY, the one bit so far): whether the call stops after its
// checks. Any other bit is refused, so that a caller who sets one a later build defines is told.
inline bool check_only(uint64_t flags) {
  if (flags & ~uint64_t{MXFP8_CHECK_ONLY})
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.flags is ", flags, ", expected MXFP8_CHECK_ONLY (", MXFP8_CHECK_ONLY, ") or 0");
  return flags != 0;
}

struct EnumValue {
  int32_t value;
  const char *name;
};

// Fails with "options.direction is 2, expected MXFP8_DIRECTION_ROWWISE (0) or ..." unless `value` is
// one of `allowed`. The message is built only then: every call checks several enums, and building it
// as it scanned cost a string stream per value passed over (~2,000 instructions a call).
inline void check_enum(int32_t value, const char *field, std::initializer_list<EnumValue> allowed) {
  for (const EnumValue &e : allowed)
    if (e.value == value) return;
  std::string expected;
  for (const EnumValue &e : allowed) expected += cat(expected.empty() ? "" : " or ", e.name, " (", e.value, ")");
  fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", value, ", expected ", expected);
}

}  // namespace mxfp8
