// Graph IR graph.cast: converts a tensor to another numerics policy.
//
// The result has the operand's shape and exactly the policy given in the
// `policy` attribute. Each element is decoded exactly and encoded once with
// the target's rounding and overflow: a cast is a single rounding, with no
// intermediate rounding to an accumulation type (that would round twice).
// The conversion is the one tessera.tensor(values, dtype) applies, so its
// rules are the numerics guide's: floats overflow to inf/NaN or saturate as
// the target policy says, integers round to nearest even and saturate, NaN
// becomes 0 in an integer and true in bool. When the target rounds
// stochastically, element i draws its bits from Philox(seed, i), so the same
// seed gives the same result. A cast to complex64/complex128 rounds each
// part to nearest even (imaginary part 0 from a real operand); a cast from
// complex to a real policy keeps the real part, as numpy's astype does.
#include "graph/kernel_support.h"
#include "graph/op_families.h"
#include "tessera/support/error.h"

namespace tessera::graph {

void register_cast_ops(ir::Registry& r) {
  r.add(ir::OpDef{
      .name = "graph.cast",
      .summary = "Converts to the policy `policy` with one rounding; `seed` keys stochastic rounding.",
      .operands = {"x"},
      .attrs = {policy_attr("policy"), int_attr("seed", 0)},
      .infer =
          [](std::span<const ir::Type> in, const ir::AttrMap& attrs) {
            return std::vector<ir::Type>{ir::Type::tensor(in[0].shape, attrs.get_policy("policy"))};
          },
      .reference =
          [](const ir::KernelCall& call) {
            const ir::Type& out = call.result_types[0];
            auto seed = static_cast<std::uint64_t>(call.attrs.get_int("seed"));
            if (is_complex(out.dtype())) {
              return std::vector<Tensor>{
                  Tensor::from_complex_values(call.inputs[0].to_complex_values(), sizes_of(out), out.policy)};
            }
            if (is_complex(call.inputs[0].dtype())) {
              // complex -> real keeps the real part (numpy's astype; the transpose of real -> complex in autodiff).
              std::vector<double> re;
              for (const auto& z : call.inputs[0].to_complex_values()) re.push_back(z.real());
              return std::vector<Tensor>{Tensor::from_values(re, sizes_of(out), out.policy, seed)};
            }
            // Straight from the decoded values to storage: make_result would round
            // to the accumulation type first.
            return std::vector<Tensor>{
                Tensor::from_values(call.inputs[0].to_values(), sizes_of(out), out.policy, seed)};
          },
  });
}

}  // namespace tessera::graph
