"""``tapegrad.nn``: modules, parameters, losses and initialisers (PyTorch's ``torch.nn``).

    import tapegrad as tg
    import tapegrad.nn as nn
    import tapegrad.nn.functional as F

    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    loss = F.cross_entropy(model(x), y)
    loss.backward()

``nn.Parameter(t)`` returns a plain leaf tensor that requires grad; a ``Module`` registers any
such tensor assigned as an attribute (see ``tapegrad/nn/modules.py``).
"""
from __future__ import annotations

from . import functional, init, utils
from .modules import (ELU, GELU, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, BatchNorm1d,
                      BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv1d, Conv2d, CrossEntropyLoss,
                      Dropout, Dropout1d, Dropout2d, Dropout3d, Embedding, Flatten, HuberLoss,
                      Identity, L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, MaxPool1d,
                      MaxPool2d, Module, ModuleDict, ModuleList, MSELoss, NLLLoss, Parameter,
                      ParameterDict, ParameterList, ReLU, Sequential, Sigmoid, SiLU,
                      SmoothL1Loss, Softmax, Softplus, Tanh, Unflatten)
from .modules import (CELU, GLU, SELU, CosineEmbeddingLoss, CosineSimilarity, GaussianNLLLoss,
                      Hardshrink, Hardsigmoid, Hardswish, Hardtanh, HingeEmbeddingLoss,
                      KLDivLoss, LogSigmoid, MarginRankingLoss, Mish, PairwiseDistance,
                      PoissonNLLLoss, PReLU, ReLU6, Softmin, SoftMarginLoss, Softshrink,
                      Softsign, Tanhshrink, Threshold, TripletMarginLoss)
from .modules import (ConvTranspose1d, ConvTranspose2d, GroupNorm, InstanceNorm1d,
                      InstanceNorm2d, PixelShuffle, PixelUnshuffle, Upsample,
                      UpsamplingBilinear2d, UpsamplingNearest2d)
from .modules import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, Fold, Unfold
from .modules import MultiLabelSoftMarginLoss, MultiMarginLoss
from .modules import (AlphaDropout, Bilinear, Buffer, ChannelShuffle, Conv3d, ConvTranspose3d,
                      EmbeddingBag,
                      FeatureAlphaDropout, LazyLinear,
                      LocalResponseNorm, LPPool1d, LPPool2d, RMSNorm, RReLU, Softmax2d,
                      TripletMarginWithDistanceLoss)
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                      ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d,
                      ZeroPad2d, ZeroPad3d)
from .attention import (MultiheadAttention, Transformer, TransformerDecoder,
                        TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase

__all__ = ["functional", "init", "Module", "Parameter", "Sequential", "ModuleList",
           "ParameterList", "Identity", "Linear", "ReLU", "LeakyReLU", "Tanh", "Sigmoid",
           "Softmax", "LogSoftmax", "Dropout", "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss",
           "BCELoss", "BCEWithLogitsLoss", "Softplus", "GELU", "SiLU", "ELU", "SmoothL1Loss",
           "utils", "ModuleDict", "Flatten", "Unflatten", "LayerNorm", "Embedding", "BatchNorm1d",
           "BatchNorm2d", "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
           "HuberLoss", "ParameterDict", "AdaptiveAvgPool2d", "Dropout1d", "Dropout2d",
           "Dropout3d", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "RNNBase",
           "RNNCellBase", "ReLU6", "SELU",
           "Mish", "Hardswish", "Hardsigmoid", "Softsign", "LogSigmoid", "Tanhshrink", "Hardtanh",
           "CELU", "Softmin", "Softshrink", "Hardshrink", "Threshold", "GLU", "PReLU",
           "CosineSimilarity", "PairwiseDistance", "KLDivLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss",
           "MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss", "PoissonNLLLoss",
           "GaussianNLLLoss", "TripletMarginLoss", "ConvTranspose1d", "ConvTranspose2d",
           "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "AdaptiveAvgPool1d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer", "Unfold", "Fold", "Conv3d", "ConvTranspose3d", "Buffer", "LazyLinear", "EmbeddingBag", "RMSNorm", "Bilinear",
           "AlphaDropout", "FeatureAlphaDropout", "RReLU", "Softmax2d", "ChannelShuffle",
           "LPPool1d", "LPPool2d", "LocalResponseNorm", "TripletMarginWithDistanceLoss",
           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]
