# GLM-ASR Kernel Lab — porcelain over CMake. Everything builds into $(BUILD).
#
#   make demo                      set up, build, transcribe the shipped clip (GPU if present)
#   make test                      set up, build, run the project's tests (ctest)
#   make test_rmsnorm [TRACK=...]  one kernel's tests on one track (default: student)
#   make grade [TRACK=student]     the autograder: kernel tests, accuracy, speed, report
#                                  (TRACK=triton grades the Triton track, student/triton/)
#   make submission [TRACK=...]    submission.tar.gz: the student-owned files, to hand in
#   make handout [OUT=dir]         the student distribution, without the solution (instructor)
#   make handout-check [OUT=dir]   make the handout, build it from its tarball, check it
#   make shared-build              the instructor tree built once for every grade of a hand-in
#   make cheats [CHEAT_FLAGS=--gpu] grade the cheat suite: every cheat must be caught
#   make gradescope                the Gradescope autograder zip, in grade-out/ (instructor)
#   make ncu KERNEL=<op> [TRACK=student]  Nsight Compute on one op's kernels (docs/profiling.md)
#   make nsys [TRACK=student]      Nsight Systems timeline of one transcription, in grade-out/
#   make kernel-bench [TRACKS=baseline,student,reference]  every op timed per track, plotted
#   make roofline [TRACK=baseline,reference]  the GPU's measured roofline with every op on it
#   make arch-check                the CUDA tracks compiled for every GPU a class may have
#   make asan                      ASan+UBSan build of the host code and cpu track, its tests
#   make fuzz [FUZZ_SECONDS=60]    libFuzzer on the parsers of untrusted input (docs/testing.md)
#   make setup                     install missing Debian build dependencies
#   make container                 the lab's container image (podman, else buildah, else docker)
#   make clean
BUILD ?= build
TRACK ?= student
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR := $(if $(shell command -v ninja),-G Ninja,)
DEMO_MODEL ?= assets/models/glm-asr-tiny
DEMO_CLIP ?= assets/audio/concord.wav

.PHONY: all build setup demo test grade submission clean
all: build

setup:
	@tools/setup.sh

$(BUILD)/CMakeCache.txt:
	@tools/setup.sh
	cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/glmasr transcribe $(DEMO_CLIP) --model $(DEMO_MODEL) --verbose

# The project's own tests: driver, cpu oracle, parity, and the baseline/reference kernel tests
# (skipped without a GPU). The student track's kernel tests are left out: they fail until the
# TODOs are written — run them with `make test_<kernel>`.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE '^student$$'

# Compile only: baseline, reference and student for every GPU in GLMASR_CLASS_CUDA_ARCHITECTURES
# (CMakeLists.txt) that the build does not already target. Needs nvcc.
.PHONY: arch-check
arch-check: $(BUILD)/CMakeCache.txt
	@command -v nvcc >/dev/null || { echo "arch-check: needs nvcc (the CUDA toolkit) on the PATH"; exit 2; }
	cmake --build $(BUILD) -j $(JOBS) --target cuda_arch_check

