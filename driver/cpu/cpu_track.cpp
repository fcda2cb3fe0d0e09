// cpu_track.cpp — the cpu track's table (being written: every entry is still empty, so building
// an OpTable from it fails with "track 'cpu' has no linear op").
#include "glmasr/track.h"

namespace glmasr {

const Track& cpu_track() {
    static const Track track{"cpu", "plain C++ loops (OpenMP): the oracle", Device::Host, DType::F32, Ops{}};
    return track;
}

}  // namespace glmasr
