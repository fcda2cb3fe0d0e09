#!/usr/bin/env python3
"""aot.py — compile a Triton track ahead of time into C++ the driver links.

    aot.py --track triton --folders student/triton [reference/triton ...] --arch 80 --arch 90
           --kernels-header driver/cuda/include/glmasr/fp32_kernels.h --out triton_track.cpp

Reads one kernel file per primitive of the op list (`<op>.py`; a later folder's file replaces an
earlier one's), compiles every kernel its LAUNCH names (aot/glmasr_triton.py) with
Triton's compiler for each architecture — no GPU is needed — and writes one C++ file: the cubins,
each op's launcher with the signature fp32_kernels.h gives it, the launcher table, and the
track's constructor `const Track& <track>_track()`. A kernel that does not compile stops the
build with Triton's message, like a CUDA compile error; a LAUNCH with `todo` still compiles its
kernel, and its launcher throws NotImplemented instead of starting it.

This file is the Triton half: how a LAUNCH maps onto the kernel's signature and how one kernel is
compiled and checked; the C++ generation and the command line are aot/trackgen.py's,
shared with the cuTile tracks.
"""

import re
import sys

import trackgen
from glmasr_triton import launches_of
from trackgen import AotError, kernel_files, launcher_signatures  # noqa: F401  (tests)

# C parameter types of fp32_kernels.h → Triton's signature types.
C_TO_TRITON = {
    "float*": "*fp32",
    "const float*": "*fp32",
    "int*": "*i32",
    "const int*": "*i32",
    "int": "i32",
    "long long": "i64",
    "float": "fp32",
}
TRITON_TO_C = {"i32": "int32_t", "i64": "int64_t", "fp32": "float"}
PTX_TYPE = {"*": "u64", "i64": "u64", "i32": "u32", "fp32": "f32"}  # how a kernel entry takes each

ALLOWED_MODULES = ("triton", "glmasr_triton", "math")


def check_source(path):
    """A Triton kernel file may import only Triton, math and glmasr_triton (trackgen.check_source)."""
    trackgen.check_source(path, ALLOWED_MODULES, "Triton")


def kernel_signature(launch, params, where):
    """(signature, runtime argument C declarations) of one Launch: Triton's {name: type} and,
    per runtime parameter, (c_type, expression)."""
    kernel = launch.kernel
    names = list(kernel.arg_names)
    constexpr = {p.name for p in kernel.params if p.is_constexpr}
    runtime = [n for n in names if n not in constexpr]
    if set(launch.constexprs) != constexpr:
        raise AotError(
            f"{where}: constexprs {sorted(launch.constexprs)} must give exactly the "
            f"kernel's tl.constexpr parameters {sorted(constexpr)}"
        )
    if len(launch.args) != len(runtime):
        raise AotError(
            f"{where}: args has {len(launch.args)} entries for the kernel's "
            f"{len(runtime)} runtime parameters ({', '.join(runtime)})"
        )
    by_name = {name: c_type for c_type, name in params}
    signature, declarations = {}, []
    for name, arg in zip(runtime, launch.args):
        if isinstance(arg, tuple):
            triton_type, expression = arg
            c_type = TRITON_TO_C[triton_type]
        elif arg in by_name:
            c_type, expression = by_name[arg], arg
            triton_type = C_TO_TRITON[c_type]
        else:
            raise AotError(
                f"{where}: argument '{arg}' for {name} is not a parameter of the "
                f"launcher ({', '.join(by_name)}); give other expressions a type: "
                f'("i32", "{arg}")'
            )
        signature[name] = triton_type
        declarations.append((c_type, expression))
    for name in constexpr:
        signature[name] = "constexpr"
    return signature, declarations


class TritonBackend(trackgen.Backend):
    language = "Triton"
    tool = "aot/triton_aot.py"
    allowed_modules = ALLOWED_MODULES
    # Triton's kernels take two scratch pointers after their arguments; compile() refuses
    # kernels that need scratch memory, so both are null.
    trailing_params = (
        ("unsigned long long scratch = 0;  // Triton's scratch pointers: none", "scratch"),
        ("", "scratch"),
    )

    def launches_of(self, module):
        return launches_of(module)

    def prepare(self, launch, params, where):
        return kernel_signature(launch, params, where)

    def compile(self, launch, signature, declarations, arch, where):
        import triton
        from triton.backends.compiler import GPUTarget

        target = GPUTarget("cuda", arch, 32)
        backend = triton.compiler.make_backend(target)
        options = backend.parse_options(
            {"num_warps": launch.num_warps, "num_stages": launch.num_stages}
        )
        source = triton.compiler.ASTSource(
            fn=launch.kernel, signature=signature, constexprs=dict(launch.constexprs)
        )
        compiled = triton.compile(source, target=target, options=options.__dict__)
        meta = compiled.metadata
        if getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0):
            raise AotError(
                f"{launch.name}: needs Triton scratch memory (sm_{arch}), which an "
                "ahead-of-time kernel cannot have; simplify the kernel"
            )
        # The C++ launcher passes every runtime argument and Triton's two scratch pointers; the
        # kernel's entry must take exactly those, or the launch would read its arguments wrong.
        entry = re.search(
            r"\.entry\s+" + re.escape(meta.name) + r"\s*\((.*?)\)", compiled.asm["ptx"], re.S
        )
        taken = re.findall(r"\.param\s+\.(\w+)", entry.group(1)) if entry else []
        passed = [
            PTX_TYPE[kind[0] if kind.startswith("*") else kind]
            for kind in signature.values()
            if kind != "constexpr"
        ] + ["u64", "u64"]
        if taken != passed:
            raise AotError(
                f"{launch.name} (sm_{arch}): the compiled kernel takes "
                f"({', '.join(taken)}), the launcher would pass ({', '.join(passed)}): "
                "its arguments and Triton's two scratch pointers"
            )
        if meta.num_warps != launch.num_warps:
            raise AotError(
                f"{launch.name} (sm_{arch}): compiled for {meta.num_warps} warps, "
                f"LAUNCH says {launch.num_warps}"
            )
        return meta.name, compiled.asm["cubin"], meta.shared, launch.num_warps * 32


def generate(track, folders, archs, ops):
    return trackgen.generate(TritonBackend(), track, folders, archs, ops)


def main():
    return trackgen.main(TritonBackend(), __file__, __doc__.split("\n\n")[0], "TRITON_CACHE_DIR")


if __name__ == "__main__":
    sys.exit(main())