# The same tests built with AddressSanitizer and UndefinedBehaviorSanitizer, in $(ASAN_BUILD): the
# host code and the cpu track (no CUDA; GPU tests skip). Any report fails its test (docs/testing.md):
# abort_on_error makes a report end the program with SIGABRT, never with an exit code (1) that a
# test of the CLI's own exit codes could take for an expected one.
# test_remote_track is left out: its chaos runner misbehaves on purpose (writes past a tensor,
# dies of SIGSEGV) to test how the checker reports it, and ASan stops those misdeeds with its own
# report (SIGABRT) first; `make test` runs it. test_shipped_model is left out too: it transcribes
# 24 clips with the shipped checkpoint, ~10x slower instrumented (about 17 minutes on two cores)
# through the same code paths that test_parity, test_cli and grader.e2e drive under ASan on the
# small fixtures; `make test` runs it.
ASAN_BUILD ?= build-asan
# -O1 with line tables (-g1): the reports keep file:line, and the build takes half the time of -O2 -g.
ASAN_OPT = -O1 -g1 -DNDEBUG
UBSAN_OPTS = print_stacktrace=1:abort_on_error=1
ASAN_OPTS = detect_leaks=1:abort_on_error=1
.PHONY: asan
asan:
	@tools/setup.sh
	cmake -S . -B $(ASAN_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLMASR_SANITIZE=address,undefined \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='$(ASAN_OPT)' -DCMAKE_C_FLAGS_RELWITHDEBINFO='$(ASAN_OPT)'
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	UBSAN_OPTIONS=$(UBSAN_OPTS) ASAN_OPTIONS=$(ASAN_OPTS) \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE '^student$$' -E '^(test_remote_track|test_shipped_model)$$'

# libFuzzer harnesses (fuzz/) for the audio reader, the safetensors header, config.json,
# tokenizer.json and the BPE encoder, built with clang, ASan and UBSan in $(FUZZ_BUILD), each run
# for FUZZ_SECONDS from seeds made of the shipped files; a finding fails with its input's path.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
.PHONY: fuzz
fuzz:
	@tools/setup.sh
	@command -v clang++ >/dev/null || { echo "make fuzz: needs clang and libclang-rt-dev (tools/setup.sh --instructor)" >&2; exit 2; }
	cmake -S . -B $(FUZZ_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGLMASR_FUZZ=ON -DGLMASR_SANITIZE=address,undefined
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# make test_rmsnorm TRACK=student|baseline|reference  (the student's kernels run in their own
# process, build/graded/kernel-runner-student, which the test drives: grader/isolation/runner/)
# A run in which every case was skipped (no GPU) exits 0 in GoogleTest; the last line turns it
# into one plain sentence and a failure (grader/checks/nothing_ran.py: exit 77, "skipped").
test_%: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target test_$* $(if $(filter student triton triton-solution cutile cutile-solution,$(TRACK)),kernel-runner-$(TRACK))
	@rm -f $(BUILD)/tests/test_$*.json
	GLMASR_TRACK=$(TRACK) $(BUILD)/tests/test_$* --gtest_output=json:$(BUILD)/tests/test_$*.json
	@python3 -m grader.checks.nothing_ran test_$* $(BUILD)/tests/test_$*.json

# The autograder (grader/pipeline/grade.py): writes grade-out/report.md and grade-out/results.json.
grade: $(BUILD)/CMakeCache.txt
	python3 -m grader --track $(TRACK) --build $(BUILD) $(GRADE_FLAGS)

# A whole class (instructors): every entry of SUBMISSIONS graded with grade.py --submission,
# then class-out/class.csv and class-out/leaderboard.html (grader/class_scale/batch.py; docs/grading.md).
.PHONY: grade-all
grade-all:
	python3 -m grader.class_scale.batch $(SUBMISSIONS) $(BATCH_FLAGS)

# The shared instructor build (docs/grading.md, "The build"): the pristine instructor tree built
# once into build-shared/ through ccache. A grade of a hand-in (grade.py --submission) configures
# its fresh work tree alike and takes every object that does not depend on the submission from
# that cache, read-only, and compiles the student's files itself: a build costs about what those
# cost, not a whole tree's. Make it again after changing the tree: a grade refuses a stale one
# (exit 2) rather than use it. Incremental: a second run rebuilds what changed.
.PHONY: shared-build
shared-build:
	@command -v ccache >/dev/null || { echo "make shared-build: needs ccache (tools/setup.sh --instructor)" >&2; exit 2; }
	python3 -m grader --make-shared-build

# The hand-in: the files [submission.owned] in grader/rubric.toml gives TRACK, nothing else.
submission:
	python3 -m grader.make_submission --out submission.tar.gz --track $(TRACK)

# Every cheat of grader/selftests/cheats/ graded with grade.py --submission must be caught (instructor
# tree only), each build on the shared instructor build. CHEAT_FLAGS: --gpu on a GPU machine,
# --only NAME.
ifneq ($(wildcard grader/selftests/cheats/check_cheats.py),)
.PHONY: cheats
cheats: shared-build
	python3 -m grader.selftests.cheats.check_cheats $(CHEAT_FLAGS)
	python3 -m grader.selftests.python.test_shared_build --require-shared-build
endif

# The Gradescope autograder (instructors): grade-out/gradescope-autograder.zip, set up by
# grader/class_scale/gradescope/config.toml (docs/instructors.md). GRADESCOPE_FLAGS:
# --config FILE, --ssh-key FILE, --known-hosts FILE, --out ZIP. Instructor tree only.
ifneq ($(wildcard grader/class_scale/gradescope/make_autograder.py),)
.PHONY: gradescope
gradescope:
	python3 -m grader.class_scale.gradescope.make_autograder $(GRADESCOPE_FLAGS)
endif

# Instructor tree only: grader/handout/ is not part of the handout (docs/grading.md,
# "Instructor workflow"). HANDOUT_FLAGS: e.g. --cuda-archs "90-real"; CHECK_FLAGS: --quick.
ifneq ($(wildcard grader/handout/make_handout.py),)
OUT ?= handout-out
.PHONY: handout handout-check
handout:
	python3 -m grader.handout.make_handout --out $(OUT) --jobs $(JOBS) $(HANDOUT_FLAGS)

handout-check: handout
	python3 -m grader.handout.check_handout $(OUT)/glmasr-lab-handout.tar.gz --jobs $(JOBS) $(CHECK_FLAGS)
endif

# Nsight Compute on the kernels of one op (an NVTX range of `glmasr profile`, Nano shapes) and
# Nsight Systems on one transcription of the shipped clip: reports, text and CSV in grade-out/
# (tools/perf/nsight.sh; docs/profiling.md). Exit 2 with one line when the tool is missing or
# KERNEL is not an op name. NCU=/path/ncu, NSYS=/path/nsys where they are not on PATH.
.PHONY: ncu nsys
ncu:
	@BUILD=$(BUILD) tools/perf/nsight.sh ncu "$(KERNEL)" "$(TRACK)"

nsys:
	@BUILD=$(BUILD) tools/perf/nsight.sh nsys "$(TRACK)"

# Pictures (docs/profiling.md, "Pictures: the roofline and the kernel bench"), on a GPU machine.
# kernel-bench: `glmasr kernel-bench` times every op call of the workload on each of TRACKS, into
# grade-out/kernel-bench.json and .csv; tools/perf/plot_kernel_bench.py draws them as
# grade-out/kernel-bench.png and .svg, with the table behind the bars in kernel-bench-summary.csv
# (KERNEL_BENCH_FLAGS: more options of kernel-bench). roofline: tools/perf/roofline.py runs
# `glmasr peaks` and `glmasr profile` per track and draws grade-out/roofline.png and .svg; TRACK
# may be a comma list, and given no TRACK it draws baseline,reference (not the student default
# above). Without a GPU glmasr refuses with one line.
TRACKS ?= baseline,student,reference
KERNEL_BENCH_FLAGS ?=
comma := ,
ROOFLINE_TRACKS = $(if $(filter file,$(origin TRACK)),baseline$(comma)reference,$(TRACK))
.PHONY: kernel-bench roofline
kernel-bench: build
	@mkdir -p grade-out
	$(BUILD)/glmasr kernel-bench --tracks $(TRACKS) --json --csv grade-out/kernel-bench.csv \
	  $(KERNEL_BENCH_FLAGS) >grade-out/kernel-bench.json \
	  || { status=$$?; rm -f grade-out/kernel-bench.json grade-out/kernel-bench.csv; exit $$status; }
	python3 tools/perf/plot_kernel_bench.py grade-out/kernel-bench.json --out grade-out/kernel-bench

roofline: build
	@mkdir -p grade-out
	python3 tools/perf/roofline.py --tracks $(ROOFLINE_TRACKS) --glmasr $(BUILD)/glmasr --out grade-out/roofline

# The lab's container image from tools/container/Containerfile (tools/container/README.md), with
# the first of podman, buildah and docker found (CONTAINER_ENGINE=... to choose), tagged
# CONTAINER_IMAGE; CONTAINER_FLAGS: e.g. --build-arg CUDA_ARCHS=90.
CONTAINER_ENGINE ?= $(firstword $(foreach e,podman buildah docker,$(if $(shell command -v $(e)),$(e))))
CONTAINER_IMAGE ?= glmasr-lab
CONTAINER_FLAGS ?=
.PHONY: container
container:
	@test -n "$(CONTAINER_ENGINE)" || { echo "make container: needs podman, buildah or docker (tools/container/README.md)" >&2; exit 2; }
	$(CONTAINER_ENGINE) $(if $(filter buildah,$(CONTAINER_ENGINE)),bud,build) -f tools/container/Containerfile \
	  $(if $(filter docker,$(CONTAINER_ENGINE)),,--ignorefile tools/container/Containerfile.dockerignore) \
	  -t $(CONTAINER_IMAGE) $(CONTAINER_FLAGS) .

clean:
	rm -rf $(BUILD)
