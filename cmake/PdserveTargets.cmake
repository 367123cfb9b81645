# pdserve_library(NAME DIR DEPS...): one static library per folder of ARCHITECTURE.md, made of
# every .cc file in that folder. A folder's CMakeLists.txt names only what it may depend on.
function(pdserve_library name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()
