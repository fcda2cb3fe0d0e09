# AotTracks.cmake — the Triton and cuTile tracks (docs/tracks.md), compiled ahead of time into the
# same kernel contract as the CUDA tracks. One language each:
#   triton  Triton 3.6.0: aot/triton_aot.py, the kernels' helper aot/glmasr_triton.py
#   cutile  cuda-tile 1.7.0 with NVIDIA's tileiras: aot/cutile_aot.py, aot/glmasr_cutile.py
# A language's tracks are built when a Python with its package is found — GLMASR_<LANG>_PYTHON,
# else .venv-<lang>/ (tools/setup.sh --triton / --cutile makes it), else the Python CMake found —
# and the CUDA runtime is there. Without it they are left out, and asking for one says how to get
# them. The kernels compile without a GPU, so the compile checks below run wherever the Python is.
#
# cuTile only: GLMASR_CUTILE_PYTHONPATH adds a folder the package was installed into (pip
# --target), GLMASR_TILEIRAS_DIR a folder holding tileiras (and its ptxas, ../lib/libnvvm.so.4,
# ../nvvm/libdevice) when the Python's own NVIDIA wheels do not provide one. tileiras runs with
# CUDA_HOME unset: pointed at an older CUDA toolkit (13.0), it loads that toolkit's libnvvm and
# fails every compile (exit 5).
set(GLMASR_TRITON_VERSION 3.6.0)
set(GLMASR_CUTILE_VERSION 1.7.0)
set(GLMASR_TRITON_PYTHON "" CACHE FILEPATH "A Python with triton==${GLMASR_TRITON_VERSION}")
set(GLMASR_CUTILE_PYTHON "" CACHE FILEPATH "A Python with cuda-tile==${GLMASR_CUTILE_VERSION}")
set(GLMASR_CUTILE_PYTHONPATH "" CACHE PATH "A folder cuda-tile was installed into (pip --target)")
set(GLMASR_TILEIRAS_DIR "" CACHE PATH "A folder holding tileiras, when not in the Python's wheels")

# How each language's compiler runs: its environment and the Python flags.
set(GLMASR_TRITON_ENV ${CMAKE_COMMAND} -E env TRITON_CACHE_DIR=${PROJECT_BINARY_DIR}/triton/cache)
set(GLMASR_CUTILE_ENV ${CMAKE_COMMAND} -E env --unset=CUDA_HOME --unset=CUDA_PATH)
if(GLMASR_CUTILE_PYTHONPATH)
  list(APPEND GLMASR_CUTILE_ENV PYTHONPATH=${GLMASR_CUTILE_PYTHONPATH})
endif()
if(GLMASR_TILEIRAS_DIR)
  list(APPEND GLMASR_CUTILE_ENV "PATH=${GLMASR_TILEIRAS_DIR}:$ENV{PATH}")
endif()

# glmasr_find_aot_python(LANG): sets GLMASR_<LANG>_PYTHON_FOUND (empty if none) and
# GLMASR_<LANG>_WHY (what was found, or why nothing was).
function(glmasr_find_aot_python lang)
  string(TOUPPER ${lang} LANG)
  set(found "")
  if(lang STREQUAL "triton")
    set(why "no Python with triton==${GLMASR_TRITON_VERSION} (tools/setup.sh --triton)")
    set(version_check "import triton; print(triton.__version__)")
  else()
    set(why "no Python with cuda-tile==${GLMASR_CUTILE_VERSION} (tools/setup.sh --cutile)")
    set(version_check "import cuda.tile; print(cuda.tile.__version__)")
  endif()
  foreach(python ${GLMASR_${LANG}_PYTHON} ${PROJECT_SOURCE_DIR}/.venv-${lang}/bin/python3
                 ${Python3_EXECUTABLE})
    if(NOT EXISTS ${python})
      continue()
    endif()
    execute_process(COMMAND ${GLMASR_${LANG}_ENV} ${python} -W ignore -c "${version_check}"
                    OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE failed ERROR_QUIET)
    if(failed OR NOT version STREQUAL GLMASR_${LANG}_VERSION)
      continue()
    endif()
    if(lang STREQUAL "cutile")
      # The compiler cuda.tile would run (its wheels' tileiras when their versions agree, else
      # the PATH's): without one the package imports but compiles nothing.
      set(find "from cuda.tile._compile import _find_compiler_bin as f; print(f().path)")
      execute_process(COMMAND ${GLMASR_CUTILE_ENV} ${python} -W ignore -c "${find}"
                      OUTPUT_VARIABLE tileiras OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE failed ERROR_QUIET)
      if(failed)
        set(why "${python} has cuda-tile ${version} but no tileiras (set GLMASR_TILEIRAS_DIR)")
        continue()
      endif()
      set(why "cuda-tile ${version}, ${tileiras}")
    else()
      set(why "Triton ${version}: ${python}")
    endif()
    set(found ${python})
    break()
  endforeach()
  set(GLMASR_${LANG}_PYTHON_FOUND "${found}" PARENT_SCOPE)
  set(GLMASR_${LANG}_WHY "${why}" PARENT_SCOPE)
