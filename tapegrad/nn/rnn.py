"""Recurrent layers (PyTorch's ``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells).

Each step is written in recorded ops (``linear``, ``sigmoid``, ``tanh``, ``chunk``,
``stack``), so gradients of every order come from those ops' rules; the input projection of
all time steps is one ``linear`` before the loop.  Parameters are PyTorch's, with its names and
order (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, then
``..._reverse`` for the other direction, layer by layer), gates stacked as there (LSTM:
input, forget, cell, output; GRU: reset, update, new), all initialised from
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).  The graph is the ops' graph, not PyTorch's
fused ``*Backward0`` nodes.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.tensor import wrap
from ..ops.torch_api import cat, stack
from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _np_dtype(dtype):
    return np.float64 if dtype is None else getattr(dtype, "np", dtype)


def _rnn_step(x_proj, h, w_hh, b_hh, mode):
    """One step of an RNN (tanh or relu) cell given the input's projection."""
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return pre.tanh() if mode == "RNN_TANH" else pre.relu()


def _lstm_step(x_proj, state, w_hh, b_hh):
    h, c = state
    i, f, g, o = (x_proj + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(x_proj, h, w_hh, b_hh):
    xr, xz, xn = x_proj.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return (1.0 - z) * n + z * h


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if proj_size:
            raise NotImplementedError("LSTM proj_size is not supported")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        dt = _np_dtype(dtype)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                n_in = input_size if layer == 0 else hidden_size * dirs
                shapes = [("weight_ih", (gate, n_in)), ("weight_hh", (gate, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                for name, shape in shapes:
                    setattr(self, name + sfx, Parameter(np.empty(shape, dt)))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
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

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        get = lambda n: getattr(self, n + sfx) if self.bias or "weight" in n else None  # noqa
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def _step(self, x_proj, state, w_hh, b_hh):
        if self.mode == "LSTM":
            return _lstm_step(x_proj, state, w_hh, b_hh)
        if self.mode == "GRU":
            return _gru_step(x_proj, state, w_hh, b_hh)
        return _rnn_step(x_proj, state, w_hh, b_hh, self.mode)

    def forward(self, input, hx=None):
        lstm = self.mode == "LSTM"
        batched = len(input.shape) == 3
        if len(input.shape) not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{len(input.shape)}D instead")
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        T, N = x.shape[0], x.shape[1]
        dirs = 2 if self.bidirectional else 1
        if hx is None:
            h0 = _zeros((self.num_layers * dirs, N, self.hidden_size), x)
            hx = (h0, h0) if lstm else h0
        elif not batched:
            hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
        finals_h, finals_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
                k = layer * dirs + d
                state = (hx[0][k], hx[1][k]) if lstm else hx[k]
                proj = F.linear(layer_input, w_ih, b_ih)             # all steps at once
                steps = range(T - 1, -1, -1) if d else range(T)
                seq = [None] * T
                for t in steps:
                    state = self._step(proj[t], state, w_hh, b_hh)
                    seq[t] = state[0] if lstm else state
                outs.append(stack(seq, 0))
                finals_h.append(state[0] if lstm else state)
                if lstm:
                    finals_c.append(state[1])
            layer_input = outs[0] if dirs == 1 else _cat_last(outs)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        h_n = stack(finals_h, 0)
        if batched and self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
        if lstm:
            c_n = stack(finals_c, 0)
            return output, (h_n, c_n if batched else c_n.squeeze(1))
        return output, h_n


def _zeros(shape, like):
    return wrap(np.zeros(shape, np.asarray(like._value).dtype))


def _cat_last(ts):
    return cat(ts, -1)


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu), stacked
    ``num_layers`` deep, optionally bidirectional."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.__dict__["nonlinearity"] = nonlinearity


class LSTM(RNNBase):
    """LSTM: gates ``i, f, g, o`` from ``x W_ih^T + b_ih + h W_hh^T + b_hh``;
    ``c' = f c + i g``, ``h' = o tanh(c')``.  Returns ``output, (h_n, c_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """GRU: ``r, z`` gates, ``n = tanh(x_n + r (h W_hn^T + b_hn))``, ``h' = (1 - z) n + z h``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dt, gate = _np_dtype(dtype), self._gates * hidden_size
        self.weight_ih = Parameter(np.empty((gate, input_size), dt))
        self.weight_hh = Parameter(np.empty((gate, hidden_size), dt))
        if bias:
            self.bias_ih = Parameter(np.empty(gate, dt))
            self.bias_hh = Parameter(np.empty(gate, dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        return s

    def _prepare(self, input, hx, n_states):
        batched = len(input.shape) == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            h = _zeros((x.shape[0], self.hidden_size), x)
            hx = (h,) * n_states if n_states > 1 else h
        elif not batched:
            hx = tuple(h.unsqueeze(0) for h in hx) if n_states > 1 else hx.unsqueeze(0)
        return batched, x, hx


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        batched, x, h = self._prepare(input, hx, 1)
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh, "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU")
        return h if batched else h.squeeze(0)

    def extra_repr(self):
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""
    _gates = 4

    def forward(self, input, hx=None):
        batched, x, state = self._prepare(input, hx, 2)
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), state, self.weight_hh,
                          self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step."""
    _gates = 3

    def forward(self, input, hx=None):
        batched, x, h = self._prepare(input, hx, 1)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh)
        return h if batched else h.squeeze(0)
