# The CUDA Tile IR target: Tile IR -> CUDA Tile IR bytecode (written here) ->
# tileiras (found at run time; not needed to build) -> cubin.
target_sources(tessera PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/bytecode.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/toolchain.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/cubin_resources.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/lower.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/lower_lanes.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/lower_math.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/lower_staged.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/lower_tile_math.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda_tile/runtime.cpp
)
