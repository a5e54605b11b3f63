"""Recurrent layers (PyTorch's ``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells) and the
padding helpers of ``torch.nn.utils.rnn``.

Everything is written in recorded ops (``linear``, ``split``/``chunk``, ``cat``, ``sigmoid``,
``tanh``, ...), so gradients of every order come from those ops' rules; the graph is the ops'
graph, not PyTorch's fused ``*Backward0`` nodes.  Parameters are PyTorch's, with its names and
order (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, then
``..._reverse`` for the other direction, layer by layer), gates stacked as there (LSTM: input,
forget, cell, output; GRU: reset, update, new), all initialised from
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)); the cell equations are PyTorch's CPU ones
(``aten/src/ATen/native/RNN.cpp``).

The per-step cost is what the reverse walk pays at array ops, so a layer and direction does:
one ``linear`` for the input projection of all time steps, cut into steps by one ``split``
(two nodes, whatever the length); then per step one ``linear`` of the hidden state and one
``chunk`` into gates, the rest elementwise.  RNN and LSTM add ``bias_hh`` to ``bias_ih`` once,
before the projection (the sum over time of its gradient is then one reduction); GRU keeps
``bias_hh`` in the step, because its ``b_hn`` is multiplied by the reset gate.  Inside, the
sequence is 2-D and time-major, ``(T * N, H)``, and a state ``(N, H)``: ``linear``'s backward
reshapes operands of more dimensions, and no step has to squeeze or stack.

A ``PackedSequence`` (``pack_padded_sequence``, ``pack_sequence``) runs the same steps on
its time-major data, with the batch shrinking as sequences end: step ``t`` updates the first
``batch_sizes[t]`` states only, a sequence's last state is the one after its last step, and
the reverse direction starts each sequence at its own last step.  ``LSTM(proj_size=P)``
projects each new ``h`` by ``weight_hr`` (P, H), as PyTorch's.
"""
from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from ..core.tensor import Tensor, wrap
from ..ops.torch_api import cat, chunk, index_select, split, stack
from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "pad_sequence", "unpad_sequence", "pack_sequence", "pack_padded_sequence",
           "pad_packed_sequence", "unpack_sequence", "PackedSequence"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_NAMES = {"RNN_TANH": "RNN", "RNN_RELU": "RNN", "LSTM": "LSTM", "GRU": "GRU"}


def _np_dtype(dtype):
    return np.float64 if dtype is None else getattr(dtype, "np", dtype)


def _zeros(shape, like):
    return wrap(np.zeros(shape, np.asarray(like._value).dtype))


