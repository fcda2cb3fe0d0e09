// absent.cpp — `glmasr serve` in a program built without the server: the grader's glmasr-*
// programs (they never serve), and glmasr itself when CMake found no cpp-httplib
// (tools/setup.sh installs libcpp-httplib-dev). It says so instead of doing something else.
#include "commands.h"
#include "glmasr/error.h"

namespace glmasr::cli {

int run_serve(const ServeArgs&) {
    throw InputError(
        GLMASR_HAVE_HTTPLIB
            ? "serve: not part of this program (one of the grader's); build/glmasr serves"
            : "serve: this build found no cpp-httplib: install libcpp-httplib-dev "
              "(tools/setup.sh) and rebuild");
}

}  // namespace glmasr::cli
