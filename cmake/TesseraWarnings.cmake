# Warning and sanitizer flags shared by every Tessera target.
add_library(tessera_flags INTERFACE)
target_compile_options(tessera_flags INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       -Wnon-virtual-dtor -Wimplicit-fallthrough
                       # Op definitions are designated initializers that name
                       # only the fields they set; the rest keep their defaults.
                       -Wno-missing-field-initializers)
# GCC 12 reports false -Wrestrict overlaps inside std::string concatenation at
# -O2 and above (GCC bug 105329); the warning finds nothing real in this code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(tessera_flags INTERFACE -Wno-restrict)
endif()
if(TESSERA_WERROR)
  target_compile_options(tessera_flags INTERFACE -Werror)
endif()
if(TESSERA_SANITIZE)
  target_compile_options(tessera_flags INTERFACE -fsanitize=address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  # The sanitizers' instrumentation makes GCC report std::variant storage as
  # maybe-uninitialized (false positives inside libstdc++'s headers, first seen
  # with the Tile IR's variant attributes); the sanitizers check this at run time.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(tessera_flags INTERFACE -Wno-maybe-uninitialized)
  endif()
  target_link_options(tessera_flags INTERFACE -fsanitize=address,undefined)
endif()
if(TESSERA_BUILD_FUZZERS)
  # Coverage for libFuzzer and the sanitizers in the whole library, which
  # fuzz/ir_parser_fuzz links (the fuzzer's main comes from its own link flags).
  target_compile_options(tessera_flags INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(tessera_flags INTERFACE -fsanitize=address,undefined)
endif()
