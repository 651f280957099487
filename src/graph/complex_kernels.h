// Reference-kernel helpers for complex tensors (docs/design/0016-complex-and-fft.md).
//
// Complex values are computed in std::complex<double> and each part is
// rounded once to the accumulation type (fp32 for complex64, fp64 for
// complex128), then stored: the discipline of kernel_support.h, part by part.
#pragma once

#include <complex>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/ir/dialect.h"
#include "tessera/ir/type.h"
#include "tessera/runtime/tensor.h"

namespace tessera::graph {

using Complex = std::complex<double>;

// The complex product, quotient, magnitude and exponential of the reference kernels, in double
// (complex_ops.cpp gives the formulas; compiled kernels use the same).
Complex complex_mul(Complex a, Complex b);
Complex complex_div(Complex a, Complex b);
double complex_abs(Complex a);
Complex complex_exp(Complex a);

// Values in row-major order -> a complex tensor of `type`, each part rounded
// to the accumulation type and then to the part storage.
Tensor make_complex_result(std::span<const Complex> values, const ir::Type& type);

// The elementwise ops that take complex operands (add, sub, mul, div, neg,
// exp, abs); others raise DtypeError naming the op.
bool takes_complex(std::string_view op);
void reject_complex(const ir::Type& t, std::string_view op);
// Their reference kernels on complex operands (any operand complex); abs
// returns the real magnitude at the part dtype.
std::vector<Tensor> run_complex_elementwise(std::string_view op, const ir::KernelCall& call);

}  // namespace tessera::graph
