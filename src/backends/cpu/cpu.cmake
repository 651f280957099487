# The CPU backend's sources in libtessera, and the host tile header library
# embedded in it: generated kernels include these headers, which the backend
# writes next to the compile cache at run time, so they travel inside the
# library as strings. The numerics headers go along because the tile library
# calls libtessera's converters (one implementation of every format).
set(_tessera_cpu_dir ${CMAKE_CURRENT_SOURCE_DIR}/backends/cpu)
set(_tessera_cpu_headers
  "tessera_cpu/abi.h=${_tessera_cpu_dir}/runtime/abi.h"
  "tessera_cpu/fault.h=${_tessera_cpu_dir}/runtime/fault.h"
  "tessera_cpu/numerics.h=${_tessera_cpu_dir}/runtime/numerics.h"
  "tessera_cpu/memory.h=${_tessera_cpu_dir}/runtime/memory.h"
  "tessera_cpu/tile.h=${_tessera_cpu_dir}/runtime/tile.h"
  "tessera_cpu/tessera_cpu.h=${_tessera_cpu_dir}/runtime/tessera_cpu.h"
  "tessera/numerics/dtype.h=${PROJECT_SOURCE_DIR}/include/tessera/numerics/dtype.h"
  "tessera/numerics/convert.h=${PROJECT_SOURCE_DIR}/include/tessera/numerics/convert.h"
  "tessera/numerics/philox.h=${PROJECT_SOURCE_DIR}/include/tessera/numerics/philox.h"
  "tessera/numerics/elementary.h=${PROJECT_SOURCE_DIR}/include/tessera/numerics/elementary.h"
  "tessera/numerics/narrow_elementary.h=${PROJECT_SOURCE_DIR}/include/tessera/numerics/narrow_elementary.h"
  "tessera/numerics/trigonometric.h=${PROJECT_SOURCE_DIR}/include/tessera/numerics/trigonometric.h"
)
set(TESSERA_CPU_EMBEDDED_HEADERS "")
foreach(entry ${_tessera_cpu_headers})
  string(FIND "${entry}" "=" _eq)
  string(SUBSTRING "${entry}" 0 ${_eq} _name)
  math(EXPR _from "${_eq} + 1")
  string(SUBSTRING "${entry}" ${_from} -1 _path)
  file(READ ${_path} _text)
  # Split long texts: some compilers limit the length of one string literal.
  string(LENGTH "${_text}" _length)
  set(_pieces "")
  set(_at 0)
  while(_at LESS _length)
    string(SUBSTRING "${_text}" ${_at} 16000 _piece)
    string(APPEND _pieces "R\"tsr_cpu_hdr(${_piece})tsr_cpu_hdr\"\n")
    math(EXPR _at "${_at} + 16000")
  endwhile()
  string(APPEND TESSERA_CPU_EMBEDDED_HEADERS "    {\"${_name}\",\n${_pieces}},\n")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_path})
endforeach()
configure_file(${_tessera_cpu_dir}/embedded_headers.cpp.in
               ${PROJECT_BINARY_DIR}/generated/cpu_embedded_headers.cpp @ONLY)

target_sources(tessera PRIVATE
  ${_tessera_cpu_dir}/emitter.cpp
  ${_tessera_cpu_dir}/emit_ops.cpp
  ${_tessera_cpu_dir}/compiler.cpp
  ${_tessera_cpu_dir}/compile_cache.cpp
  ${_tessera_cpu_dir}/thread_pool.cpp
  ${_tessera_cpu_dir}/launcher.cpp
  ${_tessera_cpu_dir}/cpu_backend.cpp
  ${PROJECT_BINARY_DIR}/generated/cpu_embedded_headers.cpp
)
