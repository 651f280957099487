# Install rules: headers, the shared library and a CMake package config so that
# C++ users can write find_package(Tessera) and link Tessera::tessera.
include(CMakePackageConfigHelpers)

install(TARGETS tessera tessera_flags EXPORT TesseraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev)
install(TARGETS tessera_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev)
install(DIRECTORY include/tessera DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT TesseraTargets NAMESPACE Tessera::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera COMPONENT dev)
configure_package_config_file(cmake/TesseraConfig.cmake.in
        ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfig.cmake
        INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/TesseraConfigVersion.cmake
        COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera COMPONENT dev)
