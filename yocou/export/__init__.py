"""Export a trained run as a Hugging Face folder (``yocou export-hf``, :func:`export_hf`).

``configuration_yocou.py`` and ``modeling_yocou.py`` in this package are the ``trust_remote_code`` classes
that the export copies into the folder, beside the model's own code from ``yocou/model/``; they import only torch,
transformers and each other (never yocou, but for a fallback in a try block), and importing ``yocou.export`` does
not import them.
"""

from yocou.export.folder import (
    REMOTE_CODE_FILES,
    REMOTE_CODE_SOURCES,
    export_hf,
    find_tokenizer,
)

__all__ = ["REMOTE_CODE_FILES", "REMOTE_CODE_SOURCES", "export_hf", "find_tokenizer"]
