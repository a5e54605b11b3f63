"""Attention layers (PyTorch's ``nn.MultiheadAttention``, the ``nn.Transformer`` and its
encoder and decoder layers), composed of recorded ops (``linear``, ``matmul``, ``softmax``),
with PyTorch's parameter names, order, initialisation and equations
(``torch.nn.functional.multi_head_attention_forward``)."""
from __future__ import annotations

import copy
import math

import numpy as np

from ..core.dtypes import get_default_dtype
from ..core.tensor import Tensor, wrap
from . import functional as F
from . import init
from .modules import Dropout, LayerNorm, Linear, Module, ModuleList, Parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
           "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """A ``Linear`` (PyTorch's name for the output projection of attention)."""


def _additive_mask(mask, like):
    """A boolean mask (True: not allowed) as 0 / -inf; a float mask as it is."""
    m = np.asarray(mask._value if isinstance(mask, Tensor) else mask)
    if m.dtype == np.bool_:
        return wrap(np.where(m, -np.inf, 0.0).astype(np.asarray(like._value).dtype))
    return mask if isinstance(mask, Tensor) else wrap(m)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim / num_heads``: the inputs projected
    by ``in_proj_weight`` (3 E, E) and ``in_proj_bias``, ``softmax(q k^T / sqrt(d)) v`` per
    head, then ``out_proj``.  Returns the output and (``need_weights``) the attention weights,
    averaged over the heads unless ``average_attn_weights=False``."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if add_bias_kv or add_zero_attn or (kdim not in (None, embed_dim)) \
                or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and "
                                      "kdim/vdim other than embed_dim are not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first, self.head_dim = batch_first, embed_dim // num_heads
        self.kdim = self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        dt = np.float64 if dtype is None else getattr(dtype, "np", dtype)
        self.in_proj_weight = Parameter(wrap(np.empty((3 * embed_dim, embed_dim), dt)))
        self.register_parameter("q_proj_weight", None)
        self.register_parameter("k_proj_weight", None)
        self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(wrap(np.empty(3 * embed_dim, dt)))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                         dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = len(query.shape) == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        L, N, E = query.shape
        S = key.shape[0]
        H, hd = self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        q = F.linear(query, wq, bq).reshape(L, N * H, hd).transpose(0, 1)
        k = F.linear(key, wk, bk).reshape(S, N * H, hd).transpose(0, 1)
        v = F.linear(value, wv, bv).reshape(S, N * H, hd).transpose(0, 1)
        mask = None
        if is_causal and attn_mask is None:
            attn_mask = np.triu(np.ones((L, S), bool), 1)
        if attn_mask is not None:
            mask = _additive_mask(attn_mask, q)
            if len(mask.shape) == 2:
                mask = mask.unsqueeze(0)
        if key_padding_mask is not None:
            kp = _additive_mask(key_padding_mask, q).reshape(N, 1, 1, S).expand(N, H, 1, S) \
                .reshape(N * H, 1, S)
            mask = kp if mask is None else mask + kp
        scores = (q * math.sqrt(1.0 / hd)) @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, -1)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout)
        out = (weights @ v).transpose(0, 1).reshape(L * N, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(L, N, E)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        weights = weights.reshape(N, H, L, S)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: self-attention, with ``cross_attention``
    a second attention (to the encoder's memory), a feed-forward block, a ``LayerNorm`` and a
    dropout per block; PyTorch's names and registration order (so its state dicts load)."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                 batch_first, norm_first, bias, dtype, cross_attention):
        super().__init__()

        def attention():
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                      batch_first=batch_first, dtype=dtype)
        self.self_attn = attention()
        if cross_attention:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        blocks = 3 if cross_attention else 2
        for k in range(1, blocks + 1):
            setattr(self, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                dtype=dtype))
        for k in range(1, blocks + 1):
            setattr(self, f"dropout{k}", Dropout(dropout))
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        last = self.dropout3 if "dropout3" in self._modules else self.dropout2
        return last(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each with a residual connection and
    ``LayerNorm`` (after, or before with ``norm_first``), as PyTorch's."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                         batch_first, norm_first, bias, dtype, cross_attention=False)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm``."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        return out if self.norm is None else self.norm(out)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over the target, attention to the encoder's ``memory``, and a
    feed-forward block, each with a residual connection and ``LayerNorm`` (after, or before
    with ``norm_first``), as PyTorch's."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                         batch_first, norm_first, bias, dtype, cross_attention=True)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` applied in turn to the target (each
    attending to ``memory``), then ``norm``."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return out if self.norm is None else self.norm(out)


class Transformer(Module):
    """An encoder (``num_encoder_layers``) and a decoder (``num_decoder_layers``), each
    ending in a ``LayerNorm``; the matrices initialised by ``xavier_uniform_``, as
    PyTorch's."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        common = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                      layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                      norm_first=norm_first, bias=bias, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **common), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **common), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        if src.dim() == 3 and src.shape[0 if self.batch_first else 1] \
                != tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask (sz, sz): -inf above the diagonal, 0 elsewhere."""
        dt = get_default_dtype() if dtype is None else dtype
        return wrap(np.triu(np.full((sz, sz), -np.inf), 1).astype(dt.np))
