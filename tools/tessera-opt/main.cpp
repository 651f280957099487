// The `tessera-opt` executable; the work is in tessera::run_opt.
#include <iostream>
#include <string>
#include <vector>

#include "tessera/tools/opt.h"

int main(int argc, char** argv) {
  return tessera::run_opt(std::vector<std::string>(argv + 1, argv + argc), std::cin, std::cout, std::cerr);
}
