"""What a loaded kernel's source says after the import is the verified bytes, not the disk (issue 36, class B).

Triton compiles a `@triton.jit` kernel from `inspect.getsourcelines` at its first launch, after kernlock hashed and
imported the file: a rewrite in between would run unchecked code. kernlock serves the verified bytes to `linecache`.
"""

from __future__ import annotations

import pytest

from helpers import CPU, FA2, UNIVERSAL
from scripts.harness import python

pytest.importorskip("triton", reason="Triton is not installed (the Makefile installs it)")

REWRITE_AFTER_IMPORT = """
import inspect
import kernlock
kernlock.apply()
from kernels import get_kernel
kernel = get_kernel(%(repo)r, version=4)
path = kernel.__file__
text = open(path).read()
marker = "    # INJECTED after kernlock verified this file\\n"
start = text.index("    def _flash_forward(")
body = text.index("\\n", text.index("):", start)) + 1
with open(path, "w") as file:  # another user of a shared cache rewrites the verified file
    file.write(text[:body] + marker + text[body:])
jitted = kernel._triton_kernel()  # the first launch's @triton.jit (a JITFunction) reads the source through inspect
source = "".join(inspect.getsourcelines(jitted.fn)[0])
tiny.result(jit_source_injected="INJECTED" in "".join(jitted.raw_src), inspect_injected="INJECTED" in source,
            disk_injected="INJECTED" in open(path).read())
"""


@pytest.mark.slow
def test_triton_compiles_the_verified_source_not_a_rewrite_after_the_import(locked_project) -> None:
    project, _ = locked_project([f"{FA2}@v4"], [CPU])
    done = python(REWRITE_AFTER_IMPORT % {"repo": FA2}, project)  # @triton.jit reads the source; no GPU needed
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.result == {"jit_source_injected": False, "inspect_injected": False, "disk_injected": True}


FORM_FEED_SOURCE = (b"def first():\n    return 'first'\n\x0c\n"
                    b"def second():\n    return 'second'\n\x0c# a page break, as pep8 allows\ndef third():\n    return 3\n")
GETSOURCE = """
import inspect
import kernlock
kernlock.apply()
from kernels import get_kernel
kernel = get_kernel(%(repo)r, version=1)
tiny.result(second=inspect.getsource(kernel.second), third=inspect.getsource(kernel.third))
"""


@pytest.mark.slow
def test_a_verified_source_with_a_form_feed_gives_inspect_the_right_function(hub, locked_project) -> None:
    """Issue 44, class 8: `str.splitlines` also splits at a form feed, which Python's own line reading does
    not, so every function after one was served shifted (Triton would compile the wrong lines)."""
    from kernlock.testing.fixtures import push_build

    push_build(hub.repo_path(UNIVERSAL), "v1", {"build/torch-universal/__init__.py": FORM_FEED_SOURCE},
               "a page break in the source")
    project, _ = locked_project([f"{UNIVERSAL}@v1"], [CPU])
    done = python(GETSOURCE % {"repo": UNIVERSAL}, project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.result == {"second": "def second():\n    return 'second'\n", "third": "def third():\n    return 3\n"}
