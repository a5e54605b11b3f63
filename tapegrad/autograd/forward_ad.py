"""``tg.autograd.forward_ad``: forward-mode AD (``dual_level``, ``make_dual``, ``unpack_dual``)."""
from __future__ import annotations
