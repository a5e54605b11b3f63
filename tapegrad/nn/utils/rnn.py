"""``tapegrad.nn.utils.rnn`` (PyTorch's ``torch.nn.utils.rnn``): packed sequences and the
padding helpers, defined beside the recurrent layers that read them (``tapegrad/nn/rnn.py``)."""
from __future__ import annotations

from ..rnn import (PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                   pad_sequence, unpack_sequence, unpad_sequence)

__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence",
           "pad_sequence", "unpack_sequence", "unpad_sequence"]
