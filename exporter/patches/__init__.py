"""Model patches offered as fixes: rewrites of known export-hostile idioms in library code.

Each patch (:class:`Patch`) is a declared object: its ``name``, the ``idiom`` it replaces, the
``symptom`` that idiom gives an export, the targets it finds on a model's classes and module
functions, and the ``diff`` of what it replaces. A patch runs only when asked:
``ExportOptions(patches=("pos_embed_interpolation",))``, or ``session.apply_suggested_fixes()``
when ``session.suggested_fixes`` lists it (after a failed capture or verify). The capture stage
enters :func:`applied` around ``torch.export``; on exit every class and module is as before,
and the user's module object is never changed.

* ``pos_embed_interpolation`` (:mod:`.pos_embed`): ViT-family position-embedding interpolation
  that returns the stored table at the training size (DINOv2, ViT, CLIP, Swin, ...).
* ``tf_same_padding`` (:mod:`.tf_padding`): TensorFlow SAME padding that branches on the input
  size (MobileNetV1/V2).
* ``pad_to_patch_multiple`` (:mod:`.maybe_pad`): Swin-family ``maybe_pad``, padding to a
  multiple of the patch size only when the size needs it (FocalNet, Swin, Swinv2, ...).
* ``selective_scan_loop``, ``rwkv_attention_scan``, ``linear_rnn_scan``: recurrences written as
  Python loops over the sequence, as one ``scan`` (Mamba, Jamba, RWKV, RecurrentGemma).
* ``delta_rule_scan`` (:mod:`.delta_rule_scan`): the chunked delta rule's loop over chunks, as
  one ``scan`` (Qwen3-Next, Qwen3.5, OLMo-Hybrid, Kimi-Linear, Bailing-Hybrid).
* ``unfold_resize`` (MobileViT), ``range_list_tensor`` (CPM-Ant).
* ``sinusoidal_positions`` (:mod:`.sinusoidal_table`): a sinusoidal position table that eager
  PyTorch grows past its rows, computed for the sequence at hand (M2M100, NLLB, FSMT, XGLM, ...).

Importing this package imports neither torch nor the models' libraries.
"""

from .base import Patch, PatchTarget, SuggestedPatch
from .registry import PATCH_NAMES, PATCHES, applied, check_patch_names, patch_named, suggested_patches

__all__ = [
    "PATCHES", "PATCH_NAMES", "Patch", "PatchTarget", "SuggestedPatch", "applied", "check_patch_names",
    "patch_named", "suggested_patches",
]
