# TritonTracks.cmake — the Triton tracks (docs/tracks.md, "The Triton tracks"), built when a
# Python with Triton 3.6.0 is found: GLMASR_TRITON_PYTHON, else .venv-triton/ (tools/setup.sh
# --triton makes it), else the Python CMake found. Without it the tracks are left out, and asking
# for one says how to get them.
set(GLMASR_TRITON_VERSION 3.6.0)
set(GLMASR_TRITON_PYTHON "" CACHE FILEPATH "A Python with triton==${GLMASR_TRITON_VERSION}")
set(GLMASR_TRITON_PYTHON_FOUND "")
set(candidates ${GLMASR_TRITON_PYTHON} ${PROJECT_SOURCE_DIR}/.venv-triton/bin/python3
               ${Python3_EXECUTABLE})
foreach(python ${candidates})
  if(EXISTS ${python})
    execute_process(COMMAND ${python} -c "import triton; print(triton.__version__)"
                    OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE failed ERROR_QUIET)
    if(NOT failed AND version STREQUAL GLMASR_TRITON_VERSION)
      set(GLMASR_TRITON_PYTHON_FOUND ${python})
      break()
    endif()
  endif()
endforeach()
# The tracks need the CUDA runtime too; the kernels compile ahead of time without either a GPU
# or nvcc, so the CPU checks below run wherever the Python is found.
if(GLMASR_TRITON_PYTHON_FOUND AND GLMASR_WITH_CUDA)
  set(GLMASR_WITH_TRITON ON)
else()
  set(GLMASR_WITH_TRITON OFF)
endif()
message(STATUS "GLM-ASR: Triton tracks ${GLMASR_WITH_TRITON} (Triton ${GLMASR_TRITON_VERSION}: "
               "${GLMASR_TRITON_PYTHON_FOUND})")

# glmasr_triton_track(TRACK FOLDER...): tools/triton/aot.py compiles the folders' kernel files
# (later folders on top) for every CUDA architecture of the build into glmasr_<TRACK>.
function(glmasr_triton_track track)
  set(archs "")
  foreach(arch ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "[^0-9].*$" "" number ${arch})
    if(number STREQUAL "")
      message(WARNING "The Triton track ${track} is left out: it compiles for numbered "
                      "architectures, and CMAKE_CUDA_ARCHITECTURES has '${arch}' (give e.g. 80;90)")
      return()
    endif()
    list(APPEND archs --arch ${number})
  endforeach()
  set(folders "")
  set(kernel_files "")
  foreach(folder ${ARGN})
    list(APPEND folders ${folder})
    file(GLOB files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.py)
    list(APPEND kernel_files ${files})
  endforeach()
  string(MAKE_C_IDENTIFIER ${track} ident)
  set(out ${PROJECT_BINARY_DIR}/triton/${ident}_track.cpp)
  # What the output depends on besides files: rewritten only when it changes, so a new Triton or
  # new architectures recompile the track under every generator.
  set(settings ${PROJECT_BINARY_DIR}/triton/${ident}.settings)
  file(CONFIGURE OUTPUT ${settings}
       CONTENT "${GLMASR_TRITON_PYTHON_FOUND} triton ${GLMASR_TRITON_VERSION} ${archs} ${ARGN}\n")
  set(header ${PROJECT_SOURCE_DIR}/driver/cuda/include/glmasr/fp32_kernels.h)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/triton
    COMMAND ${CMAKE_COMMAND} -E env TRITON_CACHE_DIR=${PROJECT_BINARY_DIR}/triton/cache
            ${GLMASR_TRITON_PYTHON_FOUND} ${PROJECT_SOURCE_DIR}/tools/triton/aot.py
            --track ${track} --folders ${folders} ${archs} --kernels-header ${header} --out ${out}
    DEPENDS ${kernel_files} ${header} ${settings} ${PROJECT_SOURCE_DIR}/tools/triton/aot.py
            ${PROJECT_SOURCE_DIR}/tools/triton/glmasr_triton.py
            ${PROJECT_SOURCE_DIR}/tools/aot/trackgen.py
            ${PROJECT_SOURCE_DIR}/tools/aot/launch_language.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "Compiling the Triton track ${track} ahead of time (${ARGN})" VERBATIM)
  add_library(glmasr_${track} STATIC ${out})
  target_link_libraries(glmasr_${track} PUBLIC glmasr_cuda)
endfunction()

if(GLMASR_WITH_TRITON)
  glmasr_triton_track(triton student/triton)
  if(EXISTS ${PROJECT_SOURCE_DIR}/reference/triton)  # not in a student's handout
    glmasr_triton_track(triton-solution student/triton reference/triton)
  endif()
endif()

# Without a GPU: both tracks compile ahead of time for sm_80 and sm_90 (a kernel that does not
# compile, needs scratch memory or mismatches its LAUNCH fails here), and every kernel of the
# solution and the given ones computes its formula under Triton's CPU interpreter.
if(GLMASR_TRITON_PYTHON_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/reference/triton)
  foreach(pair "triton:student/triton" "triton-solution:student/triton,reference/triton")
    string(REPLACE ":" ";" parts ${pair})
    list(GET parts 0 track)
    list(GET parts 1 folders)
    string(REPLACE "," ";" folders ${folders})
    add_test(NAME triton.aot.${track}
      COMMAND ${CMAKE_COMMAND} -E env TRITON_CACHE_DIR=${PROJECT_BINARY_DIR}/triton/cache
              ${GLMASR_TRITON_PYTHON_FOUND} tools/triton/aot.py --track ${track}
              --folders ${folders} --arch 80 --arch 90
              --kernels-header driver/cuda/include/glmasr/fp32_kernels.h
              --out ${PROJECT_BINARY_DIR}/triton/aot-check-${track}.cpp
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(triton.aot.${track} PROPERTIES LABELS "triton")
  endforeach()
  add_test(NAME triton.interpret
    COMMAND ${CMAKE_COMMAND} -E env TRITON_INTERPRET=1
            ${GLMASR_TRITON_PYTHON_FOUND} tools/triton/interpret_check.py student/triton reference/triton
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(triton.interpret PROPERTIES LABELS "triton" SKIP_RETURN_CODE 77)
endif()

# The AOT tool's own rules (launch language, missing ops, what a kernel file may import): no
# Triton needed.
add_test(NAME triton.aot_rules COMMAND ${Python3_EXECUTABLE} tools/triton/test_aot.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(triton.aot_rules PROPERTIES LABELS "triton")
