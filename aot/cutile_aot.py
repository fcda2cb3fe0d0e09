#!/usr/bin/env python3
"""aot.py — compile a cuTile track ahead of time into C++ the driver links.

    aot.py --track cutile --folders student/cutile [reference/cutile ...] --arch 80 --arch 90
           --kernels-header driver/cuda/include/glmasr/fp32_kernels.h --out cutile_track.cpp

The cuTile twin of aot/triton_aot.py, with the same command line: one kernel file per
primitive (`<op>.py`, later folders on top), every kernel its LAUNCH names
(aot/glmasr_cutile.py) compiled with cuda.tile.compilation.export_kernel and NVIDIA's
tileiras for each architecture (no GPU needed), and one C++ file written by aot/trackgen.py.

The kernel ABI (cuTile's calling convention cutile_python_v1, read from the compiled Tile IR):
an array parameter of n dimensions is 1 + 2n entry parameters — its base pointer, its n extents,
its n strides in elements, 32-bit with index_dtype int32 — and a scalar is itself. tileiras drops
nothing, so the launcher passes exactly that; after compiling, the entry's parameter table in
the cubin (its .nv.info: each parameter's offset and size, and the total) is checked against it,
and the block size is read from the entry's required thread count.
"""

import io
import struct
import sys

import trackgen
from glmasr_cutile import Array, launches_of
from trackgen import AotError

ALLOWED_MODULES = ("cuda", "glmasr_cutile", "math")
SCALAR_C = {"i32": "int32_t", "i64": "int64_t", "fp32": "float"}
C_SCALAR = {"int": "i32", "long long": "i64", "float": "fp32"}
POINTEE = {"float*": "float32", "const float*": "float32", "int*": "int32", "const int*": "int32"}
C_SIZE = {"int32_t": 4, "int": 4, "float": 4, "int64_t": 8, "long long": 8}  # pointers: 8


