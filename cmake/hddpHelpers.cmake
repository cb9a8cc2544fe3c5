# Project-wide helpers: warnings, sanitizers, library targets and test registration.

# -DHDDP_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer on every target of the
# project (libraries, drivers, tests, benchmarks), compile and link, whether or not it calls
# hddp_warnings. scripts/test.sh builds this into build-asan and runs the tests with
# tests/sanitizers/lsan.supp (known Open MPI leaks) and halt_on_error.
if(HDDP_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Warnings for every hddp target; errors under -DHDDP_WERROR=ON (CI).
function(hddp_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(HDDP_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# The project includes its own headers exactly as users of the installed package do:
# #include <hddp/core/model.h>. In the build tree <hddp/...> resolves through
# build/include/hddp, a link to the source root; installed headers are in include/hddp/.
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/include)
file(CREATE_LINK ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/include/hddp SYMBOLIC)

# hddp_library(<folder> SOURCES ... HEADERS ...): target hddp_<folder>, alias hddp::<folder>,
# exported as hddp::<folder>. HEADERS are the public ones, installed to include/hddp/<folder>/;
# the folder's other headers are internal (not installed, never included by a public one).
# C++20 reaches every consumer.
function(hddp_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;HEADERS" ${ARGN})
  add_library(hddp_${name} ${ARG_SOURCES})
  add_library(hddp::${name} ALIAS hddp_${name})
  set_target_properties(hddp_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME hddp_${name})
  target_compile_features(hddp_${name} PUBLIC cxx_std_20)  # consumers compile as C++20 too
  target_include_directories(hddp_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  hddp_warnings(hddp_${name})
  install(TARGETS hddp_${name} EXPORT hddpTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${ARG_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hddp/${name})
endfunction()

# hddp_test_program(<target>...): a program some test runs. The sanitizer pass builds the
# target test_programs (every such program) instead of the whole tree.
function(hddp_test_program)
  set_property(GLOBAL APPEND PROPERTY HDDP_TEST_PROGRAMS ${ARGN})
endfunction()

# hddp_test(<name> LABELS ... SOURCES ... LIBS ... [TIMEOUT s] [SLOW]): one GoogleTest
# executable, registered as one ctest entry (the gtest binary runs all its cases; failures name
# them). Label quick too (HDDP_TEST_TIER=quick scripts/test.sh runs only those) unless SLOW.
function(hddp_test name)
  cmake_parse_arguments(ARG "SLOW" "TIMEOUT" "LABELS;SOURCES;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  hddp_warnings(${name})
  hddp_test_program(${name})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_SLOW)
    list(APPEND ARG_LABELS quick)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# hddp_mpi_test(<name> RANKS n... COMMAND exe args... [LABELS ...] [TIMEOUT s]): registers
# `mpiexec -n N --oversubscribe <exe> <args>` for each N as <name>.np<N>, label mpi (and quick
# for 2 ranks). PROCESSORS N: ctest -j counts its ranks.
# The ctest TIMEOUT kills a hang; mpiexec's own --timeout kills its ranks a bit earlier.
function(hddp_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "RANKS;COMMAND;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  math(EXPR _mpi_timeout "${ARG_TIMEOUT} - 10")
  list(POP_FRONT ARG_COMMAND _exe)
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}.np${np}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
              --timeout ${_mpi_timeout} --bind-to none $<TARGET_FILE:${_exe}> ${ARG_COMMAND})
    set(labels "mpi;${ARG_LABELS}")
    if(np EQUAL 2)
      list(APPEND labels quick)
    endif()
    set_tests_properties(${name}.np${np} PROPERTIES
      LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${np}
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_btl_vader_single_copy_mechanism=none")
  endforeach()
endfunction()
