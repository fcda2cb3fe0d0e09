# CuTileTracks.cmake — the cuTile tracks (docs/tracks.md, "The cuTile tracks"), built like the
# Triton ones (tools/triton/TritonTracks.cmake) when a Python with cuda-tile 1.7.0 and NVIDIA's
# tileiras compiler is found: GLMASR_CUTILE_PYTHON, else .venv-cutile/ (tools/setup.sh --cutile
# makes it), else the Python CMake found. GLMASR_CUTILE_PYTHONPATH adds a folder the package was
# installed into (pip --target), GLMASR_TILEIRAS_DIR a folder holding tileiras (and its ptxas,
# ../lib/libnvvm.so.4, ../nvvm/libdevice) when the Python's own NVIDIA wheels do not provide one.
# tileiras runs with CUDA_HOME unset: pointed at an older CUDA toolkit (13.0), it loads that
# toolkit's libnvvm and fails every compile (exit 5).
set(GLMASR_CUTILE_VERSION 1.7.0)
set(GLMASR_CUTILE_PYTHON "" CACHE FILEPATH "A Python with cuda-tile==${GLMASR_CUTILE_VERSION}")
set(GLMASR_CUTILE_PYTHONPATH "" CACHE PATH "A folder cuda-tile was installed into (pip --target)")
set(GLMASR_TILEIRAS_DIR "" CACHE PATH "A folder holding tileiras, when not in the Python's wheels")
set(GLMASR_CUTILE_ENV ${CMAKE_COMMAND} -E env --unset=CUDA_HOME --unset=CUDA_PATH)
if(GLMASR_CUTILE_PYTHONPATH)
  list(APPEND GLMASR_CUTILE_ENV PYTHONPATH=${GLMASR_CUTILE_PYTHONPATH})
endif()
if(GLMASR_TILEIRAS_DIR)
  list(APPEND GLMASR_CUTILE_ENV "PATH=${GLMASR_TILEIRAS_DIR}:$ENV{PATH}")
endif()
set(GLMASR_CUTILE_PYTHON_FOUND "")
set(GLMASR_CUTILE_WHY
    "no Python with cuda-tile==${GLMASR_CUTILE_VERSION} (tools/setup.sh --cutile)")
set(candidates ${GLMASR_CUTILE_PYTHON} ${PROJECT_SOURCE_DIR}/.venv-cutile/bin/python3
               ${Python3_EXECUTABLE})
foreach(python ${candidates})
  if(EXISTS ${python})
    execute_process(COMMAND ${GLMASR_CUTILE_ENV} ${python} -W ignore -c
                      "import cuda.tile; print(cuda.tile.__version__)"
                    OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE failed ERROR_QUIET)
    if(failed OR NOT version STREQUAL GLMASR_CUTILE_VERSION)
      continue()
    endif()
    # The compiler cuda.tile would run (its wheels' tileiras when their versions agree, else the
    # PATH's): without one the package imports but compiles nothing.
    set(find "from cuda.tile._compile import _find_compiler_bin as f; print(f().path)")
    execute_process(COMMAND ${GLMASR_CUTILE_ENV} ${python} -W ignore -c "${find}"
                    OUTPUT_VARIABLE tileiras OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE failed ERROR_QUIET)
    if(failed)
      set(GLMASR_CUTILE_WHY
          "${python} has cuda-tile ${version} but no tileiras (set GLMASR_TILEIRAS_DIR)")
      continue()
    endif()
    set(GLMASR_CUTILE_PYTHON_FOUND ${python})
    set(GLMASR_CUTILE_WHY "cuda-tile ${version}, ${tileiras}")
    break()
  endif()
endforeach()
if(GLMASR_CUTILE_PYTHON_FOUND AND GLMASR_WITH_CUDA)
  set(GLMASR_WITH_CUTILE ON)
else()
  set(GLMASR_WITH_CUTILE OFF)
endif()
message(STATUS "GLM-ASR: cuTile tracks ${GLMASR_WITH_CUTILE} (${GLMASR_CUTILE_WHY})")

