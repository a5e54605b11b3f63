"""The array-op rows of the layers of ``tapegrad.nn``: convolution, pooling, normalisation,
embedding, and the Huber loss.

Rows as in ``array_ops.py``: a NumPy forward and a vjp written in tapegrad ops, so one rule
serves ``backward()`` and ``create_graph=True``.  Convolution is three rows closed under
their vjps: ``conv`` (im2col and one BLAS matmul per group), its adjoint in the input
``conv_transpose`` (matmul and col2im) and its adjoint in the weight ``conv_weight``; each is
bilinear, so each one's gradients are the other two: every order of derivative works.
Average pooling is a depthwise convolution with a constant kernel; max pooling gathers the
window maxima, and its rule scatters ``g`` back (``ungather``).  The normalisations
(``layer_norm``, ``batch_norm``) write their rule from the inputs in tapegrad ops, so second
derivatives through the batch statistics are exact.

Padding is a tuple of ``(before, after)`` pairs, one per spatial dimension (``"same"``
padding and ``ceil_mode`` pad more after than before).
"""
from __future__ import annotations

import numpy as np

from ..core.shapes import laid_out
from ..core.tensor import Tensor, wrap
from .array_ops import call, defop
from .nn_ops import margin_terms


def value(x):
    """The value of a tensor (or array, or number) as a NumPy array."""
    return np.asarray(x._value if isinstance(x, Tensor) else x)


def _shape(x):
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


# -- convolution --------------------------------------------------------------------------

def out_size(size, kernel, stride, pad, dilation):
    """Positions of a window of ``kernel`` taps ``dilation`` apart, moved by ``stride`` over
    ``size`` elements padded by ``pad = (before, after)``."""
    return (size + pad[0] + pad[1] - dilation * (kernel - 1) - 1) // stride + 1


def _geometry(spatial, kernel, stride, padding, dilation):
    return tuple(out_size(s, k, st, p, d)
                 for s, k, st, p, d in zip(spatial, kernel, stride, padding, dilation))


def _padded(x, padding, fill=0.0):
    if not any(lo or hi for lo, hi in padding):
        return x
    return np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in padding], constant_values=fill)


def _taps(kernel, stride, dilation, out):
    """For each kernel offset ``k``: the slices of the padded input that it meets, one per
    output position (the strided slice ``k d, k d + s, ...``)."""
    for k in np.ndindex(*kernel):
        yield k, (slice(None), slice(None)) + tuple(
            slice(ki * d, ki * d + s * (o - 1) + 1, s)
            for ki, d, s, o in zip(k, dilation, stride, out))


def im2col(xp, kernel, stride, dilation, out):
    """``cols[n, c, k..., o...]``: the padded input ``xp`` under kernel tap ``k`` at output
    position ``o`` (one strided copy per tap)."""
    cols = np.empty(xp.shape[:2] + tuple(kernel) + tuple(out), xp.dtype)
    for k, sl in _taps(kernel, stride, dilation, out):
        cols[(slice(None), slice(None)) + k] = xp[sl]
    return cols


def col2im(cols, padded_shape, kernel, stride, dilation, out):
    """The adjoint of ``im2col``: each tap's columns added back where they were taken."""
    xp = np.zeros(padded_shape, cols.dtype)
    for k, sl in _taps(kernel, stride, dilation, out):
        xp[sl] += cols[(slice(None), slice(None)) + k]
    return xp


def _crop(xp, padding):
    return xp[(slice(None), slice(None)) + tuple(slice(lo, xp.shape[2 + i] - hi)
                                                 for i, (lo, hi) in enumerate(padding))]


