# Thin shim: Beam's --setup_file (Dataflow workers) calls `python setup.py sdist`.
# Everything else lives in pyproject.toml, except the one build option below.
#
# NOTARIUS_COMPILE=1 builds the domain's hot modules as extension modules with
# Cython: the same Python code and semantics (annotations stay annotations, not
# C types), about 15% less CPU per candidate (docs/running.md, "The compiled
# domain"). The build then needs Cython (fetched into pip's isolated build
# environment) and a C compiler. Without it, the package is pure Python.
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The modules every candidate runs through. The thin family modules (a model and a
# FamilySpec each), assets and the batch and report code are not worth compiling.
COMPILED_MODULES = (
    "domain/evidence.py",
    "domain/source.py",
    "domain/issues.py",
    "domain/revision.py",
    "domain/evaluate.py",
    "domain/reprocess.py",
    "domain/families/base.py",
    "domain/families/common.py",
    "domain/families/response_structs.py",
    "domain/families/occurrence_family.py",
    "domain/families/registry_family.py",
    "domain/families/reconciliation.py",
    "domain/families/spells.py",
    "domain/families/combat_turns.py",
    "domain/families/enemy_events.py",
    "domain/families/scene_descriptions.py",
)
# Python semantics kept: annotations are not read as C types, functions stay introspectable
# and replaceable (binding), and no bounds or wraparound shortcuts.
CYTHON_DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True}


def compiling() -> bool:
    return os.environ.get("NOTARIUS_COMPILE", "") == "1"


class CythonizingBuildExt(build_ext):
    """Turns the listed ``.py`` modules into C at build time, so Cython is imported only
    when it is there (pip installs it first, from ``setup_requires``)."""

    def finalize_options(self):
        from Cython.Build import cythonize

        self.distribution.ext_modules = cythonize(
            self.distribution.ext_modules, compiler_directives=CYTHON_DIRECTIVES, quiet=True,
            build_dir=os.path.join("build", "cython"), nthreads=os.cpu_count() or 1)
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # the C compiler, one module per core
        super().finalize_options()


if compiling():
    setup(
        # No debug information: a smaller wheel and a shorter build; the code is the same.
        ext_modules=[Extension(path[:-3].replace("/", "."), [path], extra_compile_args=["-g0"])
                     for path in COMPILED_MODULES],
        cmdclass={"build_ext": CythonizingBuildExt},
        setup_requires=["Cython>=3.1,<4"],
    )
else:
    setup()