# glmasr_cutile_track(TRACK FOLDER...): tools/cutile/aot.py compiles the folders' kernel files
# (later folders on top) for every CUDA architecture of the build into glmasr_<TRACK>.
function(glmasr_cutile_track track)
  set(archs "")
  foreach(arch ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "[^0-9].*$" "" number ${arch})
    if(number STREQUAL "")
      message(WARNING "The cuTile track ${track} is left out: it compiles for numbered "
                      "architectures, and CMAKE_CUDA_ARCHITECTURES has '${arch}' (give e.g. 80;90)")
      return()
    endif()
    list(APPEND archs --arch ${number})
  endforeach()
  set(kernel_files "")
  foreach(folder ${ARGN})
    file(GLOB files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.py)
    list(APPEND kernel_files ${files})
  endforeach()
  string(MAKE_C_IDENTIFIER ${track} ident)
  set(out ${PROJECT_BINARY_DIR}/cutile/${ident}_track.cpp)
  # What the output depends on besides files: rewritten only when it changes.
  set(settings ${PROJECT_BINARY_DIR}/cutile/${ident}.settings)
  file(CONFIGURE OUTPUT ${settings} CONTENT
       "${GLMASR_CUTILE_PYTHON_FOUND} ${GLMASR_CUTILE_WHY} ${GLMASR_CUTILE_ENV} ${archs} ${ARGN}\n")
  set(header ${PROJECT_SOURCE_DIR}/driver/cuda/include/glmasr/fp32_kernels.h)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/cutile
    COMMAND ${GLMASR_CUTILE_ENV} ${GLMASR_CUTILE_PYTHON_FOUND} -W ignore
            ${PROJECT_SOURCE_DIR}/tools/cutile/aot.py
            --track ${track} --folders ${ARGN} ${archs} --kernels-header ${header} --out ${out}
    DEPENDS ${kernel_files} ${header} ${settings} ${PROJECT_SOURCE_DIR}/tools/cutile/aot.py
            ${PROJECT_SOURCE_DIR}/tools/cutile/glmasr_cutile.py
            ${PROJECT_SOURCE_DIR}/tools/aot/trackgen.py
            ${PROJECT_SOURCE_DIR}/tools/aot/launch_language.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "Compiling the cuTile track ${track} ahead of time (${ARGN})" VERBATIM)
  add_library(glmasr_${track} STATIC ${out})
  target_link_libraries(glmasr_${track} PUBLIC glmasr_cuda)
endfunction()

if(GLMASR_WITH_CUTILE)
  glmasr_cutile_track(cutile student/cutile)
  if(EXISTS ${PROJECT_SOURCE_DIR}/reference/cutile)  # not in a student's handout
    glmasr_cutile_track(cutile-solution student/cutile reference/cutile)
  endif()
endif()

# Without a GPU: both tracks compile ahead of time for sm_80 and sm_90 (a kernel that does not
# compile or whose entry disagrees with its LAUNCH fails here). cuTile has no CPU interpreter, so
# the kernels' arithmetic is first checked on a GPU (the kernel suites).
if(GLMASR_CUTILE_PYTHON_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/reference/cutile)
  foreach(pair "cutile:student/cutile" "cutile-solution:student/cutile,reference/cutile")
    string(REPLACE ":" ";" parts ${pair})
    list(GET parts 0 track)
    list(GET parts 1 folders)
    string(REPLACE "," ";" folders ${folders})
    add_test(NAME cutile.aot.${track}
      COMMAND ${GLMASR_CUTILE_ENV} ${GLMASR_CUTILE_PYTHON_FOUND} -W ignore tools/cutile/aot.py
              --track ${track} --folders ${folders} --arch 80 --arch 90
              --kernels-header driver/cuda/include/glmasr/fp32_kernels.h
              --out ${PROJECT_BINARY_DIR}/cutile/aot-check-${track}.cpp
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(cutile.aot.${track} PROPERTIES LABELS "cutile")
  endforeach()
endif()

# The AOT tool's cuTile rules (Array strides, what a kernel file may import, stubs launching
# like their solutions): no cuTile needed.
add_test(NAME cutile.aot_rules COMMAND ${Python3_EXECUTABLE} tools/cutile/test_aot.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cutile.aot_rules PROPERTIES LABELS "cutile")
