// Graph IR graph.lookup: a function of one narrow float value, read from a
// table indexed by the value's storage code.
//
// `table` is a 1-D tensor with one element per code of x's storage format
// (2^bits, at most 2^16); result element i is table[code(x_i)], with the
// table's policy and x's shape. Compiled pipelines build it (Schedule IR's
// tabulate_functions) from a chain of elementwise ops of x alone, with the
// table computed by the reference executor over every code, so the result
// has the chain's bits. A GPU or CPU kernel reads one table element per
// result instead of evaluating erf or exp. Users do not write it; it has no
// derivative rule (autodiff runs before the pipeline builds it).
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "tessera/support/error.h"

namespace tessera::graph {

std::optional<std::int64_t> lookup_code_count(DType storage) {
  if (!is_float(storage) || is_complex(storage) || bit_width(storage) > 16) return std::nullopt;
  return std::int64_t{1} << bit_width(storage);
}

void register_lookup_ops(ir::Registry& r) {
  r.add(ir::OpDef{
      .name = "graph.lookup",
      .summary = "table[code(x)]: x's storage code (a float format of at most 16 bits) indexes the 1-D table.",
      .operands = {"table", "x"},
      .infer =
          [](std::span<const ir::Type> in, const ir::AttrMap&) {
            const ir::Type& table = in[0];
            const ir::Type& x = in[1];
            const auto count = lookup_code_count(x.dtype());
            if (!count) {
              raise(ErrorCode::DtypeUnsupported, "operand 'x' must have a float storage format of at most 16 bits, got " +
                                                     ir::print_type(x));
            }
            if (table.rank() != 1 || !table.shape[0].is_fixed(*count)) {
              raise(ErrorCode::ShapeMismatch, "operand 'table' must be 1-D with " + std::to_string(*count) +
                                                  " elements (one per " + std::string(name(x.dtype())) +
                                                  " code), got " + ir::print_type(table));
            }
            if (is_complex(table.dtype())) {
              raise(ErrorCode::DtypeUnsupported, "operand 'table' must be real, got " + ir::print_type(table));
            }
            return std::vector<ir::Type>{ir::Type::tensor(x.shape, table.policy)};
          },
      .reference =
          [](const ir::KernelCall& call) {
            const Tensor& table = call.inputs[0];
            const std::vector<std::uint64_t> entries = table.codes();
            std::vector<std::uint64_t> out;
            for (std::uint64_t c : call.inputs[1].codes()) out.push_back(entries.at(c));
            return std::vector<Tensor>{Tensor::from_codes(out, sizes_of(call.result_types[0]), table.policy())};
          },
  });
}

}  // namespace tessera::graph