endfunction()

# glmasr_aot_track(LANG TRACK FOLDER...): aot/<lang>_aot.py compiles the folders' kernel files
# (later folders on top) for every CUDA architecture of the build into glmasr_<TRACK>.
function(glmasr_aot_track lang track)
  string(TOUPPER ${lang} LANG)
  set(archs "")
  foreach(arch ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "[^0-9].*$" "" number ${arch})
    if(number STREQUAL "")
      message(WARNING "The ${lang} track ${track} is left out: it compiles for numbered "
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
  set(out ${PROJECT_BINARY_DIR}/${lang}/${ident}_track.cpp)
  # What the output depends on besides files: rewritten only when it changes, so a new compiler
  # or new architectures recompile the track under every generator.
  set(settings ${PROJECT_BINARY_DIR}/${lang}/${ident}.settings)
  file(CONFIGURE OUTPUT ${settings} CONTENT
       "${GLMASR_${LANG}_PYTHON_FOUND} ${GLMASR_${LANG}_WHY} ${GLMASR_${LANG}_ENV} ${archs} ${ARGN}\n")
  set(header ${PROJECT_SOURCE_DIR}/driver/cuda/include/glmasr/fp32_kernels.h)
  set(aot ${PROJECT_SOURCE_DIR}/aot)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/${lang}
    COMMAND ${GLMASR_${LANG}_ENV} ${GLMASR_${LANG}_PYTHON_FOUND} -W ignore ${aot}/${lang}_aot.py
            --track ${track} --folders ${ARGN} ${archs} --kernels-header ${header} --out ${out}
    DEPENDS ${kernel_files} ${header} ${settings} ${aot}/${lang}_aot.py ${aot}/glmasr_${lang}.py
            ${aot}/trackgen.py ${aot}/launch_language.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "Compiling the ${lang} track ${track} ahead of time (${ARGN})" VERBATIM)
  add_library(glmasr_${track} STATIC ${out})
  target_link_libraries(glmasr_${track} PUBLIC glmasr_cuda)
endfunction()

foreach(lang triton cutile)
  string(TOUPPER ${lang} LANG)
  glmasr_find_aot_python(${lang})
  if(GLMASR_${LANG}_PYTHON_FOUND AND GLMASR_WITH_CUDA)
    set(GLMASR_WITH_${LANG} ON)
  else()
    set(GLMASR_WITH_${LANG} OFF)
  endif()
  message(STATUS "GLM-ASR: ${lang} tracks ${GLMASR_WITH_${LANG}} (${GLMASR_${LANG}_WHY})")

  # The student's track (student/<lang>/) and the solution (reference/<lang>/ on top of it; not
  # in a student's handout).
  set(pairs "${lang}:student/${lang}")
  if(EXISTS ${PROJECT_SOURCE_DIR}/reference/${lang})
    list(APPEND pairs "${lang}-solution:student/${lang},reference/${lang}")
  endif()
  foreach(pair ${pairs})
    string(REPLACE ":" ";" parts ${pair})
    list(GET parts 0 track)
    list(GET parts 1 folders)
    string(REPLACE "," ";" folders ${folders})
    if(GLMASR_WITH_${LANG})
      glmasr_aot_track(${lang} ${track} ${folders})
    endif()
    # Without a GPU: both tracks compile ahead of time for sm_80 and sm_90 (a kernel that does
    # not compile, needs scratch memory or mismatches its LAUNCH fails here). Instructor tree only.
    if(GLMASR_${LANG}_PYTHON_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/reference/${lang})
      add_test(NAME ${lang}.aot.${track}
        COMMAND ${GLMASR_${LANG}_ENV} ${GLMASR_${LANG}_PYTHON_FOUND} -W ignore aot/${lang}_aot.py
                --track ${track} --folders ${folders} --arch 80 --arch 90
                --kernels-header driver/cuda/include/glmasr/fp32_kernels.h
                --out ${PROJECT_BINARY_DIR}/${lang}/aot-check-${track}.cpp
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(${lang}.aot.${track} PROPERTIES LABELS "${lang}")
    endif()
  endforeach()

  # The AOT tool's own rules for the language (launch language, missing ops, what a kernel file
  # may import, stubs launching like their solutions): no Triton or cuTile needed.
  add_test(NAME ${lang}.aot_rules COMMAND ${Python3_EXECUTABLE} aot/test_${lang}_aot.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${lang}.aot_rules PROPERTIES LABELS "${lang}")
endforeach()

# Every Triton kernel of the solution and the given ones computes its formula under Triton's CPU
# interpreter (cuTile has none: its kernels' arithmetic is first checked on a GPU, by the suites).
if(GLMASR_TRITON_PYTHON_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/reference/triton)
  add_test(NAME triton.interpret
    COMMAND ${CMAKE_COMMAND} -E env TRITON_INTERPRET=1
            ${GLMASR_TRITON_PYTHON_FOUND} aot/triton_interpret_check.py student/triton reference/triton
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(triton.interpret PROPERTIES LABELS "triton" SKIP_RETURN_CODE 77)
endif()
