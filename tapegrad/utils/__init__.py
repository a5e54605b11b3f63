"""``tapegrad.utils``: ``data`` (data sets, samplers, ``DataLoader``: PyTorch's
``torch.utils.data``) and ``serialization`` (``tg.save``, ``tg.load``)."""
from __future__ import annotations

from . import data, serialization

__all__ = ["data", "serialization"]
