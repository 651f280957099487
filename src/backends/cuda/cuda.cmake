# The CUDA runtime sources of libtessera and the device headers embedded in
# it (NVRTC compiles them at run time, so they travel inside the library as
# strings; no CUDA toolkit is needed to build).
set(TESSERA_CUDA_DEVICE_HEADERS
  numerics.cuh
  tile.cuh
  tile_mma.cuh
  tile_tma.cuh
  strided_view.cuh
)
set(_tessera_cuda_dir ${CMAKE_CURRENT_SOURCE_DIR}/backends/cuda)
# Headers shared with the host (one implementation of each math function),
# embedded under their include paths.
set(TESSERA_CUDA_SHARED_HEADERS
  numerics/elementary.h
  numerics/narrow_elementary.h
  numerics/trigonometric.h
)
set(TESSERA_EMBEDDED_HEADERS "")
foreach(header ${TESSERA_CUDA_DEVICE_HEADERS} ${TESSERA_CUDA_SHARED_HEADERS})
  if(header IN_LIST TESSERA_CUDA_SHARED_HEADERS)
    set(_header_path ${PROJECT_SOURCE_DIR}/include/tessera/${header})
  else()
    set(_header_path ${_tessera_cuda_dir}/device/${header})
  endif()
  file(READ ${_header_path} _text)
  # Raw string literals have a length limit on some compilers: split every
  # 16000 characters and let the compiler join the pieces.
  string(LENGTH "${_text}" _length)
  set(_pieces "")
  set(_at 0)
  while(_at LESS _length)
    string(SUBSTRING "${_text}" ${_at} 16000 _piece)
    string(APPEND _pieces "R\"tessera_embed(${_piece})tessera_embed\"\n")
    math(EXPR _at "${_at} + 16000")
  endwhile()
  string(APPEND TESSERA_EMBEDDED_HEADERS "    {\"tessera/${header}\",\n${_pieces}},\n")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_header_path})
endforeach()
configure_file(${_tessera_cuda_dir}/embedded_headers.cpp.in
               ${PROJECT_BINARY_DIR}/generated/cuda_embedded_headers.cpp @ONLY)

target_sources(tessera PRIVATE
  ${_tessera_cuda_dir}/driver.cpp
  ${_tessera_cuda_dir}/nvrtc.cpp
  ${_tessera_cuda_dir}/device_memory.cpp
  ${_tessera_cuda_dir}/stream.cpp
  ${_tessera_cuda_dir}/deferred_checks.cpp
  ${_tessera_cuda_dir}/watched_work.cpp
  ${_tessera_cuda_dir}/module.cpp
  ${_tessera_cuda_dir}/graph_capture.cpp
  ${_tessera_cuda_dir}/kernel_graph.cpp
  ${_tessera_cuda_dir}/strided_copy.cpp
  ${_tessera_cuda_dir}/cublas.cpp
  ${_tessera_cuda_dir}/cublaslt.cpp
  ${_tessera_cuda_dir}/nccl.cpp
  ${_tessera_cuda_dir}/codegen/emit_lane.cpp
  ${_tessera_cuda_dir}/codegen/emitter.cpp
  ${_tessera_cuda_dir}/codegen/tma_plan.cpp
  ${_tessera_cuda_dir}/codegen/cuda_backend.cpp
  ${PROJECT_BINARY_DIR}/generated/cuda_embedded_headers.cpp
)
