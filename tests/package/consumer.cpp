// Uses the installed Tessera the way a C++ user would: the umbrella header,
// a policy, a conversion and an error.
#include <tessera/tessera.h>

#include <cstdio>

int main() {
  const tessera::NumericsPolicy policy = tessera::parse_policy("fp8_e4m3 @accum(fp32)");
  const float values[3] = {1.0f, 448.0f, 0.1f};
  std::uint8_t codes[3];
  tessera::encode(values, 3, policy.storage, codes);
  float back[3];
  tessera::decode(codes, 3, policy.storage, back);
  try {
    tessera::parse_dtype("tf32");
    return 1;
  } catch (const tessera::DtypeError& error) {
    std::printf("%s | %s | %.4f %.1f %.6f | %s\n", tessera::print_policy(policy).c_str(), error.code_string().c_str(),
                back[0], back[1], back[2], tessera::version().c_str());
  }
  return back[0] == 1.0f && back[1] == 448.0f && back[2] == 0.1015625f ? 0 : 1;
}
