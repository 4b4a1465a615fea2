"""LEIR ``Program`` -> TVMScript (one ``@T.prim_func(s_tir=True) def main``) -> TVM PrimFunc.

The TVMScript is generated from the analysed program (``program.info``), deterministically, as
data (``script``: statements by depth, expressions as small trees); it is rendered to text only
when asked (``Lowered.text``), and ``lower_prim_func`` / ``prim_func`` build the PrimFunc from it
through TVM's IR builder (``builder``), structurally equal to parsing the text and many times
faster. What it says:

* parameters are the program's inputs then outputs, in declared order, then the *scratch*
  buffers (``Lowered.scratch``): every global intermediate with its inferred shape, in
  first-use order, and the float32 accumulator of a half-precision output; the runner
  allocates them zero-filled, so no TVM pass merges or re-points a tensor that crosses
  kernels (``lowering.run``);
* types follow ``lowering.types``, and half precision ``lowering.narrow``: each equation
  computes in float32 and rounds once on store; half tensors that an equation reads while
  writing them are float32 accumulators, rounded when other equations read them and
  rounded into an output after the last statement;
* every equation becomes one ``T.sblock`` (named after its output, ``_1``, ``_2`` for
  repeats) that remaps *all* enclosing loop variables, outermost first, with ``R`` for the
  equation's reduction axes and ``S`` otherwise; index expressions are written inline on
  the block variables; reads and writes are inferred by TVM;
* an equation with an implied initialisation gets ``with T.init():``; TVM runs it when
  all reduction variables are 0, which is the first update of each element under LEIR's
  sequential order;
* a reduction whose LHS index is composite (``D_{f*4+tx}`` after a split) keeps ``T.init``
  when the spatial-variables -> element map is injective (``lowering.injective``), with
  each composite entry bound to a ``T.axis.spatial(extent, f * 4 + tx)`` block variable;
  when several spatial iterations share an element (``X_{a//2}``) a separate nest over
  the spatial loops stores the identity first (``X_init``), which is exact when nothing
  else in the statement writes the tensor; other cases are a ``LoweringError``;
* nested sub-nests become nested loops under the shared outer loops;
* every conversion is an explicit ``T.Cast``; an initial value is one constant
  (``T.float16("-inf")``), never an expression TVM could hoist out of a kernel.

The stages, one module each: ``names`` (identifiers, dtypes), ``access`` (which elements the
equations under a loop touch), ``placement`` (where shared/local buffers are allocated),
``expressions`` (typed expressions), ``statements`` (loops, blocks, stores), ``script`` (the
TVMScript as data, and its text), ``builder`` (its PrimFunc without the text), ``api`` (text,
PrimFunc, build options), ``cuda`` (CUDA module, source, PTX); ``python -m lowering.tir`` is
``__main__``. The CUDA lowering first plans kernels with ``lowering.cuda_plan``.
"""
from __future__ import annotations

from .api import (first_line, from_tvmscript, lower, lower_module, lower_prim_func, lower_to_tvmscript, pass_config,
                  prim_func)
from .cuda import cuda_ptx, cuda_source
from .names import TARGETS
from .statements import Lowered

__all__ = ["TARGETS", "Lowered", "cuda_ptx", "cuda_source", "first_line", "from_tvmscript", "lower",
           "lower_module", "lower_prim_func", "lower_to_tvmscript", "pass_config", "prim_func"]