def check_source(path):
    """A cuTile kernel file may import only cuda.tile, math and glmasr_cutile."""
    trackgen.check_source(path, ALLOWED_MODULES, "cuTile")
    import ast

    with open(path, encoding="utf-8") as f:
        for node in ast.walk(ast.parse(f.read())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                if name.split(".")[0] == "cuda" and not name.startswith("cuda.tile"):
                    raise AotError(
                        f"{path}:{node.lineno}: imports {name}; a cuTile kernel "
                        "file may import only cuda.tile, math, glmasr_cutile"
                    )


class CuTileBackend(trackgen.Backend):
    language = "cuTile"
    tool = "aot/cutile_aot.py"
    allowed_modules = ALLOWED_MODULES

    def launches_of(self, module):
        return launches_of(module)

    def prepare(self, launch, params, where):
        """(cuTile's parameter constraints, the launcher's arguments) of one Launch."""
        import cuda.tile as ct
        from cuda.tile.compilation import ArrayConstraint, ScalarConstraint

        names = list(launch.kernel._annotated_function.pysig.parameters)
        unknown = set(launch.constants) - set(names)
        if unknown:
            raise AotError(f"{where}: constants {sorted(unknown)} are not parameters of the kernel")
        runtime = [n for n in names if n not in launch.constants]
        if len(launch.args) != len(runtime):
            raise AotError(
                f"{where}: args has {len(launch.args)} entries for the kernel's "
                f"{len(runtime)} non-constant parameters ({', '.join(runtime)})"
            )
        by_name = {name: c_type for c_type, name in params}
        args = dict(zip(runtime, launch.args))
        constraints, declarations = [], []
        for name in names:
            if name in launch.constants:
                constraints.append(launch.constants[name])
                continue
            arg = args[name]
            if isinstance(arg, Array):
                c_type = by_name.get(arg.pointer)
                if c_type not in POINTEE:
                    raise AotError(
                        f"{where}: Array({arg.pointer!r}) for {name} must name a "
                        f"pointer parameter of the launcher ({', '.join(by_name)})"
                    )
                constraints.append(
                    ArrayConstraint(
                        getattr(ct, POINTEE[c_type]),
                        len(arg.shape),
                        index_dtype=ct.int32,
                        stride_lower_bound_incl=0,
                        alias_groups=(),
                        may_alias_internally=False,
                        stride_constant=(None,) * (len(arg.shape) - 1) + (1,),
                    )
                )
                declarations.append((c_type, arg.pointer))
                declarations += [("int32_t", e) for e in arg.shape + arg.strides()]
                continue
            if isinstance(arg, tuple):
                kind, expression = arg
                c_type = SCALAR_C[kind]
            elif by_name.get(arg) in C_SCALAR:
                c_type, expression = by_name[arg], arg
                kind = C_SCALAR[c_type]
            else:
                raise AotError(
                    f"{where}: argument '{arg}' for {name} is not a scalar parameter "
                    f"of the launcher; pass a pointer as Array(...), give other "
                    f'expressions a type: ("i32", "{arg}")'
                )
            constraints.append(
                ScalarConstraint({"i32": ct.int32, "i64": ct.int64, "fp32": ct.float32}[kind])
            )
            declarations.append((c_type, expression))
        return constraints, declarations

    def compile(self, launch, constraints, declarations, arch, where):
        from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

        symbol = launch.name
        signature = KernelSignature(constraints, CallingConvention.cutile_python_v1(), symbol)
        buffer = io.BytesIO()
        export_kernel(
            launch.kernel, [signature], buffer, gpu_code=f"sm_{arch}", output_format="cubin"
        )
        cubin = buffer.getvalue()
        entry = entry_info(cubin, symbol)
        # The launcher's arguments, laid out like a C struct of them: the entry must agree.
        expected, offset = [], 0
        for c_type, _ in declarations:
            size = C_SIZE.get(c_type, 8)
            offset = (offset + size - 1) // size * size
            expected.append((offset, size))
            offset += size
        listed = entry["params"]  # tileiras lists a parameter only up to the last one it reads
        if entry["param_bytes"] != offset or any(
            ordinal >= len(expected) or expected[ordinal] != (off, size)
            for ordinal, off, size in listed
        ):
            raise AotError(
                f"{where} (sm_{arch}): the compiled entry takes parameters "
                f"{sorted(listed)} in {entry['param_bytes']} bytes; the launcher would "
                f"pass (offset, size) {expected} in {offset}"
            )
        threads = entry["threads"]
        if threads[1:] != (1, 1):
            raise AotError(
                f"{where} (sm_{arch}): a block of {threads} threads; the launcher "
                "starts one-dimensional blocks"
            )
        # cuTile's own launcher gives a kernel the device's dynamic shared memory: all that the
        # device lets a block opt into, less the kernel's static part (triton_kernel.cpp).
        return symbol, cubin, "cuda::kAllSharedMemory", threads[0]


def elf_sections(data):
    """{name: bytes} of an ELF64 image."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sections = {}
    for name, _, _, _, offset, size, *_ in headers:
        end = data.index(b"\0", names_at + name)
        sections[data[names_at + name : end].decode()] = data[offset : offset + size]
    return sections


EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE, EIATTR_REQNTID = 0x17, 0x19, 0x10


def entry_info(cubin, symbol):
    """The entry's parameters [(ordinal, offset, size)], their total bytes and its required
    block size, from the cubin's .nv.info.<symbol> records (format byte, attribute byte, then a
    16-bit value or a 16-bit length and that many bytes)."""
    blob = elf_sections(cubin).get(".nv.info." + symbol)
    if blob is None:
        raise AotError(f"the cubin has no kernel {symbol}")
    info = {"params": [], "param_bytes": 0, "threads": None}
    i = 0
    while i < len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == 4:
            (n,) = struct.unpack_from("<H", blob, i + 2)
            value, i = blob[i + 4 : i + 4 + n], i + 4 + n
        else:
            value, i = blob[i + 2 : i + 4], i + 4
        if attr == EIATTR_KPARAM_INFO:
            _, ordinal, offset, flags = struct.unpack("<IHHI", value)
            info["params"].append((ordinal, offset, (flags >> 18) & 0x3FFF))
        elif attr == EIATTR_CBANK_PARAM_SIZE:
            (info["param_bytes"],) = struct.unpack("<H", value)
        elif attr == EIATTR_REQNTID:
            info["threads"] = struct.unpack("<III", value)
    if info["threads"] is None:
        raise AotError(f"{symbol}: the cubin gives no required block size")
    return info


def generate(track, folders, archs, ops):
    return trackgen.generate(CuTileBackend(), track, folders, archs, ops)


def main():
    return trackgen.main(CuTileBackend(), __file__, __doc__.split("\n\n")[0], "CUDA_TILE_TEMP_DIR")


if __name__ == "__main__":
    sys.exit(main())
