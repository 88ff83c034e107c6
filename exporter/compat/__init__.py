"""Every use of a private torch / onnxscript API, in one place, and nothing of the project.

Each function here is covered by ``tests/exporter/test_torch_compat.py`` (and its siblings)
so that a torch upgrade that moves or changes one of them fails loudly in one obvious test.
The package imports nothing from the rest of the exporter; its modules, by topic:

- :mod:`~exporter.compat.pytree`: torch's pytrees, key paths as text.
- :mod:`~exporter.compat.kv_cache`: transformers' ``DynamicCache`` as a pytree, by layer.
- :mod:`~exporter.compat.dims`: ``Dim`` kinds, symbolic sizes and ranges, size-oblivious capture.
- :mod:`~exporter.compat.patches`: the patches torch.onnx.export captures under (RNN loops).
- :mod:`~exporter.compat.guards`: shape guards recorded with their sources and user frames.
- :mod:`~exporter.compat.frames`: which source files are the user's.
- :mod:`~exporter.compat.flags`: torch's exporting/compiling flags, set around an eager run.
- :mod:`~exporter.compat.registry`: torchlib's translation registry and opsets.
- :mod:`~exporter.compat.decompositions`: the pieces of torch.onnx's decomposition step.
- :mod:`~exporter.compat.translation`: translation to ONNX IR, onnxscript's optimizer.
- :mod:`~exporter.compat.program`: what an ExportedProgram keeps in private fields.
- :mod:`~exporter.compat.modules`: what a module's state is made of (modes, tensor versions).
- :mod:`~exporter.compat.exceptions`: the exception types torch raises.
- :mod:`~exporter.compat.formats`: the undocumented *text* formats the exporter reads.

Every public name of the topic modules (but formats') is also a name of this package:
``compat.record_shape_guards`` and ``from exporter.compat import record_shape_guards`` both work.
"""

from __future__ import annotations

from .decompositions import (
    copy_program,
    drop_leftover_unbacked_symbols,
    insert_type_promotion_nodes,
    name_outputs_after_their_nodes,
    onnx_decomposition_table,
    onnx_decomposition_tables,
    program_shape_env,
    remove_assertion_nodes,
    replace_graph_module,
    retrace_changes_graph,
    run_decompositions,
    type_promotion_needed,
    unbacked_symbols_discarded,
)
from .dims import (
    additional_inputs_examples,
    clear_dim_marks,
    condition_holds_on,
    derived_dim_parts,
    dim_hint_policy,
    program_ranges,
    size_expression,
    size_oblivious_available,
    size_oblivious_capture,
    tolerant_constraint_solver,
    torch_dim_kind,
)
from .exceptions import is_constraint_violation_error, is_data_dependent_error
from .flags import as_if_exporting
from .frames import LIBRARY_PACKAGES, is_user_file
from .guards import ShapeGuardEvent, record_shape_guards
from .kv_cache import (
    UnsupportedCacheLayer,
    holds_kv_cache,
    is_kv_cache_type,
    kv_cache_leaf_names,
    prepare_kv_cache_pytree,
    register_kv_cache_pytree,
)
from .modules import module_state, tensors_state, trace_tensor_kind, train_mode_dependent_modules, unchanging_module_to
from .patches import (
    jit_isinstance_as_isinstance,
    onnx_capture_patches,
    program_has_rnn,
    rnn_while_loop_active,
    rnn_while_loop_decompositions,
    scan,
)
from .program import draft_export_assumptions, draft_export_report, fx_node_origins, guards_code, output_paths, unguarded_module
from .pytree import (
    key_path_to_str,
    keys_of_old_style_node,
    pytree_children,
    pytree_keystr,
    tree_flatten_with_path,
    tree_replace_leaves,
)
from .registry import (
    Translations,
    default_opset,
    onnx_registry,
    onnx_registry_with,
    record_onnx_node,
    registered_translation,
    torchlib_min_opset,
)
from .translation import (
    convert_onnx_version,
    linear_rewrite_rules,
    onnxscript_optimizer_parts,
    optimize_onnx_ir,
    rename_onnx_axes,
    translate_to_onnx_ir,
)

__all__ = [
    "LIBRARY_PACKAGES",
    "ShapeGuardEvent",
    "Translations",
    "UnsupportedCacheLayer",
    "additional_inputs_examples",
    "as_if_exporting",
    "clear_dim_marks",
    "condition_holds_on",
    "convert_onnx_version",
    "default_opset",
    "derived_dim_parts",
    "dim_hint_policy",
    "draft_export_assumptions",
    "draft_export_report",
    "copy_program",
    "name_outputs_after_their_nodes",
    "type_promotion_needed",
    "drop_leftover_unbacked_symbols",
    "fx_node_origins",
    "guards_code",
    "holds_kv_cache",
    "insert_type_promotion_nodes",
    "is_constraint_violation_error",
    "is_data_dependent_error",
    "is_kv_cache_type",
    "is_user_file",
    "jit_isinstance_as_isinstance",
    "key_path_to_str",
    "keys_of_old_style_node",
    "kv_cache_leaf_names",
    "module_state",
    "onnx_capture_patches",
    "onnx_decomposition_table",
    "onnx_decomposition_tables",
    "onnx_registry",
    "onnx_registry_with",
    "linear_rewrite_rules",
    "onnxscript_optimizer_parts",
    "optimize_onnx_ir",
    "output_paths",
    "prepare_kv_cache_pytree",
    "program_has_rnn",
    "program_ranges",
    "program_shape_env",
    "pytree_children",
    "pytree_keystr",
    "record_onnx_node",
    "record_shape_guards",
    "register_kv_cache_pytree",
    "registered_translation",
    "remove_assertion_nodes",
    "rename_onnx_axes",
    "replace_graph_module",
    "rnn_while_loop_active",
    "rnn_while_loop_decompositions",
    "retrace_changes_graph",
    "run_decompositions",
    "scan",
    "size_expression",
    "size_oblivious_available",
    "size_oblivious_capture",
    "tensors_state",
    "tolerant_constraint_solver",
    "unchanging_module_to",
    "torch_dim_kind",
    "torchlib_min_opset",
    "trace_tensor_kind",
    "train_mode_dependent_modules",
    "translate_to_onnx_ir",
    "tree_flatten_with_path",
    "tree_replace_leaves",
    "unguarded_module",
    "unbacked_symbols_discarded",
]