def _check_tensor(input, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")


def _steps(t, sizes):
    """``t``'s blocks of ``sizes[k]`` rows (a time-major (sum(sizes), G) projection's steps),
    by one ``split``."""
    if len(sizes) == 1:
        return (t,)
    # sizes never grow: equal first and last means equal blocks (a padded batch)
    return split(t, sizes[0] if sizes[0] == sizes[-1] else list(sizes), 0)


# -- one step of each cell (PyTorch's RNN.cpp): x_proj is x W_ih^T + b_ih -----------------

def _rnn_cell(x_proj, h, w_hh, b_hh, relu):
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def _lstm_cell(x_proj, h, c, w_hh, b_hh):
    i, f, g, o = chunk(F.linear(h, w_hh, b_hh) + x_proj, 4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_cell(xr, xz, xn, h, w_hh, b_hh):
    hr, hz, hn = chunk(F.linear(h, w_hh, b_hh), 3, -1)
    r = (hr + xr).sigmoid()
    z = (hz + xz).sigmoid()
    n = (xn + hn * r).tanh()
    return (h - n) * z + n          # (1 - z) n + z h, in PyTorch's order of operations


class RNNBase(Module):
    """The stacked, optionally bidirectional recurrence shared by ``RNN``, ``LSTM`` and
    ``GRU`` (``mode``: ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
                or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        for arg, value in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(value, bool):
                raise TypeError(f"{arg} should be of type bool, got: {type(value).__name__}")
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int):
                raise TypeError(f"{arg} should be of type int, got: {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{arg} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        out = proj_size or hidden_size     # the width of h, the output of a step
        dt = _np_dtype(dtype)
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else out * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gate, n_in)), ("weight_hh", (gate, out))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + sfx, Parameter(wrap(np.empty(shape, dt))))
                self._all_weights.append([name + sfx for name, _ in shapes])
                self._flat_weights_names += self._all_weights[-1]
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def flatten_parameters(self):
        """Nothing to do: the weights are used where they are (PyTorch packs them for cuDNN)."""

    @property
    def all_weights(self):
        """The parameters per layer and direction: ``[[w_ih, w_hh, b_ih, b_hh], ...]``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _check_state_dims(self, states, batched):
        """The initial states have as many dims as the input (PyTorch's check and message)."""
        lstm = self.mode == "LSTM"
        want = 3 if batched else 2
        if any(s.ndim != want for s in states):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            dims = ", ".join(f"{s.ndim}-D" for s in states)
            raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got "
                               f"({dims}) tensors" if lstm else
                               f"For {kind} input, hx should also be {want}-D but got {dims} "
                               "tensor")

    def forward(self, input, hx=None):
        name = _NAMES[self.mode]
        lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        if packed:   # data (sum of batch_sizes, H_in), time-major, the longest first
            x, batch_sizes, sorted_indices, unsorted_indices = input
            sizes = [int(b) for b in np.asarray(batch_sizes._value
                                                 if isinstance(batch_sizes, Tensor)
                                                 else batch_sizes)]
            T, N, batched = len(sizes), sizes[0], True
        else:
            _check_tensor(input, name)
            if input.ndim not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D"
                                 f"{' tensor' if name == 'RNN' else ''} instead")
            batched = input.ndim == 3
            x = input.transpose(0, 1) if batched and self.batch_first else input
            T, N = x.shape[0], (x.shape[1] if batched else 1)
            sizes = None
        states = None if hx is None else (tuple(hx) if lstm else (hx,))
        if states is not None:
            self._check_state_dims(states, batched)
        w = self.weight_ih_l0
        if x.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({x.dtype})")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        if T == 0:
            raise RuntimeError(f"Expected sequence length to be larger than 0 in {name}")
        dirs = 2 if self.bidirectional else 1
        widths = (self.proj_size or self.hidden_size, self.hidden_size)   # of h, of c
        if batched and not packed:
            x = x.reshape(T * N, self.input_size)
        if states is None:
            h0 = [_zeros((N, widths[0]), x)] * (self.num_layers * dirs)
            c0 = [_zeros((N, widths[1]), x)] * (self.num_layers * dirs) if lstm else h0
        else:
            if packed and sorted_indices is not None:   # the states follow the sorted batch
                states = tuple(index_select(s, 1, sorted_indices) for s in states)
            for k, s in enumerate(states):
                shape = tuple(s.shape) if batched else (s.shape[0], 1) + tuple(s.shape[1:])
                expected = (self.num_layers * dirs, N, widths[k])
                if shape != expected:
                    msg = f"Expected hidden[{k}] size " if lstm else "Expected hidden size "
                    raise RuntimeError(f"{msg}{expected}, got {list(shape)}")
            h0 = self._states(states[0], N)
            c0 = self._states(states[1], N) if lstm else h0
        output, finals_h, finals_c = self._layers(x, sizes or [N] * T, h0, c0)
        h_n = self._stacked(finals_h, batched)
        c_n = self._stacked(finals_c, batched) if lstm else None
        if packed:
            output = PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:   # the states back in the caller's order
                h_n = index_select(h_n, 1, unsorted_indices)
                c_n = index_select(c_n, 1, unsorted_indices) if lstm else None
        elif batched:
            output = output.reshape(T, N, dirs * widths[0])
            if self.batch_first:
                output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if lstm else (output, h_n)

    def _layers(self, x, sizes, h0, c0):
        """The stacked layers over ``x`` (sum(sizes), H_in), time-major with ``sizes[t]``
        rows at step ``t``: the last layer's outputs and every layer's and direction's last
        states."""
        dirs = 2 if self.bidirectional else 1
        finals_h, finals_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                out, h, c = self._direction(layer_input, sizes,
                                            f"_l{layer}" + ("_reverse" if d else ""), d == 1,
                                            h0[k], c0[k])
                outs.append(out)
                finals_h.append(h)
                finals_c.append(c)
            layer_input = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, finals_h, finals_c

    def _states(self, s, N):
        """A given initial state, (L*D, N, H) or unbatched (L*D, H), as L*D pieces (N, H)."""
        if s.ndim == 3:
            s = s.reshape(-1, s.shape[-1])
        return (s,) if s.shape[0] == N else split(s, N, 0)

    def _stacked(self, finals, batched):
        """The last states (N, H) of each layer and direction as (L*D, N, H) (or (L*D, H)
        unbatched)."""
        if len(finals) == 1:
            return finals[0].unsqueeze(0) if batched else finals[0]
        s = cat(finals, 0)
        return s.reshape(len(finals), -1, finals[0].shape[-1]) if batched else s

    def _direction(self, x, sizes, sfx, reverse, h0, c0):
        """One layer in one direction over ``x`` (sum(sizes), H_in), time-major, from states
        ``h0``, ``c0`` (N, H): the outputs (sum(sizes), H) and the last states.  Everything is
        2-D, so no ``linear`` reshapes in its backward.  The batch at step ``t`` is the first
        ``sizes[t]`` rows (fewer only in a packed sequence): forwards a state leaves the
        batch when its sequence ends, backwards it joins when its sequence starts."""
        w_ih, w_hh = getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx)
        b_ih = getattr(self, "bias_ih" + sfx) if self.bias else None
        b_hh = getattr(self, "bias_hh" + sfx) if self.bias else None
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        T, lstm = len(sizes), self.mode == "LSTM"
        h, c = h0, c0
        if reverse and sizes[-1] < sizes[0]:   # only the longest sequences have a last step
            h, c = h[:sizes[-1]], (c[:sizes[-1]] if lstm else c)
        ended = []          # forwards: the last states of sequences that have ended
        seq = [None] * T
        if self.mode == "GRU":
            xr, xz, xn = (_steps(p, sizes) for p in chunk(F.linear(x, w_ih, b_ih), 3, -1))
        else:
            xs = _steps(F.linear(x, w_ih, None if b_ih is None else b_ih + b_hh), sizes)
            relu = self.mode == "RNN_RELU"
        rows = sizes[-1] if reverse else sizes[0]     # the batch of the states h, c
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            n = sizes[t]
            if n < rows:
                ended.append((h[n:], c[n:] if lstm else None))
                h, c = h[:n], (c[:n] if lstm else c)
            elif n > rows:
                h = cat([h, h0[rows:n]], 0)
                c = cat([c, c0[rows:n]], 0) if lstm else c
            rows = n
            if self.mode == "GRU":
                h = _gru_cell(xr[t], xz[t], xn[t], h, w_hh, b_hh)
            elif lstm:
                h, c = _lstm_cell(xs[t], h, c, w_hh, None)
                if w_hr is not None:
                    h = F.linear(h, w_hr)
            else:
                h = _rnn_cell(xs[t], h, w_hh, None, relu)
            seq[t] = h
        if ended:   # the batch's order: the states still running, then the ones that ended
            h = cat([h] + [e[0] for e in reversed(ended)], 0)
            c = cat([c] + [e[1] for e in reversed(ended)], 0) if lstm else c
        return (seq[0] if T == 1 else cat(seq, 0)), h, c


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu), stacked
    ``num_layers`` deep, optionally bidirectional.  Returns ``output, h_n``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM: gates ``i, f, g, o`` from ``x W_ih^T + b_ih + h W_hh^T + b_hh``;
    ``c' = f c + i g``, ``h' = o tanh(c')``.  Returns ``output, (h_n, c_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """GRU: ``r, z`` gates, ``n = tanh(x_n + r (h W_hn^T + b_hn))``, ``h' = (1 - z) n + z h``.
    Returns ``output, h_n``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    """Parameters and checks shared by the cells (``num_chunks`` gates of ``hidden_size``)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dt, gate = _np_dtype(dtype), num_chunks * hidden_size
        self.weight_ih = Parameter(wrap(np.empty((gate, input_size), dt)))
        self.weight_hh = Parameter(wrap(np.empty((gate, hidden_size), dt)))
        if bias:
            self.bias_ih = Parameter(wrap(np.empty(gate, dt)))
            self.bias_hh = Parameter(wrap(np.empty(gate, dt)))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, hx, n_states):
        """(batched, input as (N, H_in), states as (N, H) each) after PyTorch's checks."""
        name = type(self).__name__
        _check_tensor(input, name)
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        states = None if hx is None else (tuple(hx) if n_states > 1 else (hx,))
        for k, s in enumerate(states or ()):
            if s.ndim not in (1, 2):
                what = f"hx[{k}]" if n_states > 1 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {s.ndim}D instead")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected "
                               f"{self.input_size}")
        if states is None:
            states = (_zeros((x.shape[0], self.hidden_size), x),) * n_states
        elif not batched:
            states = tuple(s.unsqueeze(0) for s in states)
        for k, s in enumerate(states):
            if s.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{k} "
                                   f"batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size}")
        return batched, x, states


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        batched, x, (h,) = self._prepare(input, hx, 1)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        h = _rnn_cell(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        batched, x, (h, c) = self._prepare(input, hx, 2)
        h, c = _lstm_cell(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        batched, x, (h,) = self._prepare(input, hx, 1)
        xr, xz, xn = chunk(F.linear(x, self.weight_ih, self.bias_ih), 3, -1)
        h = _gru_cell(xr, xz, xn, h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


# -- torch.nn.utils.rnn -------------------------------------------------------------------

def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes ``(L_k, *)`` into ``(L, B, *)`` (``(B, L, *)`` with
    ``batch_first``), ``L`` the longest, filling with ``padding_value`` on
    ``padding_side``; differentiable (``constant_pad`` and ``stack``)."""
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    elif not hasattr(sequences, "__iter__"):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    if padding_side not in ("left", "right"):
        raise ValueError("Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        n = longest - s.shape[0]
        if n:   # F.pad's amounts run from the last dim to the first
            before, after = (0, n) if padding_side == "right" else (n, 0)
            s = F.pad(s, (0, 0) * (s.ndim - 1) + (before, after), value=padding_value)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of ``pad_sequence``: a list of the ``lengths[k]`` first steps of each
    sequence."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [x[k, :int(n)] for k, n in enumerate(lengths)]


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices",
                                                   "unsorted_indices"])):
    """Sequences of different lengths, time-major without padding: ``data`` holds step 0 of
    every sequence, then step 1 of those that have one, ...; ``batch_sizes[t]`` is how many
    sequences have a step ``t`` (sorted longest first; ``sorted_indices`` is that order of
    the caller's batch, ``unsorted_indices`` its inverse).  Build it with
    ``pack_padded_sequence`` or ``pack_sequence``."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build it with "
                            "pack_padded_sequence or pack_sequence)")
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _inverse_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return self if data is self.data else type(self)(data, *self[1:])

    def to(self, *args, **kwargs):
        return self._with_data(self.data.to(*args, **kwargs))

    def cpu(self):
        return self

    def double(self):
        return self._with_data(self.data.double())

    def float(self):
        return self._with_data(self.data.float())

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _int64(values):
    return wrap(np.asarray(values, dtype=np.int64))


def _inverse_permutation(permutation):
    p = np.asarray(permutation._value if isinstance(permutation, Tensor) else permutation)
    inverse = np.empty_like(p)
    inverse[p] = np.arange(p.size)
    return _int64(inverse)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """``input`` (T, B, *) (``(B, T, *)`` with ``batch_first``) whose sequence ``k`` has
    ``lengths[k]`` steps, as a ``PackedSequence``; differentiable (``index_select``,
    slices, ``cat``).  With ``enforce_sorted`` the lengths must be non-increasing."""
    lengths = np.asarray(lengths._value if isinstance(lengths, Tensor) else lengths,
                         dtype=np.int64).reshape(-1)
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = np.argsort(-lengths, kind="stable")
        lengths, sorted_indices = lengths[order], _int64(order)
    if lengths.size and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    x = input.transpose(0, 1) if batch_first else input
    if x.shape[1] != lengths.size:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lengths.size} (batch_size={x.shape[1]})")
    if sorted_indices is not None:
        x = index_select(x, 1, sorted_indices)
    T = int(lengths[0])
    if T > x.shape[0]:
        raise RuntimeError(f"Expected sequence length to be at most {x.shape[0]}, but got "
                           f"{T}")
    batch_sizes = [int(np.count_nonzero(lengths > t)) for t in range(T)]
    steps = [x[t, :n] for t, n in enumerate(batch_sizes)]
    data = steps[0] if T == 1 else cat(steps, 0)
    return PackedSequence(data, _int64(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of ``pack_padded_sequence``: ``(padded, lengths)``, padded (T, B, *) (or
    ``(B, T, *)``) in the caller's batch order, ``T`` the longest length or ``total_length``;
    ``lengths`` an int64 tensor."""
    data, batch_sizes, _, unsorted_indices = sequence
    sizes = [int(b) for b in np.asarray(batch_sizes._value if isinstance(batch_sizes, Tensor)
                                        else batch_sizes)]
    T, B = len(sizes), sizes[0]
    if total_length is not None:
        if total_length < T:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {T}")
    padded = []
    for step, n in zip(_steps(data, sizes), sizes):
        if n < B:   # F.pad's amounts run from the last dim to the first
            step = F.pad(step, (0, 0) * (step.ndim - 1) + (0, B - n), value=padding_value)
        padded.append(step)
    out = stack(padded, 0)
    if total_length is not None and total_length > T:
        out = F.pad(out, (0, 0) * (out.ndim - 1) + (0, total_length - T), value=padding_value)
    lengths = np.array([sum(1 for n in sizes if n > k) for k in range(B)], dtype=np.int64)
    if unsorted_indices is not None:
        out = index_select(out, 1, unsorted_indices)
        lengths = lengths[np.asarray(unsorted_indices._value)]
    return (out.transpose(0, 1) if batch_first else out), _int64(lengths)


def pack_sequence(sequences, enforce_sorted=True):
    """A list of tensors (L_k, *) as a ``PackedSequence`` (``pad_sequence`` then
    ``pack_padded_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """A ``PackedSequence`` as the list of its sequences, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
