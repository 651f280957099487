// The `tessera` executable for C++ installs; the work is in tessera::run_cli.
#include <iostream>
#include <string>
#include <vector>

#include "tessera/tools/cli.h"

int main(int argc, char** argv) {
  return tessera::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
