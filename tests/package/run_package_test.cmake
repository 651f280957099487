# ctest driver: install the build tree to a scratch prefix, then configure,
# build and run tests/package against it with find_package(Tessera).
set(prefix "${BUILD_DIR}/package-test/install")
set(consumer "${BUILD_DIR}/package-test/consumer")
file(REMOVE_RECURSE "${BUILD_DIR}/package-test")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --component dev
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${consumer}" -G Ninja
                        "-DCMAKE_PREFIX_PATH=${prefix}"
                        # A sanitized libtessera needs a sanitized program to load it.
                        "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer project failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${consumer}" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer project failed: ${rc}")
endif()
execute_process(COMMAND "${consumer}/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(rc)
  message(FATAL_ERROR "the consumer program failed: ${rc}")
endif()
if(NOT out MATCHES "fp8_e4m3 @accum\\(fp32\\) \\| TE1002 \\| 1.0000 448.0 0.101562")
  message(FATAL_ERROR "unexpected consumer output: ${out}")
endif()
