// bugs.h — what the hand copies of baseline files that remain in this directory include (each
// <op>.cu here is the old form of the buggy track: a copy with its mistakes inline). The baseline
// files without a copy carry their mistakes as hooks instead (hooks.h); this header goes with the
// last copy.
#pragma once

#include "baseline/kernels.h"  // under GLMASR_BUGGY_BUILD: namespace glmasr::buggy, and hooks.h
