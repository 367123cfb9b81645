# pdserve_library(NAME DEPS... [EXCLUDE file.cc...]): one static library per folder of
# docs/architecture.md ("Folders"), made of every .cc file in that folder but those excluded
# (built into a smaller library of their own). A folder's CMakeLists.txt names only what its
# row of that table allows; scripts/check-layering checks both.
function(pdserve_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXCLUDE" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  foreach(excluded ${ARG_EXCLUDE})
    list(REMOVE_ITEM sources ${CMAKE_CURRENT_SOURCE_DIR}/${excluded})
  endforeach()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()