def _group_cols(cols, groups):
    """(N, C, K..., O...) -> (N, G, C/G * prod K, prod O): one matrix per sample and group
    (a reshape, no copy)."""
    N, C = cols.shape[:2]
    L = int(np.prod(cols.shape[2 + (cols.ndim - 2) // 2:]))
    return cols.reshape(N, groups, -1, L)


def _conv_forward(x, w, stride, padding, dilation, groups):
    N, O = x.shape[0], w.shape[0]
    out = _geometry(x.shape[2:], w.shape[2:], stride, padding, dilation)
    cols = _group_cols(im2col(_padded(x, padding), w.shape[2:], stride, dilation, out), groups)
    # (G, O/G, C/G K) @ (N, G, C/G K, L): one BLAS product per sample and group
    return np.matmul(w.reshape(groups, O // groups, -1), cols).reshape(N, O, *out)


def _check_conv(x, w, groups):
    if x.ndim != w.ndim:
        raise RuntimeError(f"Expected {w.ndim - 1}D (unbatched) or {w.ndim}D (batched) input "
                           f"to conv{w.ndim - 2}d, but got input of size: {list(x.shape)}")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected "
                           f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but "
                           f"got {x.shape[1]} channels instead")
    if w.shape[0] % groups:
        raise RuntimeError("out_channels must be divisible by groups")


def _spatial_dims(nd):
    return (0,) + tuple(range(2, 2 + nd))


@defop("conv", "ConvolutionBackward0", method=False)
def conv(x, w, b=None, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    """Cross-correlation of ``x`` (N, C, *S) with ``w`` (O, C/groups, *K), plus ``b`` (O,)."""
    _check_conv(x, w, groups)
    out = _geometry(x.shape[2:], w.shape[2:], stride, padding, dilation)
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Calculated output size: {list(out)}. Output size is too small")
    y = _conv_forward(x, w, stride, padding, dilation, groups)
    if b is not None:
        y += b.reshape((-1,) + (1,) * (x.ndim - 2))
    return y


@conv.defvjp
def _(g, ans, x, w, b=None, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    # y = conv(x, w) + b is bilinear: d/dx is the adjoint in x (a transposed convolution),
    # d/dw the adjoint in w, d/db the sum of g over the batch and positions
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (lambda: call("conv_transpose", g, w, input_shape=_shape(x), **p),
            lambda: call("conv_weight", x, g, weight_shape=_shape(w), **p),
            None if b is None else
            (lambda: call("sum", g, dim=_spatial_dims(len(_shape(x)) - 2))))


@defop("conv_transpose", "ConvolutionBackward0", method=False)
def conv_transpose(g, w, b=None, input_shape=(), stride=(1,), padding=((0, 0),),
                   dilation=(1,), groups=1):
    """The adjoint of ``conv`` in its input: ``<conv_transpose(g, w), h> = <g, conv(h, w)>``
    for every ``h`` of ``input_shape`` (plus ``b`` per channel: PyTorch's transposed
    convolution, whose weight is ``w`` (C_in, C_out/groups, K...))."""
    y = _conv_transpose(g, w, input_shape, stride, padding, dilation, groups)
    if b is not None:
        y += b.reshape((-1,) + (1,) * (y.ndim - 2))
    return y


def _conv_transpose(g, w, input_shape, stride, padding, dilation, groups):
    N, O = g.shape[0], g.shape[1]
    out, kernel, C = g.shape[2:], w.shape[2:], input_shape[1]
    gm = g.reshape(N, groups, O // groups, -1)
    # (G, C/G K, O/G) @ (N, G, O/G, L) -> (N, G, C/G K, L), i.e. (N, C, K..., O...)
    cols = np.matmul(w.reshape(groups, O // groups, -1).swapaxes(1, 2), gm)
    cols = cols.reshape(N, C, *kernel, *out)
    padded = (N, C) + tuple(s + lo + hi for s, (lo, hi) in zip(input_shape[2:], padding))
    return _crop(col2im(cols, padded, kernel, stride, dilation, out), padding)


@conv_transpose.defvjp
def _(h, ans, g, w, b=None, input_shape=(), stride=(1,), padding=((0, 0),), dilation=(1,),
      groups=1):
    # <h, T(g, w)> = <conv(h, w), g>: d/dg = conv(h, w), d/dw = conv_weight(h, g);
    # d/db = the sum of h over the batch and positions
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (lambda: call("conv", h, w, **p),
            lambda: call("conv_weight", h, g, weight_shape=_shape(w), **p),
            None if b is None else
            (lambda: call("sum", h, dim=_spatial_dims(len(_shape(h)) - 2))))


@defop("conv_weight", "ConvolutionBackward0", method=False)
def conv_weight(x, g, weight_shape=(), stride=(1,), padding=((0, 0),), dilation=(1,),
                groups=1):
    """The adjoint of ``conv`` in its weight: ``<conv_weight(x, g), v> = <g, conv(x, v)>``
    for every ``v`` of ``weight_shape``."""
    N, O = g.shape[0], g.shape[1]
    kernel = weight_shape[2:]
    cols = _group_cols(im2col(_padded(x, padding), kernel, stride, dilation, g.shape[2:]),
                       groups)                                         # (N, G, C/G K, L)
    gm = g.reshape(N, groups, O // groups, -1)                           # (N, G, O/G, L)
    # sum over samples of (O/G, L) @ (L, C/G K); the transposed operand is a BLAS layout
    return np.matmul(gm, cols.swapaxes(2, 3)).sum(0).reshape(weight_shape)


@conv_weight.defvjp
def _(h, ans, x, g, weight_shape=(), stride=(1,), padding=((0, 0),), dilation=(1,), groups=1):
    # <h, W(x, g)> = <conv(x, h), g>: d/dx = conv_transpose(g, h), d/dg = conv(x, h)
    p = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (lambda: call("conv_transpose", g, h, input_shape=_shape(x), **p),
            lambda: call("conv", x, h, **p))


# -- unfold / fold ----------------------------------------------------------------------------

@defop("unfold", "Im2ColBackward0", method=False, saves=False)
def unfold(x, kernel_size=(1, 1), dilation=(1, 1), padding=((0, 0), (0, 0)), stride=(1, 1)):
    """The sliding blocks of ``x`` (N, C, H, W) [or (C, H, W)] as columns:
    (N, C * kH * kW, L)."""
    if x.ndim == 3:
        return unfold(x[None], kernel_size, dilation, padding, stride)[0]
    out = _geometry(x.shape[2:], kernel_size, stride, padding, dilation)
    cols = im2col(_padded(x, padding), kernel_size, stride, dilation, out)
    return cols.reshape(x.shape[0], -1, int(np.prod(out)))


# the adjoint of taking the blocks is adding them back (fold), and the reverse
unfold.defvjp(lambda g, ans, x, kernel_size=(1, 1), dilation=(1, 1), padding=((0, 0), (0, 0)),
              stride=(1, 1): (call("fold", g, output_size=tuple(_shape(x)[-2:]),
                                   kernel_size=kernel_size, dilation=dilation, padding=padding,
                                   stride=stride),))


@defop("fold", "Col2ImBackward0", method=False, saves=False)
def fold(cols, output_size=(1, 1), kernel_size=(1, 1), dilation=(1, 1),
         padding=((0, 0), (0, 0)), stride=(1, 1)):
    """The blocks (N, C * kH * kW, L) [or (C * kH * kW, L)] added back into an
    (N, C, *output_size) array."""
    if cols.ndim == 2:
        return fold(cols[None], output_size, kernel_size, dilation, padding, stride)[0]
    N, ck = cols.shape[0], cols.shape[1]
    kk = int(np.prod(kernel_size))
    out = _geometry(output_size, kernel_size, stride, padding, dilation)
    if ck % kk or int(np.prod(out)) != cols.shape[2]:
        raise RuntimeError(f"Given output_size={list(output_size)}, kernel_size="
                           f"{list(kernel_size)}, dilation={list(dilation)}, padding="
                           f"{[p for p, _ in padding]}, stride={list(stride)}, expected size of "
                           f"input's dimension 2 to match the calculated number of sliding "
                           f"blocks {' * '.join(map(str, out))} = {int(np.prod(out))}, but got "
                           f"input.size(2)={cols.shape[2]}.")
    C = ck // kk
    padded = (N, C) + tuple(n + lo + hi for n, (lo, hi) in zip(output_size, padding))
    blocks = cols.reshape((N, C) + tuple(kernel_size) + tuple(out))
    return _crop(col2im(blocks, padded, kernel_size, stride, dilation, out), padding)


fold.defvjp(lambda h, ans, cols, output_size=(1, 1), kernel_size=(1, 1), dilation=(1, 1),
            padding=((0, 0), (0, 0)), stride=(1, 1):
            (call("unfold", h, kernel_size=kernel_size, dilation=dilation, padding=padding,
                  stride=stride),))


# -- pooling ------------------------------------------------------------------------------

def pool_padding(spatial, kernel, stride, padding, dilation, ceil_mode):
    """``(before, after)`` per dimension: ``ceil_mode`` adds a last, partial window when it
    starts inside the input or its left padding (PyTorch's rule)."""
    pads = []
    for s, k, st, p, d in zip(spatial, kernel, stride, padding, dilation):
        span = d * (k - 1) + 1
        n = (s + 2 * p - span + ((st - 1) if ceil_mode else 0)) // st + 1
        if ceil_mode and (n - 1) * st >= s + p:
            n -= 1
        pads.append((p, max(p, (n - 1) * st + span - s - p)))
    return tuple(pads)


def window_max(x, kernel, stride, padding, dilation):
    """The maxima of the windows and their flat positions in each (H*W...) input plane."""
    N, C, spatial = x.shape[0], x.shape[1], x.shape[2:]
    out = _geometry(spatial, kernel, stride, padding, dilation)
    cols = im2col(_padded(x, padding, -np.inf), kernel, stride, dilation, out)
    cols = cols.reshape(N, C, -1, *out)
    arg = np.argmax(cols, axis=2)                           # the first maximum, as PyTorch
    nan = np.isnan(cols).any(axis=2)                        # a NaN is the maximum
    if nan.any():
        arg = np.where(nan, np.argmax(np.isnan(cols), axis=2), arg)
    ans = np.take_along_axis(cols, arg[:, :, None], axis=2)[:, :, 0]
    taps = np.array(list(np.ndindex(*kernel))).reshape(-1, len(kernel))   # (K, nd)
    flat = np.zeros(arg.shape, np.int64)
    for i, (s, st, (lo, _), d) in enumerate(zip(spatial, stride, padding, dilation)):
        pos = np.arange(out[i]).reshape((-1,) + (1,) * (len(out) - 1 - i)) * st - lo
        flat = flat * s + pos + taps[arg, i] * d
    return ans, flat


@defop("max_pool2d", "MaxPool2DWithIndicesBackward0", method=False)
def max_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)),
               dilation=(1, 1)):
    """The maximum of each window of ``x`` (N, C, H, W) [or (C, H, W)]; padding counts as
    -inf."""
    if x.ndim == 3:
        return window_max(x[None], kernel_size, stride, padding, dilation)[0][0]
    return window_max(x, kernel_size, stride, padding, dilation)[0]


@max_pool2d.defvjp
def _(g, ans, x, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1)):
    # d max / dx = 1 at the (first) position of each window's maximum: g scattered there
    shape = _shape(x)
    xv = value(x)
    _, flat = window_max(xv if xv.ndim == 4 else xv[None], kernel_size, stride, padding,
                         dilation)
    N, C = flat.shape[:2]
    plane = call("ungather", call("reshape", g, (N, C, -1)), (N, C, int(np.prod(shape[-2:]))),
                 2, flat.reshape(N, C, -1))
    return (call("reshape", plane, shape),)


def pool_divisor(spatial, kernel, stride, padding, count_include_pad, given_padding):
    """The divisor of each window: its size within the input and its symmetric padding
    (``count_include_pad``) or within the input only; never the extra ``ceil_mode`` part."""
    mask = np.zeros(tuple(s + lo + hi for s, (lo, hi) in zip(spatial, padding)))
    inner = tuple(slice(lo - (p if count_include_pad else 0),
                        lo + s + (p if count_include_pad else 0))
                  for s, (lo, _), p in zip(spatial, padding, given_padding))
    mask[inner] = 1.0
    out = _geometry(spatial, kernel, stride, padding, (1,) * len(spatial))
    cols = im2col(mask[None, None], kernel, stride, (1,) * len(spatial), out)
    return cols.reshape(-1, *out).sum(0)


@defop("avg_pool2d", "AvgPool2DBackward0", method=False, saves=False)
def avg_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), divisor=1.0):
    """The sum of each window of ``x`` (N, C, H, W) [or (C, H, W)], zero-padded, over
    ``divisor``."""
    if x.ndim == 3:
        return avg_pool2d(x[None], kernel_size, stride, padding, divisor)[0]
    out = _geometry(x.shape[2:], kernel_size, stride, padding, (1, 1))
    cols = im2col(_padded(x, padding), kernel_size, stride, (1, 1), out)
    return cols.reshape(*x.shape[:2], -1, *out).sum(2) / divisor


@avg_pool2d.defvjp
def _(g, ans, x, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), divisor=1.0):
    # a depthwise convolution with the kernel of ones: its adjoint, applied to g / divisor
    shape = _shape(x)
    batched = shape if len(shape) == 4 else (1,) + shape
    C = batched[1]
    ones = wrap(np.ones((C, 1) + tuple(kernel_size)))
    g = g / wrap(np.asarray(divisor, dtype=np.float64))
    dx = call("conv_transpose", g if len(shape) == 4 else call("unsqueeze", g, 0), ones,
              input_shape=batched, stride=stride, padding=padding, dilation=(1, 1), groups=C)
    return (dx if len(shape) == 4 else call("squeeze", dx, 0),)


# -- normalisation ------------------------------------------------------------------------

def _normalized(x, axes, eps):
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps), mu, var


def _affine(y, w, b, shape):
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def _normalize_vjp(g, x, w, b, axes, param_shape, eps, stats=None):
    """Gradients of ``y = xhat w + b``, ``xhat = (x - mean) / sqrt(var + eps)`` over ``axes``
    (the batch statistics; ``stats = (mean, var)`` fixed ones), in tapegrad ops."""
    nd = len(_shape(x))
    if stats is None:
        mu = call("mean", x, dim=axes, keepdim=True)
        xc = x - mu
        rstd = 1.0 / (call("mean", xc * xc, dim=axes, keepdim=True) + eps).sqrt()
    else:
        xc = x - wrap(stats[0].reshape(param_shape))
        rstd = wrap(1.0 / np.sqrt(stats[1].reshape(param_shape) + eps))
    xhat = xc * rstd
    wb = None if w is None else call("reshape", w, param_shape)
    gxhat = g if wb is None else g * wb
    # the dims that w and b do not span: their gradients sum over them
    free = tuple(k for k in range(nd) if param_shape[k] == 1)

    def dx():
        if stats is not None:
            return gxhat * rstd
        # d xhat: rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat))
        return rstd * (gxhat - call("mean", gxhat, dim=axes, keepdim=True)
                       - xhat * call("mean", gxhat * xhat, dim=axes, keepdim=True))

    def param_grad(t):
        return call("reshape", call("sum", t, dim=free), _shape(w if w is not None else b))

    return (dx, None if w is None else (lambda: param_grad(g * xhat)),
            None if b is None else (lambda: param_grad(g)))


def _ln_axes(x, normalized_shape):
    k = len(normalized_shape)
    if tuple(x.shape[x.ndim - k:]) != tuple(normalized_shape) or x.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input "
                           f"with shape [*, {', '.join(map(str, normalized_shape))}], but got "
                           f"input of size{list(x.shape)}")
    return tuple(range(x.ndim - k, x.ndim))


@defop("layer_norm", "NativeLayerNormBackward0", method=False)
def layer_norm(x, w=None, b=None, normalized_shape=(), eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * w + b`` over the last ``len(normalized_shape)`` dims
    (biased variance)."""
    axes = _ln_axes(x, normalized_shape)
    return _affine(_normalized(x, axes, eps)[0], w, b, tuple(normalized_shape))


@layer_norm.defvjp
def _(g, ans, x, w=None, b=None, normalized_shape=(), eps=1e-5):
    nd, k = len(_shape(x)), len(normalized_shape)
    axes = tuple(range(nd - k, nd))
    shape = (1,) * (nd - k) + tuple(normalized_shape)
    return _normalize_vjp(g, x, w, b, axes, shape, eps)


def _bn_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


@defop("batch_norm", "NativeBatchNormBackward0", method=False)
def batch_norm(x, w=None, b=None, stats=None, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * w + b`` per channel (dim 1): the batch statistics
    (biased variance), or fixed ``stats = (mean, var)`` (evaluation with running stats)."""
    shape = _bn_shape(x)
    if stats is None:
        y = _normalized(x, _spatial_dims(x.ndim - 2), eps)[0]
    else:
        y = (x - stats[0].reshape(shape)) / np.sqrt(stats[1].reshape(shape) + eps)
    return _affine(y, w, b, shape)


@batch_norm.defvjp
def _(g, ans, x, w=None, b=None, stats=None, eps=1e-5):
    xs = _shape(x)
    shape = (1, xs[1]) + (1,) * (len(xs) - 2)
    return _normalize_vjp(g, x, w, b, _spatial_dims(len(xs) - 2), shape, eps, stats)


# -- embedding ----------------------------------------------------------------------------

@defop("embedding", "EmbeddingBackward0", method=False, edges=1, saves=False)
def embedding(w, idx, padding_idx=None):
    """Rows ``w[idx]`` of the table ``w`` (V, D) for integer indices ``idx``."""
    if idx.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {idx.dtype} instead "
                           "(while checking arguments for embedding)")
    if idx.size and (idx.min() < 0 or idx.max() >= w.shape[0]):
        raise IndexError("index out of range in self")
    return w[idx]


@embedding.defvjp
def _(g, ans, w, idx, padding_idx=None):
    # d w[idx] / dw: g added at the rows idx (repeats add up); the padding row gets none
    iv = value(idx)
    if padding_idx is not None:
        g = g * wrap((iv != padding_idx)[..., None].astype(np.float64))
    return (call("unindex", g, _shape(w), (iv,)), None)


# -- padding ------------------------------------------------------------------------------

def pad_pairs(ndim, pad):
    """PyTorch's ``pad`` (last dim first: ``(left, right, top, bottom, ...)``) as one
    ``(before, after)`` pair per dimension of an ``ndim``-d array."""
    pairs = [(0, 0)] * ndim
    for k in range(len(pad) // 2):
        pairs[ndim - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    return pairs


@defop("constant_pad", "ConstantPadNdBackward0", method=False, saves=False)
def constant_pad(x, pad=(), value=0.0):
    """``x`` padded with ``value`` (negative amounts crop)."""
    pairs = pad_pairs(x.ndim, pad)
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(pairs, x.shape))
    x = x[crop]
    return np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in pairs], constant_values=value)


