"""Silence deprecation noise from inside torch, onnxscript and onnx_ir that a user cannot act on.

``quiet_library_warnings()`` hides ``FutureWarning`` and ``DeprecationWarning`` whose *source
module* (the module the warning is attributed to) is one of those libraries, or the standard
library plumbing their code passes through: torch's own ``isinstance(treespec, LeafSpec) is
deprecated`` warning, for one, is raised while ``copy.deepcopy`` rebuilds a pytree spec inside
``run_decompositions`` and is attributed to ``copyreg``. A warning attributed to the user's
code (their model's ``forward``, their script) is not touched, nor is any other category.

Caveat: like :func:`warnings.catch_warnings`, on which it is built, this changes the
*process-global* warning filters while the block runs and restores them on exit. Another
thread warning at the same time sees the same filters (so it can lose a torch deprecation
warning too, never one about its own code), and a block that itself changes the filters
loses those changes on exit.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

__all__ = ["LIBRARY_MODULES", "PLUMBING_MODULES", "quiet_library_warnings"]

#: Packages whose own deprecation warnings are hidden (the package and its submodules).
LIBRARY_MODULES = ("torch", "onnxscript", "onnx_ir", "onnx")
#: Standard-library modules a library's warning can be attributed to when its ``stacklevel``
#: lands outside the library (``copy.deepcopy`` → ``copyreg.__newobj__`` → ``LeafSpec.__new__``).
#: No user code lives there, so a warning attributed to them is never about the user's code.
PLUMBING_MODULES = ("copy", "copyreg", "typing_extensions", "functools", "contextlib", "abc")

_LIBRARY_PATTERN = r"(" + "|".join(LIBRARY_MODULES) + r")(\..*)?$"
_PLUMBING_PATTERN = r"(" + "|".join(PLUMBING_MODULES) + r")$"
_CATEGORIES = (FutureWarning, DeprecationWarning)


@contextlib.contextmanager
def quiet_library_warnings(enabled: bool = True) -> Iterator[None]:
    """Within the block, ignore ``FutureWarning`` / ``DeprecationWarning`` attributed to
    torch, onnxscript, onnx, onnx_ir or the stdlib modules in :data:`PLUMBING_MODULES`.
    ``enabled=False`` changes nothing (``onnx-workbench -v``). The filters are restored on exit."""
    if not enabled:
        yield
        return
    with warnings.catch_warnings():
        for category in _CATEGORIES:
            warnings.filterwarnings("ignore", category=category, module=_LIBRARY_PATTERN)
            warnings.filterwarnings("ignore", category=category, module=_PLUMBING_PATTERN)
        yield
