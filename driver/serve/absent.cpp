// absent.cpp — `glmasr serve` in a program built without the server: the grader's glmasr-*
// programs (they never serve), and glmasr itself when CMake found no cpp-httplib
// (tools/setup.sh installs libcpp-httplib-dev). It says so instead of doing something else.
#include "commands.h"
#include "glmasr/error.h"

namespace glmasr::cli {

int run_serve(const ServeArgs&) { throw InputError("serve: " GLMASR_SERVE_ABSENT); }

}  // namespace glmasr::cli