# the adjoint of padding is cropping: padding by the negated amounts (with zeros)
constant_pad.defvjp(lambda g, ans, x, pad=(), value=0.0:
                    (call("constant_pad", g, pad=tuple(-p for p in pad), value=0.0),))


def pad_index(shape, pad, mode):
    """The index that pads an array of ``shape`` by ``pad`` in ``mode`` ("reflect",
    "replicate", "circular"): one integer array per padded dimension, on an open mesh."""
    pairs = pad_pairs(len(shape), pad)
    k = len(pad) // 2
    lead = len(shape) - k
    picks = []
    for (lo, hi), n in list(zip(pairs, shape))[lead:]:
        i = np.arange(-lo, n + hi)
        if mode == "reflect":
            i = np.abs(i)
            i = np.where(i > n - 1, 2 * (n - 1) - i, i)
        elif mode == "replicate":
            i = np.clip(i, 0, n - 1)
        else:   # circular
            i = i % n
        picks.append(i)
    return (slice(None),) * lead + tuple(np.ix_(*picks))


def _index_pad_node(x, pad=(), mode="reflect"):
    if mode == "circular":
        return "CopySlices"
    return f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{len(pad) // 2}DBackward0"


@defop("index_pad", _index_pad_node, method=False, saves=False)
def index_pad(x, pad=(), mode="reflect"):
    """``x`` padded by reflection (without the edge), replication of the edge, or wrapping."""
    return x[pad_index(x.shape, pad, mode)]


# each output element is one input element: the gradient is added back where it came from
index_pad.defvjp(lambda g, ans, x, pad=(), mode="reflect":
                 (call("unindex", g, _shape(x), pad_index(_shape(x), pad, mode)),))


# -- losses -------------------------------------------------------------------------------

def _reduce(loss, reduction, operands=()):
    if reduction == "none":   # (laid out as PyTorch's kernel over the operands lays it out)
        return laid_out(loss, operands)
    return loss.sum() if reduction == "sum" else loss.mean()


@defop("huber_loss", "HuberLossBackward0", method=False)
def huber_loss(x, y, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere, d = x - y."""
    a = np.abs(x - y)
    return _reduce(np.where(a < delta, 0.5 * a * a, delta * (a - 0.5 * delta)), reduction,
                   (x, y))


@huber_loss.defvjp
def _(g, ans, x, y, reduction="mean", delta=1.0):
    # d/dd = clamp(d, -delta, delta)
    d = x - y
    n = float(np.prod(np.broadcast_shapes(_shape(x), _shape(y))))
    gd = (g / n if reduction == "mean" else g) * d.clamp(-delta, delta)
    return (gd, lambda: -gd)


@defop("soft_margin_loss_backward", "SoftMarginLossBackwardBackward0", method=False)
def soft_margin_loss_backward(g, x, y, reduction="mean"):
    """PyTorch's ``soft_margin_loss_backward``: ``((y z) (-norm)) / (1 + z) g`` with
    ``z = exp(-y x)``, its own op so that a second derivative is PyTorch's closed form (the
    quotient rule through its ops cancels: 1e-3 off at |x y| = 30)."""
    norm = 1.0 / x.size if reduction == "mean" else 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.exp(-y * x)
        return y * z * -norm / (z + 1.0) * g


@soft_margin_loss_backward.defvjp
def _(gg, ans, g, x, y, reduction="mean"):
    # PyTorch's soft_margin_loss_double_backward(_grad_output)
    def dg():
        if reduction == "none":
            return call("soft_margin_loss_backward", gg, x, y, reduction=reduction)
        ones = wrap(np.ones(np.shape(_values(g))))
        return (call("soft_margin_loss_backward", ones, x, y, reduction=reduction) * gg).sum()

    def dx():
        z = (x * -y).exp()
        res = y * y * z / ((z + 1.0) * (z + 1.0))
        if reduction == "mean":
            res = res / float(np.size(_values(x)))
        return gg * g * res
    return (dg, dx, None)


@defop("multi_margin_loss_backward", "NotImplemented", method=False, saves=False)
def multi_margin_loss_backward(g, x, t, weight=None, p=1, margin=1.0, reduction="mean"):
    """PyTorch's ``multi_margin_loss_backward`` kernel: each active term's derivative ``s``
    (or ``2 s z`` for ``p == 2``; ``s`` is 1 / C, 1 / (N C) for the mean) times
    ``weight[y]``, the target class ``0 -`` their sum in class order, all times the output's
    gradient ``g``.  PyTorch has no derivative for it (``NotImplemented``)."""
    rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    n, c = rows.shape
    z, active, y, wy = margin_terms(rows, t, weight, p, margin)
    s = rows.dtype.type(1.0 / (n * c) if reduction == "mean" else 1.0 / c)
    h = np.broadcast_to(s, z.shape) if p == 1 else (2 * s) * z
    if wy is not None:
        h = h * wy
    gi = np.where(active, h, 0.0).astype(rows.dtype)
    if c:
        gi[np.arange(n), y] = 0.0 - np.cumsum(gi, axis=1)[:, -1]
    g = np.asarray(g, rows.dtype)
    gi = gi * (g if reduction != "none" or g.ndim == 0 else g.reshape(n, 1))
    return gi.reshape(x.shape)


def _no_multi_margin_second_derivative(gg, ans, *args, **params):
    raise RuntimeError("derivative for aten::multi_margin_loss_backward is not implemented")


multi_margin_loss_backward.defvjp(_no_multi_margin_second_derivative)


def _values(t):
    return t._value if isinstance(t, Tensor) else t


__all__ = ["conv", "conv_transpose", "conv_weight", "max_pool2d", "avg_pool2d", "layer_norm",
           "batch_norm", "embedding", "huber_loss", "out_size", "pool_padding", "pool_divisor",
           "window_max", "im2col", "col2im", "constant_pad", "index_pad", "pad_pairs",
           "pad_index", "unfold", "fold"]
